// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { chunkedDecode, computeBudget } from "../harness/budget/arithmetic.js";
import { backendDevice, parseBufferLine, sumBuffers } from "../harness/budget/llamacpp-buffer-log.js";
import { llamaCppDeviceAllocations, memoryGate, predictedGroups } from "../harness/budget/memory-gate.js";
import { modelShape } from "../harness/budget/model-shape.js";
import { budgetFile, loadDevice, loadPolicy } from "../harness/budget/policy.js";
import { encodeQwen36_27bHeader } from "../harness/budget/qwen36-27b-header.js";
import { BenchError } from "../harness/errors.js";
import { readGguf, readGgufHeader } from "../harness/gguf/read.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("budget");
test.after(() => work.remove());
const GIB = 1024 ** 3;

function header27b(): string {
  const path = join(work.path, "qwen36-27b.header-only.gguf");
  writeFileSync(path, encodeQwen36_27bHeader());
  return path;
}

function bench(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, [join(PACKAGE_ROOT, "bin", "bench.js"), "budget", ...args], { encoding: "utf8" });
}

test("a header-only GGUF is read by readGgufHeader and refused as truncated by readGguf", () => {
  const path = header27b();
  const file = readGgufHeader(path);
  assert.ok(file.fileSize < 200_000, `the 27B header is kilobytes, not gigabytes (${file.fileSize} B)`);
  assert.is(file.tensors.length, 3 + 16 * 11 + 48 * 14);
  assert.throws(() => readGguf(path), (error: unknown) => error instanceof BenchError && /past the end of the file/.test(error.message));
});

test("27B: the seed's arithmetic from the header alone (twins, embedding/head twins, the 1 GiB decode plane, trace per chain)", () => {
  const path = header27b();
  const shape = modelShape(readGgufHeader(path), path);
  const device = loadDevice(budgetFile("devices", "p150-32gb"));
  const request = { contextPerSlot: 4096, slots: 1, batchTokens: 32 };
  const twins = computeBudget(shape, loadPolicy(budgetFile("policies", "tt-twins")), device, request);
  assert.is(twins.fits, false);
  assert.ok(Math.abs(twins.facts.embeddingHeadBytes.embeddingTwin / GIB - 2.37) < 0.01, "embedding twin 2.37 GiB");
  assert.ok(Math.abs(twins.facts.embeddingHeadBytes.headTwin / GIB - 2.37) < 0.01, "head twin 2.37 GiB");
  const packed = computeBudget(shape, loadPolicy(budgetFile("policies", "tt-packed-chunked")), device, request);
  assert.is(packed.fits, true);
  // The failing allocation of the seed's out-of-memory runs: one chunk of the [5120 x 248320] head at 16 B per element.
  assert.is(packed.facts.largestDecode?.bytes, 1_073_725_440);
  assert.is(packed.facts.traceDemandBytes, packed.facts.weightChains * 3_500_000);
  // The same weights under the fixed 50 MB region: DRAM has room, the capture does not.
  const fixedRegion = computeBudget(shape, loadPolicy(budgetFile("policies", "tt-packed-chunked")), loadDevice(budgetFile("devices", "p150x4-32gb")), request);
  assert.ok(fixedRegion.totalPerDevice < fixedRegion.usablePerDevice);
  assert.equal(fixedRegion.overLimits, ["trace demand exceeds the fixed trace region"]);
});

test("memory gate: a runner that reports nothing is not measured; a decode transient still held after the call fails as steady activations (FAKE reports)", () => {
  const path = header27b();
  const budget = computeBudget(modelShape(readGgufHeader(path), path), loadPolicy(budgetFile("policies", "tt-packed-chunked")), loadDevice(budgetFile("devices", "p150-32gb")), { contextPerSlot: 4096, slots: 1, batchTokens: 32 }).perDevice;
  assert.is(memoryGate(budget, undefined, 0.1).status, "not_measured");
  assert.is(memoryGate(budget, [], 0.1).status, "not_measured");
  const predicted = predictedGroups(budget);
  // FAKE: an engine whose allocations are exactly its budget: the transient counts at peak only.
  const honest = { device: "chip0", steady: predicted.steady, peak: predicted.peak };
  assert.is(memoryGate(budget, [honest], 0.1).status, "pass");
  // FAKE: the same engine, the decode transient never freed: it is still held between requests.
  const leaking = { ...honest, steady: { ...predicted.steady, activations: predicted.steady.activations + budget.decode_transient } };
  const leak = memoryGate(budget, [leaking], 0.1);
  assert.is(leak.status, "fail");
  assert.match(leak.summary, /chip0 activations \(steady\) .* \(\+1023\.98 MiB\)/);
  // A group the runner leaves out is named, not counted as zero and passed silently.
  const partial = memoryGate(budget, [{ device: "chip0", steady: { weights: predicted.steady.weights }, peak: {} }], 0.1);
  assert.match(partial.summary, /not reported: chip0 steady kv_cache/);
  // FAKE: every group within its budget, the device's total over its usable DRAM (a budget made for a larger device).
  const crowded = memoryGate(budget, [honest], 0.1, 16 * 1024 ** 3);
  assert.is(crowded.status, "fail");
  assert.match(crowded.summary, /^memory: FAIL chip0 total \(peak\) [\d.]+ MiB > usable 16384\.00 MiB \(\+[\d.]+ MiB\)$/);
});

