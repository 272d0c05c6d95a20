import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../harness/paths.js";
import type { MemoryRecord } from "../harness/results/read-run.js";
import { allocationsOf } from "../harness/sut/http.js";
import { SERVER_FAULT_ENV } from "../server/faults.js";
import { describeRun, runInProcess, verdictRow as row } from "./helpers/in-process-run.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

// Runs ask their arms what they allocated and hold it to the budget the GGUF header predicts
// (harness/runner/memory-check.ts): the embedded llama.cpp arm and our server report llama.cpp's
// own buffer lines; a runner reports through the protocol's `allocations`; whoever cannot be asked is not measured.
const work = temporaryDirectory("memory-runs");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const summary = (runId: string) => JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8")) as { memory: MemoryRecord[] };
/** parity16's embedded and server F32 arms on two prompts (one would leave batch invariance nothing to test). */
const twoArms = { suites: ["parity16"], arms: ["F32", "server F32"], prompts: [0, 1] };
const peak = (runId: string, arm: string, group: string) => summary(runId).memory.find((m) => m.arm === arm && m.group === group)?.peak_bytes;

test("the embedded arm and our server report their allocations by category, and pass the memory check against their budget", async () => {
  const clean = await runInProcess(runs, "clean", twoArms);
  assert.is(clean.code, 0, describeRun(clean));
  for (const arm of ["F32", "server F32"]) {
    assert.match(row(clean, "memory", { arm }), /^required pass .* memory under llamacpp-cpu \(2 slot\(s\) x 64 tokens, ubatch 512\): peak [\d.]+ MiB of [\d.]+ MiB predicted; every reported group within 10% of the budget$/);
    // Each group llama.cpp logs is there, on the host: what a run records is what llama.cpp said it allocated.
    for (const group of ["weights", "kv_cache", "activations"]) assert.ok((peak("clean", arm, group) ?? 0) > 0, `${arm} ${group}: ${JSON.stringify(summary("clean").memory)}`);
  }
  // KV is exact arithmetic (two F32 sequences of 64 cells): llama.cpp's figure is the budget's, on both.
  const kv = summary("clean").memory.filter((m) => m.group === "kv_cache");
  assert.equal(kv.map((m) => [m.arm, m.peak_bytes, m.predicted_peak_bytes]), [["F32", 2 * 1024 ** 2, 2 * 1024 ** 2], ["server F32", 2 * 1024 ** 2, 2 * 1024 ** 2]]);
});

