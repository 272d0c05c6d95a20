import { test } from "uvu";
import * as assert from "uvu/assert";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tableFromIPC } from "apache-arrow";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";
import { scoreDequantize, scoreMatvec } from "../harness/kernels/score.js";
import { float32DotEnvelope } from "../kernels/envelopes.js";

const near = (actual: number, expected: number) => assert.ok(Math.abs(actual - expected) <= 1e-12 * Math.abs(expected), `${actual} vs ${expected}`);

const work = temporaryDirectory("kernels");
test.after(() => work.remove());
const runs = join(work.path, "runs");

/** A FAKE plugin: the reference plugin with one planted fault (test/helpers/fake_plugin.c). */
function fakePlugin(fault: "WRONG_Q4_K" | "ABI_2" | "NO_MATVEC" | "CRASH" | "NO_Q6_K"): string {
  const library = join(work.path, `fake_${fault}.so`);
  execFileSync("cc", ["-O2", "-std=c11", "-ffp-contract=off", "-fPIC", "-shared", `-I${join(PACKAGE_ROOT, "native", "include")}`, `-DFAKE_${fault}`, "-o", library, join(PACKAGE_ROOT, "test", "helpers", "fake_plugin.c"), "-lm"]);
  return library;
}
const kernels = (runId: string, extra: string[] = []) => bench(["run", "--suite", "quant-kernels", ...extra, "--runs-dir", runs, "--run-id", runId]);
const cells = (runId: string) => tableFromIPC(readFileSync(join(runs, runId, "cells.arrow"))).toArray().map((row) => row.toJSON());

test("the reference plugin's kernels: decodes bit-exact, matvec inside the float32 envelope", () => {
  const result = kernels("reference");
  assert.is(result.status, 0, result.stdout + result.stderr);
  assert.match(result.stdout, /^reference plugin: 10\/10 kernel cases OK$/m);
  assert.match(result.stdout, /dequantize +required +PASS +4\/4 dequantize cases OK, bit-exact/);
  assert.match(result.stdout, /matvec +required +PASS +6\/6 matvec cases OK, worst [\d.]+% of the float32 envelope/);
  const rows = cells("reference");
  assert.is(rows.length, 10);
  assert.match(rows.find((c) => c.detail.startsWith("DEQUANTIZE(type=Q4_K"))!.detail, /^DEQUANTIZE\(type=Q4_K,values=8192,seed=2\): OK \(8192\/8192 values bit-exact\)$/);
  const summary = JSON.parse(readFileSync(join(runs, "reference", "summary.json"), "utf8"));
  assert.is(summary.suts[0].provenance.kind, "plugin");
  assert.match(summary.suts[0].provenance.engine, /^bringup-bench reference 1\.0\.0 on cpu \(plugin ABI v1\) \(runner protocol v1\)$/);
});

