import { test } from "uvu";
import * as assert from "uvu/assert";
import { computeBudget } from "../harness/budget/arithmetic.js";
import { compareWithLlamaCpp, COMPARISON_TOLERANCE } from "../harness/budget/compare.js";
import { llamaCppAllocations, memoryGate } from "../harness/budget/memory-gate.js";
import { measureLlamaCpp } from "../harness/budget/measure-llamacpp.js";
import { modelShape } from "../harness/budget/model-shape.js";
import { budgetFile, loadDevice, loadPolicy } from "../harness/budget/policy.js";
import { ensureFixture } from "../harness/fixtures/registry.js";
import { readGgufHeader } from "../harness/gguf/read.js";

test("the llama.cpp-on-CPU budget is within 10% of what llama.cpp allocates (qwen35-tiny:Q4_K, 4 slots of 512)", async () => {
  const path = await ensureFixture("qwen35-tiny", "Q4_K");
  const measurement = await measureLlamaCpp(path, { contextSize: 512, sequences: 4, batchSize: 512, kvCacheType: "F32", flashAttention: false, threads: 1 });
  // Every buffer llama.cpp names must have been read, or the comparison compares nothing.
  assert.ok(measurement.buffers.model > 0 && measurement.buffers.kv > 0 && measurement.buffers.recurrent > 0 && measurement.buffers.compute > 0, JSON.stringify(measurement.buffers));
  const row = compareWithLlamaCpp("qwen35-tiny:Q4_K", modelShape(readGgufHeader(path), path), loadPolicy(budgetFile("policies", "llamacpp-cpu")), loadDevice(budgetFile("devices", "cpu-host")), { contextPerSlot: 512, slots: 4, batchTokens: 512 }, measurement);
  assert.ok(Math.abs(row.error) <= COMPARISON_TOLERANCE, `predicted ${row.predicted.total} B vs measured ${row.measured.total} B (${(row.error * 100).toFixed(1)}%)`);
  // KV and recurrent state are exact arithmetic: within llama.cpp's two-decimal MiB rounding.
  assert.ok(Math.abs(row.predicted.kv - row.measured.kv) <= 6000 && Math.abs(row.predicted.recurrent - row.measured.recurrent) <= 6000, JSON.stringify(row));
});

const settings = { contextSize: 512, batchSize: 512, kvCacheType: "F32", flashAttention: false, threads: 1 } as const;

test("memory gate: llama.cpp's real allocations pass; a FAKE twin and real KV for more slots than asked fail, naming the category", async () => {
  const path = await ensureFixture("qwen35-tiny", "Q4_K");
  const shape = modelShape(readGgufHeader(path), path);
  const policy = loadPolicy(budgetFile("policies", "llamacpp-cpu"));
  const budget = computeBudget(shape, policy, loadDevice(budgetFile("devices", "cpu-host")), { contextPerSlot: 512, slots: 4, batchTokens: 512 }).perDevice;
  const real = llamaCppAllocations((await measureLlamaCpp(path, { ...settings, sequences: 4 })).buffers);
  const passed = memoryGate(budget, [real], COMPARISON_TOLERANCE);
  assert.is(passed.status, "pass", passed.summary);
  // FAKE: an engine that keeps a bf16 twin of every projection the policy says stays packed.
  const twinBytes = shape.tensors.filter((t) => t.class === "matmul").reduce((sum, t) => sum + 2 * t.elements, 0);
  const withTwin = { ...real, steady: { ...real.steady, weights: real.steady.weights! + twinBytes }, peak: { ...real.peak, weights: real.peak.weights! + twinBytes } };
  const twin = memoryGate(budget, [withTwin], COMPARISON_TOLERANCE);
  assert.is(twin.status, "fail");
  assert.match(twin.summary, /CPU weights \(steady\)/);
  // Real: llama.cpp asked for 8 slots where the budget was made for 4.
  const eightSlots = llamaCppAllocations((await measureLlamaCpp(path, { ...settings, sequences: 8 })).buffers);
  const slots = memoryGate(budget, [eightSlots], COMPARISON_TOLERANCE);
  assert.is(slots.status, "fail");
  assert.match(slots.summary, /CPU kv_cache \(steady\)/);
  assert.match(slots.summary, /CPU recurrent_state \(steady\)/);
});

test.run();
