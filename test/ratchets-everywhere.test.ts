import { test } from "uvu";
import * as assert from "uvu/assert";
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { encodeCellsArrow } from "../harness/results/cells-arrow.js";
import { machineFingerprint } from "../harness/results/machine.js";
import { readRun } from "../harness/results/read-run.js";
import { describeRun, runInProcess } from "./helpers/in-process-run.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("ratchets-everywhere");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const gate = (run: string, baseline: string, ...extra: string[]) => bench(["gate", run, "--runs-dir", runs, "--baseline", baseline, ...extra]);
/** `bench run --suite parity16 --arm F32 --prompt 0 --prompt 1`, in this process (helpers/in-process-run.ts): the gate is what is tried here. */
const parityRun = (runId: string) => runInProcess(runs, runId, { suites: ["parity16"], arms: ["F32"], prompts: [0, 1] });
const Q8_0_MATVEC = "quant-kernels/reference plugin/matvec/MATVEC(type=Q8_0,rows=64,cols=1024,seed=11)";

test("real runs: two parity prompts on F32, and the reference kernel plugin on a Q8_0 matvec", async () => {
  const parity = await parityRun("parity");
  assert.is(parity.code, 0, describeRun(parity));
  const kernels = await runInProcess(runs, "kernels", { suites: ["quant-kernels"], kernelCases: [5] });
  assert.is(kernels.code, 0, describeRun(kernels));
});