test("a plugin with a wrong Q4_K decode and an off-by-one matvec fails, one reproducible line per case", () => {
  const result = kernels("wrong", ["--plugin", fakePlugin("WRONG_Q4_K")]);
  assert.is(result.status, 1, result.stdout + result.stderr);
  assert.match(result.stdout, /^ {2}DEQUANTIZE\(type=Q4_K,values=8192,seed=2\): FAIL \(1\/8192 values differ; first at 300: expected -?[\d.]+, got -?[\d.]+\)$/m);
  assert.match(result.stdout, /^ {2}MATVEC\(type=Q4_K,rows=64,cols=1024,seed=12\): FAIL \(row \d+: expected .*% of the float32 envelope\)$/m);
  assert.match(result.stdout, /^plugin: 7\/10 kernel cases OK$/m, "Q8_0, Q5_K, Q6_K and F32 stay OK");
  const failing = cells("wrong").filter((c) => c.status === "fail");
  assert.equal(failing.map((c) => c.reproduce.replace(/--plugin ".*"/, "--plugin P")), [
    "bench run --suite quant-kernels --plugin P --case 1",
    "bench run --suite quant-kernels --plugin P --case 6",
    "bench run --suite quant-kernels --plugin P --case 9",
  ]);
  const out = join(work.path, "report");
  assert.is(bench(["report", "wrong", "--runs-dir", runs, "--out", out]).status, 0);
  assert.match(readFileSync(join(out, "report.md"), "utf8"), /^\| plugin \| FAIL \| DEQUANTIZE\(type=Q4_K,values=8192,seed=2\): FAIL \(1\/8192 values differ/m);
  const one = kernels("one-case", ["--plugin", fakePlugin("WRONG_Q4_K"), "--case", "6"]);
  assert.is(one.status, 1);
  assert.is(cells("one-case").length, 1, "--case reruns exactly that case");
});

test("bench gate: a kernel case that passed in the baseline may not fail later", () => {
  const baseline = join(work.path, "kernel-baseline.json");
  assert.is(bench(["gate", "reference", "--runs-dir", runs, "--baseline", baseline, "--update"]).status, 0);
  const data = JSON.parse(readFileSync(baseline, "utf8"));
  assert.is(data.kernels["quant-kernels/reference plugin/dequantize"].length, 4);
  // The faulty run's arm is labelled "plugin": hold it to the reference arm's record.
  data.kernels = Object.fromEntries(Object.entries(data.kernels).map(([key, cases]) => [key.replace("reference plugin", "plugin"), cases]));
  writeFileSync(baseline, JSON.stringify(data));
  const gated = bench(["gate", "wrong", "--runs-dir", runs, "--baseline", baseline]);
  assert.is(gated.status, 1);
  assert.match(gated.stdout, /^FAIL {2}quant-kernels\/plugin\/dequantize: kernel cases no longer pass: DEQUANTIZE\(type=Q4_K,values=8192,seed=2\)$/m);
  assert.match(gated.stdout, /^FAIL {2}quant-kernels\/plugin\/matvec: kernel cases no longer pass: MATVEC\(type=Q4_K,rows=256,cols=4096,seed=15\), MATVEC\(type=Q4_K,rows=64,cols=1024,seed=12\)$/m);
});

test("plugins that cannot be hosted: wrong ABI version, no such file; a missing kernel is SKIPPED, never passed", () => {
  const abi = kernels("abi", ["--plugin", fakePlugin("ABI_2")]);
  assert.is(abi.status, 2);
  assert.match(abi.stderr, /the runner cannot start: .*fake_ABI_2\.so: the plugin was built for ABI version 2; this harness hosts version 1 \(rebuild it against/);
  const missing = kernels("missing", ["--plugin", join(work.path, "nope.so")]);
  assert.is(missing.status, 2);
  assert.match(missing.stderr, /nope\.so: no kernel plugin at this path/);
  const partial = kernels("partial", ["--plugin", fakePlugin("NO_MATVEC")]);
  assert.is(partial.status, 77, partial.stdout + partial.stderr);
  assert.match(partial.stdout, /SKIPPED — NOT A PASS: quant-kernels \/ plugin \/ matvec: plugin lacks matvec/);
});

test("a plugin that crashes errors the check it was in, not the run: it lives in its own host process", () => {
  const crashed = kernels("crash", ["--plugin", fakePlugin("CRASH")]);
  assert.is(crashed.status, 2, crashed.stdout + crashed.stderr);
  assert.match(crashed.stdout, /dequantize +required +PASS +4\/4 dequantize cases OK/);
  assert.match(crashed.stdout, /matvec +required +ERROR +1 matvec case\(s\) errored: MATVEC\(type=\w+,rows=\d+,cols=\d+,seed=\d+\): the runner exited \(SIGSEGV\); the SUT is gone, later cases did not run/);
  assert.ok(JSON.parse(readFileSync(join(runs, "crash", "summary.json"), "utf8")).status === "complete", "the run finished and wrote its results");
});

test("a plugin without one tensor type: those cases SKIPPED with the reason and their --case line, the others still run; exit 77", () => {
  const result = kernels("no-q6k", ["--plugin", fakePlugin("NO_Q6_K"), "--case", "2", "--case", "3", "--case", "7", "--case", "8"]);
  assert.is(result.status, 77, result.stdout + result.stderr);
  assert.match(result.stdout, /dequantize +required +SKIPPED — NOT A PASS +1\/2 dequantize cases OK, 1 not run: DEQUANTIZE\(type=Q6_K,values=8192,seed=4\): runner dequantize: bb_dequantize failed: this plugin has no Q6_K kernel$/m);
  assert.match(result.stdout, /^plugin: 2\/4 kernel cases OK, 2 not run$/m);
  const rows = cells("no-q6k").map((c) => [c.check, c.status, c.reproduce.replace(/--plugin ".*"/, "--plugin P")]);
  assert.equal(rows, [
    ["dequantize", "pass", "bench run --suite quant-kernels --plugin P --case 2"],
    ["dequantize", "skip", "bench run --suite quant-kernels --plugin P --case 3"],
    ["matvec", "pass", "bench run --suite quant-kernels --plugin P --case 7"],
    ["matvec", "skip", "bench run --suite quant-kernels --plugin P --case 8"],
  ]);
});

test("kernels written in Python plug in as a runner: Q8_0 decoded bit for bit, matvec inside the envelope", () => {
  const suite = JSON.parse(readFileSync(join(PACKAGE_ROOT, "kernels", "quant-kernels.json"), "utf8"));
  delete suite.$schema;
  suite.arms = [{ label: "python kernels", runner: ["python3", "{bench}/scripts/runners/reference_kernels.py"], gate: "required" }];
  const path = join(work.path, "python-kernels.json");
  writeFileSync(path, JSON.stringify(suite));
  const result = bench(["run", "--suite", path, "--case", "0", "--case", "4", "--case", "5", "--runs-dir", runs, "--run-id", "python"]);
  assert.is(result.status, 0, result.stdout + result.stderr);
  assert.match(result.stdout, /^python kernels: 3\/3 kernel cases OK$/m);
  assert.match(JSON.parse(readFileSync(join(runs, "python", "summary.json"), "utf8")).suts[0].provenance.engine, /^reference_kernels\.py/);
});

test("scorers: a decode is compared bit for bit (−0 is not +0); a NaN row is outside any envelope", () => {
  const c = { op: "dequantize", type: "Q8_0", values: 2, seed: 0 } as const;
  assert.is(scoreDequantize(c, Float32Array.of(0, 1), Float32Array.of(-0, 1)).pass, false);
  assert.is(scoreDequantize(c, Float32Array.of(0, 1), Float32Array.of(0, 1)).pass, true);
  const m = { op: "matvec", type: "F32", rows: 2, cols: 4, seed: 0 } as const;
  const reference = { y: Float64Array.of(1, 2), absoluteSums: Float64Array.of(4, 4) };
  assert.is(scoreMatvec(m, reference, Float32Array.of(1, NaN)).pass, false);
  // γ_4 · Σ|w·x| = 4u/(1 − 4u) · 4 ≈ 9.5e-7: an error of 5e-7 is inside, 2e-6 outside.
  near(float32DotEnvelope(4, 4), (4 * 2 ** -24 / (1 - 4 * 2 ** -24)) * 4);
  assert.is(scoreMatvec(m, reference, Float32Array.of(1, 2 + 5e-7)).pass, true);
  assert.is(scoreMatvec(m, { y: Float64Array.of(1, 2.000002), absoluteSums: Float64Array.of(4, 4) }, Float32Array.of(1, 2)).pass, false);
});

test.run();