test("FAULT kv-extra-slots (our server sizes its KV for twice the slots asked) fails the run's memory check naming kv_cache, and the ratchet against the clean run", async () => {
  process.env[SERVER_FAULT_ENV] = "kv-extra-slots";
  let faulty;
  try {
    faulty = await runInProcess(runs, "kv-extra-slots", { ...twoArms, arms: ["server F32"] });
  } finally {
    delete process.env[SERVER_FAULT_ENV];
  }
  assert.is(faulty.code, 1, describeRun(faulty));
  assert.match(row(faulty, "memory"), /^required fail .*FAIL CPU kv_cache \(steady\) 4\.00 MiB > predicted 2\.00 MiB \(\+2\.00 MiB\); CPU kv_cache \(peak\) 4\.00 MiB > predicted 2\.00 MiB \(\+2\.00 MiB\)$/);
  assert.match(row(faulty, "greedy_parity"), /^required pass /, "the answers are right: only the memory check sees the fault");
  const baseline = join(work.path, "baseline.json");
  assert.is(bench(["gate", "clean", "--runs-dir", runs, "--baseline", baseline, "--update"]).status, 0);
  const gate = bench(["gate", "kv-extra-slots", "--runs-dir", runs, "--baseline", baseline]);
  assert.is(gate.status, 1, gate.stdout + gate.stderr);
  assert.match(gate.stdout, /^FAIL {2}parity16\/server F32\/CPU\/kv_cache: peak kv_cache grew 2\.00 MiB → 4\.00 MiB \(\+2\.00 MiB, 100\.0%; tolerance 5%\)$/m);
  assert.match(gate.stdout, /^ok {4}parity16\/server F32\/CPU\/weights: peak weights /m);
  // The report: the latest run's table by category, and peak memory per model as a trend.
  const out = join(work.path, "report");
  assert.is(bench(["report", "clean", "kv-extra-slots", "--runs-dir", runs, "--out", out]).status, 0);
  const markdown = readFileSync(join(out, "report.md"), "utf8");
  assert.match(markdown, /\| tiny-random\.v2\.F32 \| parity16 \| server F32 \| CPU \| kv_cache \| 4\.00 MiB \| 4\.00 MiB \| 2\.00 MiB \| 200\.0% \|/);
  assert.match(markdown, /### Peak memory per model \(SUT arm\) and device, every group together \(bytes, lower is better\)/);
  assert.match(markdown, /\| parity16\/server F32\/CPU\/peak_bytes \| machine 1 \| worse \(above band\) \| kv-extra-slots \|/);
});

test("a runner's allocations go through the protocol: held to the policy its arm declares; a wrong group is an error naming the field; one that cannot be asked is not measured", async () => {
  const suite = JSON.parse(readFileSync(join(PACKAGE_ROOT, "suites", "parity16.json"), "utf8"));
  delete suite.$schema;
  const runner = (label: string, mode: string) => ({
    label, model: "tiny-random:F32", sut: "stdio", command: ["python3", "{bench}/test/helpers/fake_runner.py", mode, "{model}"], gate: "required",
    memory: { gate: "required", policy: "tt-packed-chunked", device: "p150-32gb" },
  });
  suite.arms = [runner("reports", "allocations-over"), runner("misreports", "bad-allocations"), runner("silent", "plain"), runner("twin", "allocations-twin"), runner("leaks", "allocations-transient-held")];
  const path = join(work.path, "runners.json");
  writeFileSync(path, JSON.stringify(suite));
  const result = await runInProcess(runs, "runners", { suites: [path], prompts: [4, 15] });
  assert.is(result.code, 2, describeRun(result));
  assert.match(row(result, "greedy_parity", { arm: "reports" }), /^required pass /);
  assert.match(row(result, "memory", { arm: "reports" }), /^required fail reports memory under tt-packed-chunked \(1 slot\(s\) x 64 tokens, ubatch 32\): .*FAIL tt0 kv_cache \(steady\) 1024\.00 MiB > predicted 0\.50 MiB .*; not reported: tt0 steady recurrent_state, tt0 steady activations, tt0 steady trace_region, tt0 peak recurrent_state, tt0 peak activations, tt0 peak trace_region$/);
  assert.not.match(row(result, "memory", { arm: "reports" }), /tt0 weights/, "its weights, the file's bytes, are within the budget");
  assert.match(row(result, "memory", { arm: "misreports" }), /^required error runner allocations: result\.devices\[0\]\.steady\.kv must be one of the groups weights, kv_cache, recurrent_state, activations, trace_region \(got "kv"\)$/);
  assert.match(row(result, "memory", { arm: "silent" }), /^required skip not measured: silent cannot be asked for its allocations/);
  assert.is(summary("runners").memory.filter((m) => m.arm === "reports" && m.device === "tt0").length, 5, "every group of the device it reported, the ones it left out as null");
  // A twin the policy says is packed, and a decode transient never freed: each fails naming its category.
  assert.match(row(result, "memory", { arm: "twin" }), /^required fail .*FAIL tt0 weights \(steady\) /);
  assert.match(row(result, "memory", { arm: "leaks" }), /^required fail .*FAIL tt0 activations \(steady\) 1024\.00 MiB > predicted /);
});

test("a server that answers GET /allocations with anything but 200 cannot be asked: not measured, with the status", () => {
  assert.equal(allocationsOf({ status: 404, text: "{\"error\":\"no route\"}" }), { notMeasured: "GET /allocations answered 404: the server cannot be asked for its allocations" });
  assert.throws(() => allocationsOf({ status: 200, text: "{\"devices\": []}" }), /GET \/allocations: result\.shape must be \{context_size, slots, batch_size\}/);
});

test.run();
