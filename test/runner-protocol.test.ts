import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describeRun, errorLine, runInProcess, verdictRow as row } from "./helpers/in-process-run.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("runner-protocol");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const summary = (runId: string) => JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8"));
const fake = (mode: string) => `python3 {bench}/test/helpers/fake_runner.py ${mode} {model}`;
const cliArgs = (runner: string, runId: string, prompts: readonly string[]) => ["run", "--suite", "parity16", "--runner", runner, ...prompts.flatMap((p) => ["--prompt", p]), "--runs-dir", runs, "--run-id", runId];
/** What `bench run --suite parity16 --runner RUNNER --prompt ...` runs, in this process (helpers/in-process-run.ts): most tries here are about the runner protocol, not the CLI. */
const runWith = (runner: string, runId: string, prompts = ["4"]) =>
  runInProcess(runs, runId, { suites: ["parity16"], runner: runner.split(" "), prompts: prompts.map(Number) });

test("an independent plain-Python forward, behind the runner protocol, passes parity16 against the llama.cpp goldens", async () => {
  const result = await runWith("python3 {bench}/harness/oracle/float64/reference_forward.py {model}", "reference", ["4", "15"]);
  assert.is(result.code, 0, describeRun(result));
  assert.match(result.summaryLines.join("\n"), /^runner correctness gate: 2\/2 prompts PASS \(STRICT 2\/2;/m);
  for (const check of ["tokenizer", "greedy_parity", "teacher_forced", "determinism", "batch_invariance"]) {
    assert.match(row(result, check, { suite: "parity16", arm: "runner" }), /^\S+ pass /);
  }
  const run = summary("reference");
  assert.is(run.suts[0].provenance.kind, "stdio");
  assert.match(run.suts[0].provenance.engine, /^reference_forward\.py \(numpy float64, llama\) \(runner protocol v1\)$/);
  assert.is(run.suts[0].provenance.settings.precision, "float64");
  assert.match(run.suts[0].provenance.modelSha256, /^[0-9a-f]{64}$/);
  assert.equal(run.trace, [], "this runner captures no graph");
});

test("a runner that dies at boot, logs on stdout or speaks another version: one clear line, exit 2, nothing hangs", async () => {
  // The real CLI once: the line is the one it prints on stderr.
  const died = bench(cliArgs(fake("dies-at-boot"), "dies-at-boot", ["4"]));
  assert.is(died.status, 2);
  assert.match(died.stderr, /the runner did not start: the runner exited \(code 3\); its stderr ended: device 3 did not answer: check the board/);
  const chatty = await runWith(fake("logs-on-stdout"), "logs-on-stdout");
  assert.is(chatty.code, 2);
  assert.match(errorLine(chatty), /stdout: the runner wrote a line that is not a JSON object on stdout: "loading weights \.\.\." \(fix: stdout carries protocol lines only; print logs to stderr\)/);
  const newer = await runWith(fake("version-2"), "version-2");
  assert.is(newer.code, 2);
  assert.match(errorLine(newer), /hello\.version: the runner speaks protocol version 2; this harness speaks 1/);
});

test("a runner that dies mid-check errors that check with its last words; missing methods are SKIPPED, never passed", async () => {
  const died = await runWith(fake("dies-in-greedy"), "dies-in-greedy");
  assert.is(died.code, 2, describeRun(died));
  assert.match(row(died, "greedy_parity"), /^required error the runner exited \(code 5\); its stderr ended: fabric timeout on chip 2/);
  assert.match(row(died, "tokenizer"), /^required pass /, "checks before the crash keep their verdicts");
  const partial = await runWith(fake("partial"), "partial");
  assert.is(partial.code, 77, describeRun(partial));
  assert.match(row(partial, "teacher_forced"), /^informational skip runner lacks teacher_forced_top_k/);
  assert.match(row(partial, "batch_invariance"), /^required skip runner lacks batched_greedy/);
});

test("trace-region demand a runner reports goes into summary.json and the baseline's ratchet", () => {
  assert.equal(summary("partial").trace, [{ suite: "parity16", arm: "runner", capture: "decode", demand_bytes: 7340032, region_bytes: 16777216, region_semantics: "fixed-per-bank" }]);
  const baseline = join(work.path, "baseline.json");
  assert.is(bench(["gate", "partial", "--runs-dir", runs, "--baseline", baseline, "--update", "--accept-failing"]).status, 0, "the partial run skipped a required gate: taken only when told so");
  assert.equal(JSON.parse(readFileSync(baseline, "utf8")).trace, { "parity16/runner/decode": { demand_bytes: 7340032, tolerance: 0 } });
});

const cellsOf = (runId: string) => readFileSync(join(runs, runId, "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line));

test("short or empty greedy answers fail their prompts with the reason, never pass as NEAR-TIE", async () => {
  const short = await runWith(fake("short-answers"), "short-answers");
  assert.is(short.code, 1, describeRun(short));
  assert.match(short.summaryLines.join("\n"), /^runner correctness gate: 0\/1 prompts PASS \(STRICT 0\/1; near-tie-band only 0\/1; max gap 0\.000 nats; 0 forward-divergent; 1 answers rejected\)$/m);
  const rejected = cellsOf("short-answers").find((c) => c.check === "greedy_parity");
  assert.equal([rejected.prompt, rejected.status, rejected.detail, rejected.reproduce], [4, "fail", "greedy answer rejected: 8 of 16 ids, and it does not end on an end-of-sequence id the request allows", `bench run --suite parity16 --runner "${fake("short-answers")}" --prompt 4`]);
  const empty = await runWith(fake("empty-sequence"), "empty-sequence", ["4", "15"]);
  assert.is(empty.code, 1, describeRun(empty));
  assert.match(empty.summaryLines.join("\n"), /^runner correctness gate: 1\/2 prompts PASS \(STRICT 1\/2;.*; 1 answers rejected\)$/m);
  assert.ok(cellsOf("empty-sequence").some((c) => c.check === "greedy_parity" && c.prompt === 4 && c.detail === "greedy answer rejected: an empty sequence, the request asked for 16 ids"));
});

test("all-zero or NaN teacher-forced log-probs fail teacher_forced with the reason, counted as required on a required arm (exit 1); summary.json stays valid and complete", async () => {
  const zeros = await runWith(fake("zero-logprobs"), "zero-logprobs");
  assert.is(zeros.code, 1, "broken answers in an informational check still fail a required arm");
  assert.match(row(zeros, "teacher_forced"), /^required fail .*no prompt could be scored; 1\/1 prompts' answers rejected \(prompt 4: position 0: the top-20 probabilities sum to 20\.00 \(> 1\): not log-softmax values\); counted as required/);
  assert.not.match(describeRun(zeros), /top-1 100\.00%/);
  const nan = await runWith(fake("nan-logprobs"), "nan-logprobs", ["4", "15"]);
  assert.is(nan.code, 1, "teacher_forced is informational in parity16, but a NaN is a broken answer, not a distance");
  assert.match(row(nan, "teacher_forced"), /^required fail .*top-1 100\.00%, top-5 100\.00% over 16 positions; .*; 1\/2 prompts' answers rejected \(prompt 4: position 0: log-prob NaN of id \d+ is not finite\)/);
  const run = summary("nan-logprobs");
  assert.is(run.status, "complete");
  assert.is(run.exit_code, 1);
  assert.is(run.verdicts.find((v: { check: string }) => v.check === "teacher_forced").metrics.rejected, 1);
});

test("a malformed or failed trace_demand answer is an error verdict naming the method and field, not a crash", async () => {
  const bogus = await runWith(fake("bad-trace-demand"), "bad-trace-demand");
  assert.is(bogus.code, 2, describeRun(bogus));
  assert.is(bogus.error, undefined, "an error verdict, not a crash");
  assert.match(row(bogus, "trace_demand"), /^required error runner trace_demand: result\.captures\[0\]\.region_semantics must be one of fixed-per-bank, fixed-total, dynamic \(got "bogus"\)/);
  assert.is(summary("bad-trace-demand").status, "complete");
  const failed = await runWith(fake("trace-demand-error"), "trace-demand-error");
  assert.is(failed.code, 2);
  assert.match(row(failed, "trace_demand"), /^required error runner trace_demand: RuntimeError: the profiler is not attached/);
});

test("a runner error on one prompt fails that prompt (with its --prompt line); the other prompts still run", async () => {
  const result = await runWith(fake("error-on-prompt:15"), "error-on-prompt", ["4", "15"]);
  assert.is(result.code, 1, describeRun(result));
  assert.match(result.summaryLines.join("\n"), /^runner correctness gate: 1\/2 prompts PASS \(STRICT 1\/2;.*; 1 answers rejected\)$/m);
  const cells = cellsOf("error-on-prompt").filter((c) => c.check === "greedy_parity");
  const failed = cells.filter((c) => c.status !== "pass");
  assert.equal(failed.map((c) => [c.prompt, c.detail, c.reproduce.endsWith(" --prompt 15")]), [[15, "greedy answer rejected: runner greedy: RuntimeError: kernel launch failed on this prompt", true]]);
  assert.ok(cells.some((c) => c.prompt === 4 && c.status === "pass"), "prompt 4 still ran");
});

test("a suite arm with sut stdio must name its command", () => {
  const suite = JSON.parse(readFileSync(join(process.cwd(), "suites", "parity16.json"), "utf8"));
  delete suite.$schema;
  suite.arms = [{ label: "tt", model: "tiny-random:F32", sut: "stdio", gate: "required" }];
  const path = join(work.path, "parity16.json");
  writeFileSync(path, JSON.stringify(suite));
  const result = bench(["run", "--suite", path, "--runs-dir", runs]);
  assert.is(result.status, 2);
  assert.match(result.stderr, /parity16\.json: arms\.0\.command: required field is missing/);
});

test("a runner offering the first kernel suites' dequantize / matvec is told they were replaced by kernel: SKIPPED, exit 77", async () => {
  const suite = join(work.path, "first-kernel-methods.json");
  writeFileSync(suite, JSON.stringify({
    name: "first-kernel-methods", kind: "kernels",
    cases: [{ op: "matvec", encoding: "Q8_0:F32", rows: 16, cols: 256, seed: 1 }],
    arms: [{ label: "old kernels", runner: ["python3", "{bench}/test/helpers/fake_runner.py", "first-kernel-methods", "none"], gate: "required" }],
  }));
  const result = await runInProcess(runs, "first-kernel-methods", { suites: [suite] });
  assert.is(result.code, 77, describeRun(result));
  assert.match(row(result, "matvec", { suite: "first-kernel-methods", arm: "old kernels" }), /^required skip old kernels lacks kernel: the runner offers dequantize, matvec: these methods of the first kernel suites were replaced by `kernel`/);
});

test.run();
