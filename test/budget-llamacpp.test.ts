// test-tier: slow

import { test } from "uvu";
import * as assert from "uvu/assert";
import { compareWithLlamaCpp, COMPARISON_TOLERANCE } from "../harness/budget/compare.js";
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

test.run();
