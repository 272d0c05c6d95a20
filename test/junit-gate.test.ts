// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

// What CI shows must match the exit code: informational outcomes are never red, a required gate
// that did not run is as loud as a failure, and "the latest run" is the one that started last.
const work = temporaryDirectory("junit-gate");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const baseline = join(work.path, "baseline.json");

test("a run that exits 0 with informational failures: JUnit failures=\"0\" errors=\"0\", the outcome kept as a property", () => {
  // Q4_K weights against the F32 goldens diverge; the arm is informational, F32 is required and passes.
  const result = bench(["run", "--suite", "parity16", "--arm", "F32", "--arm", "Q4_K", "--runs-dir", runs, "--run-id", "zz-informational"]);
  assert.is(result.status, 0, result.stdout + result.stderr);
  const summary = JSON.parse(readFileSync(join(runs, "zz-informational", "summary.json"), "utf8"));
  assert.ok(summary.verdicts.some((v: { arm: string; status: string }) => v.arm === "Q4_K" && v.status === "fail"), "the informational arm did fail something");
  const junit = readFileSync(join(runs, "zz-informational", "junit.xml"), "utf8");
  assert.match(junit, /<testsuite name="parity16" tests="\d+" failures="0" errors="0"/);
  assert.not.match(junit, /<failure|<error/);
  assert.match(junit, /<property name="informational_status" value="fail"\/>/);
  assert.match(junit, /<system-out>informational FAIL \(not gated\): /);
});

test("bench gate on a run with a skipped required gate: exit 77, ::error:: lines and the step summary name it", () => {
  const partial = bench(["run", "--suite", "parity16", "--runner", "python3 {bench}/test/helpers/fake_runner.py partial {model}", "--prompt", "4", "--runs-dir", runs, "--run-id", "00-skipped"]);
  assert.is(partial.status, 77, partial.stdout + partial.stderr);
  // A skipped required gate is not a pass: the baseline is taken from it only when told so.
  assert.is(bench(["gate", "00-skipped", "--runs-dir", runs, "--baseline", baseline, "--update", "--accept-failing"]).status, 0);
  const stepSummary = join(work.path, "step-summary.md");
  const result = bench(["gate", "00-skipped", "--runs-dir", runs, "--baseline", baseline], { GITHUB_ACTIONS: "true", GITHUB_STEP_SUMMARY: stepSummary });
  assert.is(result.status, 77, result.stdout);
  assert.match(result.stdout, /^::error title=bench gate parity16\/runner\/batch_invariance::SKIPPED — NOT A PASS: runner lacks batched_greedy$/m);
  assert.match(result.stdout, /^::error title=bench gate 00-skipped::run 00-skipped itself exited 77 \(SKIPPED — NOT A PASS\)$/m);
  const written = readFileSync(stepSummary, "utf8");
  assert.match(written, /— exit 77/);
  assert.match(written, /^SKIP {2}parity16\/runner\/batch_invariance: SKIPPED — NOT A PASS: runner lacks batched_greedy$/m);
});

test("the latest run is the one that started last, not the last run id in sort order", () => {
  // zz-informational sorts last but started first.
  const result = bench(["gate", "--runs-dir", runs, "--baseline", baseline]);
  assert.match(result.stdout, /— run 00-skipped against /);
});

test.run();
