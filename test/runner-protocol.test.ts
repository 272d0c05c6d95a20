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
  assert.match(partial.stdout, /teacher_forced +informational +skipped +runner lacks teacherForcedTopK/);
  assert.match(partial.stdout, /SKIPPED — NOT A PASS: parity16 \/ runner \/ batch_invariance: runner lacks batchedGreedy/);
});

test("trace-region demand a runner reports goes into summary.json and the baseline's ratchet", () => {
  assert.equal(summary("partial").trace, [{ suite: "parity16", arm: "runner", capture: "decode", demand_bytes: 7340032, region_bytes: 16777216, region_semantics: "fixed-per-bank" }]);
  const baseline = join(work.path, "baseline.json");
  assert.is(bench(["gate", "partial", "--runs-dir", runs, "--baseline", baseline, "--update"]).status, 0);
  assert.equal(JSON.parse(readFileSync(baseline, "utf8")).trace, { "parity16/runner/decode": { demand_bytes: 7340032, tolerance: 0 } });
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

test.run();
