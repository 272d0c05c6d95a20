import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("runner-protocol");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const summary = (runId: string) => JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8"));
const fake = (mode: string) => `python3 {bench}/test/helpers/fake_runner.py ${mode} {model}`;
const runWith = (runner: string, runId: string, prompts = ["4"]) =>
  bench(["run", "--suite", "parity16", "--runner", runner, ...prompts.flatMap((p) => ["--prompt", p]), "--runs-dir", runs, "--run-id", runId]);

test("an independent plain-Python forward, behind the runner protocol, passes parity16 against the llama.cpp goldens", () => {
  const result = runWith("python3 {bench}/scripts/runners/reference_forward.py {model}", "reference", ["4", "15"]);
  assert.is(result.status, 0, result.stdout + result.stderr);
  assert.match(result.stdout, /^runner correctness gate: 2\/2 prompts PASS \(STRICT 2\/2;/m);
  for (const check of ["tokenizer", "greedy_parity", "teacher_forced", "determinism", "batch_invariance"]) {
    assert.match(result.stdout, new RegExp(`^parity16 +runner +${check} .* PASS `, "m"));
  }
  const run = summary("reference");
  assert.is(run.suts[0].provenance.kind, "stdio");
  assert.match(run.suts[0].provenance.engine, /^reference_forward\.py \(numpy float64, llama\) \(runner protocol v1\)$/);
  assert.is(run.suts[0].provenance.settings.precision, "float64");
  assert.match(run.suts[0].provenance.modelSha256, /^[0-9a-f]{64}$/);
  assert.equal(run.trace, [], "this runner captures no graph");
});

test("a runner that dies at boot, logs on stdout or speaks another version: one clear line, exit 2, nothing hangs", () => {
  const died = runWith(fake("dies-at-boot"), "dies-at-boot");
  assert.is(died.status, 2);
  assert.match(died.stderr, /the runner did not start: the runner exited \(code 3\); its stderr ended: device 3 did not answer: check the board/);
  const chatty = runWith(fake("logs-on-stdout"), "logs-on-stdout");
  assert.is(chatty.status, 2);
  assert.match(chatty.stderr, /stdout: the runner wrote a line that is not a JSON object on stdout: "loading weights \.\.\." \(fix: stdout carries protocol lines only; print logs to stderr\)/);
  const newer = runWith(fake("version-2"), "version-2");
  assert.is(newer.status, 2);
  assert.match(newer.stderr, /hello\.version: the runner speaks protocol version 2; this harness speaks 1/);
});

test("a runner that dies mid-check errors that check with its last words; missing methods are SKIPPED, never passed", () => {
  const died = runWith(fake("dies-in-greedy"), "dies-in-greedy");
  assert.is(died.status, 2, died.stdout + died.stderr);
  assert.match(died.stdout, /greedy_parity +required +ERROR +the runner exited \(code 5\); its stderr ended: fabric timeout on chip 2/);
  assert.match(died.stdout, /tokenizer +required +PASS/, "checks before the crash keep their verdicts");
  const partial = runWith(fake("partial"), "partial");
  assert.is(partial.status, 77, partial.stdout + partial.stderr);
  assert.match(partial.stdout, /teacher_forced +informational +skipped +runner lacks teacher_forced_top_k/);
  assert.match(partial.stdout, /SKIPPED — NOT A PASS: parity16 \/ runner \/ batch_invariance: runner lacks batched_greedy/);
});

test("trace-region demand a runner reports goes into summary.json and the baseline's ratchet", () => {
  assert.equal(summary("partial").trace, [{ suite: "parity16", arm: "runner", capture: "decode", demand_bytes: 7340032, region_bytes: 16777216, region_semantics: "fixed-per-bank" }]);
  const baseline = join(work.path, "baseline.json");
  assert.is(bench(["gate", "partial", "--runs-dir", runs, "--baseline", baseline, "--update", "--accept-failing"]).status, 0, "the partial run skipped a required gate: taken only when told so");
  assert.equal(JSON.parse(readFileSync(baseline, "utf8")).trace, { "parity16/runner/decode": { demand_bytes: 7340032, tolerance: 0 } });
});

const cellsOf = (runId: string) => readFileSync(join(runs, runId, "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line));

test("short or empty greedy answers fail their prompts with the reason, never pass as NEAR-TIE", () => {
  const short = runWith(fake("short-answers"), "short-answers");
  assert.is(short.status, 1, short.stdout + short.stderr);
  assert.match(short.stdout, /^runner correctness gate: 0\/1 prompts PASS \(STRICT 0\/1; near-tie-band only 0\/1; max gap 0\.000 nats; 0 forward-divergent; 1 answers rejected\)$/m);
  const rejected = cellsOf("short-answers").find((c) => c.check === "greedy_parity");
  assert.equal([rejected.prompt, rejected.status, rejected.detail, rejected.reproduce], [4, "fail", "greedy answer rejected: 8 of 16 ids, and it does not end on an end-of-sequence id the request allows", `bench run --suite parity16 --runner "${fake("short-answers")}" --prompt 4`]);
  const empty = runWith(fake("empty-sequence"), "empty-sequence", ["4", "15"]);
  assert.is(empty.status, 1, empty.stdout + empty.stderr);
  assert.match(empty.stdout, /^runner correctness gate: 1\/2 prompts PASS \(STRICT 1\/2;.*; 1 answers rejected\)$/m);
  assert.ok(cellsOf("empty-sequence").some((c) => c.check === "greedy_parity" && c.prompt === 4 && c.detail === "greedy answer rejected: an empty sequence, the request asked for 16 ids"));
});

test("all-zero or NaN teacher-forced log-probs fail teacher_forced with the reason, counted as required on a required arm (exit 1); summary.json stays valid and complete", () => {
  const zeros = runWith(fake("zero-logprobs"), "zero-logprobs");
  assert.is(zeros.status, 1, "broken answers in an informational check still fail a required arm");
  assert.match(zeros.stdout, /teacher_forced +required +FAIL +no prompt could be scored; 1\/1 prompts' answers rejected \(prompt 4: position 0: the top-20 probabilities sum to 20\.00 \(> 1\): not log-softmax values\); counted as required/);
  assert.not.match(zeros.stdout, /top-1 100\.00%/);
  const nan = runWith(fake("nan-logprobs"), "nan-logprobs", ["4", "15"]);
  assert.is(nan.status, 1, "teacher_forced is informational in parity16, but a NaN is a broken answer, not a distance");
  assert.match(nan.stdout, /teacher_forced +required +FAIL +top-1 100\.00%, top-5 100\.00% over 16 positions; .*; 1\/2 prompts' answers rejected \(prompt 4: position 0: log-prob NaN of id \d+ is not finite\)/);
  const run = summary("nan-logprobs");
  assert.is(run.status, "complete");
  assert.is(run.exit_code, 1);
  assert.is(run.verdicts.find((v: { check: string }) => v.check === "teacher_forced").metrics.rejected, 1);
});

test("a malformed or failed trace_demand answer is an error verdict naming the method and field, not a crash", () => {
  const bogus = runWith(fake("bad-trace-demand"), "bad-trace-demand");
  assert.is(bogus.status, 2, bogus.stdout + bogus.stderr);
  assert.not.match(bogus.stderr, /\n\s+at /, "no stack trace");
  assert.match(bogus.stdout, /trace_demand +required +ERROR +runner trace_demand: result\.captures\[0\]\.region_semantics must be one of fixed-per-bank, fixed-total, dynamic \(got "bogus"\)/);
  assert.is(summary("bad-trace-demand").status, "complete");
  const failed = runWith(fake("trace-demand-error"), "trace-demand-error");
  assert.is(failed.status, 2);
  assert.match(failed.stdout, /trace_demand +required +ERROR +runner trace_demand: RuntimeError: the profiler is not attached/);
});

test("a runner error on one prompt fails that prompt (with its --prompt line); the other prompts still run", () => {
  const result = runWith(fake("error-on-prompt:15"), "error-on-prompt", ["4", "15"]);
  assert.is(result.status, 1, result.stdout + result.stderr);
  assert.match(result.stdout, /^runner correctness gate: 1\/2 prompts PASS \(STRICT 1\/2;.*; 1 answers rejected\)$/m);
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

test("a runner offering the first kernel suites' dequantize / matvec is told they were replaced by kernel: SKIPPED, exit 77", () => {
  const suite = join(work.path, "first-kernel-methods.json");
  writeFileSync(suite, JSON.stringify({
    name: "first-kernel-methods", kind: "kernels",
    cases: [{ op: "matvec", encoding: "Q8_0:F32", rows: 16, cols: 256, seed: 1 }],
    arms: [{ label: "old kernels", runner: ["python3", "{bench}/test/helpers/fake_runner.py", "first-kernel-methods", "none"], gate: "required" }],
  }));
  const result = bench(["run", "--suite", suite, "--runs-dir", join(work.path, "runs"), "--run-id", "first-kernel-methods"]);
  assert.is(result.status, 77, result.stdout + result.stderr);
  assert.match(result.stdout, /SKIPPED — NOT A PASS: first-kernel-methods \/ old kernels \/ matvec: old kernels lacks kernel: the runner offers dequantize, matvec: these methods of the first kernel suites were replaced by `kernel`/);
});

test.run();