test("llama.cpp's backends are counted where their memory is: mapped, repacked and pinned host buffers on the CPU, a device's on it", () => {
  assert.equal(["CPU", "CPU_Mapped", "CPU_REPACK", "CUDA_Host", "CUDA0", "Metal_Mapped"].map(backendDevice), ["CPU", "CPU", "CPU", "CPU", "CUDA0", "Metal"]);
  const devices = llamaCppDeviceAllocations(["load_tensors:   CPU_Mapped model buffer size =     3.00 MiB", "load_tensors:        CUDA0 model buffer size =    10.00 MiB",
    "llama_kv_cache:        CUDA0 KV buffer size =     2.00 MiB", "sched_reserve:      CUDA_Host compute buffer size =     1.00 MiB"].map((line) => parseBufferLine(line)!));
  const mib = 1024 ** 2;
  assert.equal(devices.map((d) => [d.device, d.peak.weights, d.peak.kv_cache, d.peak.activations]), [["CPU", 3 * mib, 0, 1 * mib], ["CUDA0", 10 * mib, 2 * mib, 0]]);
});

test("chunkedDecode caps the f32 plane and never decodes more rows than the weight has", () => {
  const decode = { transient_bytes_per_element: 16, chunk_plane_bytes: 256 * 1024 * 1024 };
  assert.equal(chunkedDecode({ rowLength: 5120, rows: 248320 }, decode), { chunkRows: 13107, bytes: 13107 * 5120 * 16 });
  assert.equal(chunkedDecode({ rowLength: 5120, rows: 10 }, decode), { chunkRows: 10, bytes: 10 * 5120 * 16 });
});

test("llama.cpp buffer lines parse by kind and add up across backends", () => {
  assert.equal(parseBufferLine("load_tensors:   CPU_Mapped model buffer size =     3.43 MiB"), { backend: "CPU_Mapped", kind: "model", bytes: Math.round(3.43 * 1024 * 1024) });
  assert.is(parseBufferLine("llama_kv_cache: size =    0.50 MiB (   512 cells"), undefined);
  const total = sumBuffers([
    "llama_kv_cache:        CPU KV buffer size =     0.25 MiB",
    "llama_kv_cache:        CPU KV buffer size =     1.25 MiB",
    "llama_memory_recurrent:        CPU RS buffer size =     0.41 MiB",
    "sched_reserve:        CPU compute buffer size =     5.04 MiB",
  ]);
  assert.is(total.kv, 1.5 * 1024 * 1024);
  assert.ok(total.recurrent > 0 && total.compute > 0 && total.model === 0);
});

test("bench budget: a fixture fits on the CPU host (exit 0); the 27B under twins does not (exit 1)", () => {
  const fits = bench("tiny-random:Q8_0", "--context", "256");
  assert.is(fits.status, 0, fits.stderr);
  assert.match(fits.stdout, /KV cache .*\n[\s\S]*FITS/);
  const over = bench(header27b(), "--policy", "tt-twins", "--device", "p150-32gb");
  assert.is(over.status, 1, over.stderr);
  assert.match(over.stdout, /DOES NOT FIT/);
});

test("bench budget: a bad policy is one line naming the file, the field and the fix (exit 2)", () => {
  const policy = JSON.parse(JSON.stringify(loadPolicy(budgetFile("policies", "llamacpp-cpu")))) as { classes: { matmul: { placement: string } } };
  policy.classes.matmul.placement = "everywhere";
  const path = join(work.path, "bad-policy.json");
  writeFileSync(path, JSON.stringify(policy));
  const result = bench("tiny-random:Q8_0", "--policy", path);
  assert.is(result.status, 2);
  const line = result.stderr.trim();
  assert.is(line.split("\n").length, 1, line);
  assert.match(line, /bad-policy\.json: classes\.matmul\.placement: .*fix:/);
  const missing = bench("tiny-random:Q8_0", "--device", "no-such-device");
  assert.is(missing.status, 2);
  assert.match(missing.stderr, /--device: no shipped device named "no-such-device" \(fix: use one of .*p150-32gb/);
});

test.run();