test("a baseline entry the run lacks warns (one line for all those outside its selection), and fails under --strict", () => {
  const baseline = join(work.path, "lacks.json");
  assert.is(gate("parity", baseline, "--update").status, 0);
  const data = JSON.parse(readFileSync(baseline, "utf8"));
  data.parity["parity16/Q8_0"] = { strict: 8, forward_divergent: 0 };
  data.needles["niah/copy-4k"] = ["4000:0.5:0"];
  data.kernels = { "quant-kernels/reference plugin/matvec": ["MATVEC(type=Q8_0,rows=64,cols=1024,seed=11)"] };
  data.kernel_ratios = { [Q8_0_MATVEC]: { worst_ratio: 3e-4, tolerance: 9 } };
  data.perf["parity16/Q8_0/tokens_per_second"] = { target: 500, tolerance: 0.5 };
  data.trace["parity16/F32/decode"] = { demand_bytes: 7340032, tolerance: 0 };
  data.parity["parity16/F32 flash-attn"] = { strict: 16, forward_divergent: 0 };
  writeFileSync(baseline, JSON.stringify(data));
  const lenient = gate("parity", baseline);
  assert.is(lenient.status, 0, lenient.stdout + lenient.stderr);
  // The run selected parity16's F32 arm: entries of that arm it lacks are warned one by one...
  assert.ok(lenient.stdout.includes("WARN  parity16/F32/decode: the baseline has a trace capture, the run does not"), lenient.stdout);
  // ...and the rest of the baseline, outside its selection, is named in one line.
  const scope = lenient.stdout.split("\n").filter((line) => line.startsWith("WARN  scope: "));
  assert.is(scope.length, 1, lenient.stdout);
  assert.match(scope[0], /^WARN {2}scope: 6 baseline entries outside this run's selection \(suites parity16; arms F32\), not compared: parity16\/Q8_0, parity16\/F32 flash-attn, niah\/copy-4k, quant-kernels\/reference plugin\/matvec, quant-kernels\/reference plugin\/matvec\/MATVEC\(type=Q8_0,rows=64,cols=1024,seed=11\), parity16\/Q8_0\/tokens_per_second \(hint: /);
  assert.is(lenient.stdout.match(/^WARN /gm)?.length, 2, lenient.stdout);
  const strict = gate("parity", baseline, "--strict");
  assert.is(strict.status, 1, strict.stdout);
  assert.equal(strict.stdout.match(/^FAIL {2}[^:]+/gm), ["FAIL  parity16/F32/decode", "FAIL  scope"], strict.stdout);
});

test("speed bands are learned from repeats of one battery on one machine; a repeat from another machine is refused", async () => {
  for (const id of ["parity-2", "parity-3"]) {
    const again = await parityRun(id);
    assert.is(again.code, 0, describeRun(again));
  }
  const baseline = join(work.path, "learned.json");
  const update = gate("parity", baseline, "--update", "parity-2", "parity-3");
  assert.is(update.status, 0, update.stdout + update.stderr);
  const data = JSON.parse(readFileSync(baseline, "utf8"));
  const speeds = ["parity", "parity-2", "parity-3"].map((id) => readRun(join(runs, id)).summary.verdicts.find((v) => v.check === "greedy_parity")!)
    .map((v) => (v.status === "pass" ? Number(v.metrics.tokens_per_second) : NaN)).sort((a, b) => a - b);
  const band = data.perf["parity16/F32/tokens_per_second"];
  assert.is(band.learned_from, 3);
  assert.is(band.target, Number(speeds[1].toPrecision(4)), "the median of the three");
  const spread = Math.max(...speeds.map((v) => Math.abs(v - speeds[1]) / speeds[1]));
  assert.is(band.tolerance, Number(Math.min(0.9, Math.max(0.1, 3 * spread)).toPrecision(2)), JSON.stringify({ speeds, band }));
  assert.is(data.machine, machineFingerprint(readRun(join(runs, "parity")).summary.machine));
  assert.is(gate("parity", baseline).status, 0);
  // FAKE: a copy of a real run, recorded as made on another machine.
  const elsewhere = join(runs, "elsewhere");
  cpSync(join(runs, "parity-3"), elsewhere, { recursive: true });
  const summary = JSON.parse(readFileSync(join(elsewhere, "summary.json"), "utf8"));
  summary.run_id = "elsewhere";
  summary.machine = { ...summary.machine, cpus: 64, cpu_model: "Another CPU" };
  writeFileSync(join(elsewhere, "summary.json"), JSON.stringify(summary));
  const mixed = gate("parity", baseline, "--update", "parity-2", "elsewhere");
  assert.is(mixed.status, 2, mixed.stdout + mixed.stderr);
  assert.match(mixed.stderr, /ran on 64 × Another CPU, .* speed bands are learned on one machine/);
  const reported = gate("elsewhere", baseline);
  assert.is(reported.status, 0, reported.stdout);
  assert.match(reported.stdout, /^ok {4}parity16\/F32\/tokens_per_second: [\d.]+ \(baseline [\d.]+ on another machine\): reported, not gated$/m);
});

test("each kernel case's worst ratio to its bound is in the baseline; a ratio grown beyond its band fails the ratchet", () => {
  const baseline = join(work.path, "kernels.json");
  assert.is(gate("kernels", baseline, "--update").status, 0);
  const band = JSON.parse(readFileSync(baseline, "utf8")).kernel_ratios[Q8_0_MATVEC];
  assert.ok(band.worst_ratio > 0 && band.worst_ratio < 0.01, `a correct float32 kernel sits far inside its bound: ${JSON.stringify(band)}`);
  assert.is(band.tolerance, 9);
  assert.is(gate("kernels", baseline).status, 0);
  // FAKE injection: the measured 38.8% of an fp16-accumulating Q8_0 kernel, written into a copy of the real run; it still passes its bound.
  const grown = join(runs, "grown");
  cpSync(join(runs, "kernels"), grown, { recursive: true });
  const run = readRun(grown);
  writeFileSync(join(grown, "cells.arrow"), encodeCellsArrow(run.cells.map((c) => (c.check === "matvec" ? { ...c, kernel_ratio: 0.388 } : c))));
  const result = gate("grown", baseline);
  assert.is(result.status, 1, result.stdout);
  assert.match(result.stdout, /^FAIL {2}quant-kernels\/reference plugin\/matvec\/MATVEC\(type=Q8_0,rows=64,cols=1024,seed=11\): worst ratio to its bound grew [\d.e-]+% → 38\.8% \(limit [\d.e-]+%\): the kernel's error is [\d.e+]+× the baseline's$/m);
});

test("a trace capture that needs more than its fixed region fails in the run itself, with both numbers", async () => {
  const result = await runInProcess(runs, "over-region", { suites: ["parity16"], runner: ["python3", "{bench}/test/helpers/fake_runner.py", "trace-over-region", "{model}"], prompts: [4, 5] });
  assert.is(result.code, 1, describeRun(result));
  const verdict = JSON.parse(readFileSync(join(runs, "over-region", "summary.json"), "utf8")).verdicts.find((v: { check: string }) => v.check === "trace_demand");
  assert.is(verdict.status, "fail");
  assert.match(verdict.summary, /FAIL: decode demands 80000000 B, its fixed-total region holds 67108864 B: the capture does not fit its trace region/);
});

test.run();
