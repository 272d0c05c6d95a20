import { test } from "uvu";
import * as assert from "uvu/assert";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { resolveModel } from "../harness/fixtures/registry.js";
import { exitCodeFor } from "../harness/results/verdicts.js";
import type { GateVerdict } from "../harness/results/types.js";
import { LlamaCppSut } from "../harness/sut/llamacpp.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { BENCH_BIN, bench, temporaryDirectory, withoutForceColor } from "./helpers/workspace.js";
import { faultInjectingSut, type Fault } from "./helpers/fault-injecting-sut.js";
import { describeRun, runInProcess } from "./helpers/in-process-run.js";

const work = temporaryDirectory("run");
test.after(() => work.remove());
const runs = join(work.path, "runs");

function summaryOf(runId: string) {
  return JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8"));
}

// A clean run's result files and summary lines are checked end to end in report-gate.test.ts, on the
// run its gates read (the same parity16 arms, F32 and Q8_0): made once there, not again here.

const PLANTED_MODELS = ["tiny-random-perturbed-layer", "tiny-random-rope-base", "tiny-random-swapped-vocab"] as const;

/**
 * The planted-fault models as arms of one parity16 run, each arm what `--model` makes of it (the F32
 * arm's settings on that model, required, labelled by the model): one run instead of three, in this
 * process (helpers/in-process-run.ts).
 */
async function makePlantedRun() {
  const suite = JSON.parse(readFileSync(join(PACKAGE_ROOT, "suites", "parity16.json"), "utf8")) as { arms: { label: string }[] };
  const f32 = suite.arms.find((a) => a.label === "F32")!;
  const path = join(work.path, "planted.json");
  writeFileSync(path, JSON.stringify({ ...suite, $schema: undefined, arms: PLANTED_MODELS.map((model) => ({ ...f32, label: model, model, gate: "required" })) }));
  const result = await runInProcess(runs, "planted", { suites: [path] });
  const verdicts = summaryOf("planted").verdicts as GateVerdict[];
  // What each arm's own run would have exited with.
  return { result, verdictsOf: (model: string) => verdicts.filter((v) => v.arm === model) };
}
let planted: ReturnType<typeof makePlantedRun> | undefined;
const plantedRun = () => (planted ??= makePlantedRun());

for (const [model, expectation] of [
  ["tiny-random-perturbed-layer", /FORWARD|forward-divergent/],
  ["tiny-random-rope-base", /forward-divergent/],
] as const) {
  test(`planted fault ${model}: FORWARD-DIVERGENT, exit 1`, async () => {
    const { result, verdictsOf } = await plantedRun();
    assert.is(result.code, 1, describeRun(result));
    assert.is(exitCodeFor(verdictsOf(model)), 1);
    const line = result.summaryLines.join("\n").match(new RegExp(`^${model} correctness gate: .*$`, "m"))?.[0] ?? "";
    assert.match(line, new RegExp(`^${model} correctness gate: \\d+/16 prompts PASS .*[1-9]\\d* forward-divergent\\)$`), describeRun(result));
    assert.match(line, expectation);
    const failed = verdictsOf(model).filter((v) => v.status === "fail").map((v) => v.check);
    assert.ok(failed.includes("greedy_parity"));
  });
}

test("planted fault tiny-random-swapped-vocab: the tokenizer gate catches it, exit 1", async () => {
  const { result, verdictsOf } = await plantedRun();
  assert.is(result.code, 1);
  assert.is(exitCodeFor(verdictsOf("tiny-random-swapped-vocab")), 1);
  const tokenizer = verdictsOf("tiny-random-swapped-vocab").find((v) => v.check === "tokenizer")!;
  assert.is(tokenizer.status, "fail");
  assert.match(tokenizer.status === "fail" ? tokenizer.summary : "", /\d+\/16 prompts tokenize to the goldens' ids/);
});

function programmaticRun(runId: string, fault: Fault | undefined, options: { arms?: string[]; caseTimeoutS?: number; suite?: string; niahCases?: string[] } = {}) {
  return runInProcess(runs, runId, {
    suites: [options.suite ?? "parity16"],
    arms: options.arms ?? ["F32"],
    niahCases: options.niahCases,
    caseTimeoutS: options.caseTimeoutS,
    openSut: async (arm, settings) => {
      const real = await LlamaCppSut.open((await resolveModel(arm.model)).path, settings, arm.label);
      return fault === undefined ? real : faultInjectingSut(real, fault);
    },
  });
}

test("planted fault: a SUT fed different prompt ids ends FORWARD-DIVERGENT, exit 1", async () => {
  const { code, verdicts } = await programmaticRun("tamper", { kind: "tamper-prompt-ids" });
  assert.is(code, 1);
  const parity = verdicts.find((v) => v.check === "greedy_parity")!;
  assert.is(parity.status, "fail");
  assert.ok(parity.status === "fail" && Number(parity.metrics.forward_divergent) > 0);
});

test("a required check whose capability the SUT lacks is SKIPPED — NOT A PASS, exit 77", async () => {
  const { code, verdicts } = await programmaticRun("no-batch", { kind: "without", capability: "batchedGreedy" });
  assert.is(code, 77);
  const skipped = verdicts.find((v) => v.check === "batch_invariance")!;
  assert.is(skipped.status, "skip");
  assert.match(skipped.status === "skip" ? skipped.reason : "", /lacks batched_greedy/);
  assert.match(readFileSync(join(runs, "no-batch", "junit.xml"), "utf8"), /<failure message="SKIPPED — NOT A PASS: .*lacks batched_greedy"/);
});

test("a SUT that crashes or hangs mid-run: error verdict with a one-line reason, exit 2, finished results kept", async () => {
  const crash = await programmaticRun("crash", { kind: "crash-on-greedy-call", call: 2 }, { arms: ["F32", "Q8_0"] });
  assert.is(crash.code, 2);
  const determinism = crash.verdicts.find((v) => v.arm === "F32" && v.check === "determinism")!;
  assert.is(determinism.status, "error");
  assert.match(determinism.status === "error" ? determinism.reason : "", /^SUT process exited with signal SIGSEGV$/);
  assert.ok(crash.verdicts.some((v) => v.arm === "Q8_0" && v.status === "pass"), "later arms still ran");
  const hang = await programmaticRun("hang", { kind: "hang-on-greedy-call", call: 1 }, { caseTimeoutS: 1 });
  assert.is(hang.code, 2);
  const parity = hang.verdicts.find((v) => v.check === "greedy_parity")!;
  assert.match(parity.status === "error" ? parity.reason : "", /greedy did not answer within 1 s \(per-case timeout: raise it with --case-timeout SECONDS or case_timeout_s in \S+\/parity16\.json\)/);
  const lines = readFileSync(join(runs, "hang", "cells.jsonl"), "utf8").trim().split("\n");
  assert.ok(lines.length > 1, "cells of the checks that finished are kept");
});

test("a needle case that errors keeps L, depth, trial and seed, and the next case still runs; a timeout ends the check as an error", async () => {
  const cases = ["4000:0.25:0", "4000:0.75:0"];
  const niahCells = (runId: string) => readFileSync(join(runs, runId, "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line)).filter((c) => c.check === "niah");
  const crash = await programmaticRun("niah-crash", { kind: "error-on-greedy-call", call: 1 }, { suite: "niah", arms: ["copy-4k"], niahCases: cases });
  assert.is(crash.code, 1, "the SUT failed one case");
  const verdict = crash.verdicts.find((v) => v.check === "niah")!;
  assert.is(verdict.status, "fail");
  const crashed = niahCells("niah-crash");
  assert.equal(crashed.map((c) => [c.status, c.niah_length, c.niah_depth, c.niah_trial, typeof c.niah_seed, c.reproduce.endsWith(` --niah-case ${c.niah_length}:${c.niah_depth}:0`)]),
    [["fail", 4000, 0.25, 0, "number", true], ["pass", 4000, 0.75, 0, "number", true]]);
  assert.is(crashed[0].detail, "greedy answer rejected: kernel launch failed");
  const hang = await programmaticRun("niah-hang", { kind: "hang-on-greedy-call", call: 1 }, { suite: "niah", arms: ["copy-4k"], niahCases: cases, caseTimeoutS: 1 });
  assert.is(hang.code, 2);
  const hung = niahCells("niah-hang");
  assert.equal(hung.map((c) => [c.status, c.niah_length, c.niah_depth, c.niah_trial]), [["error", 4000, 0.25, 0]]);
  assert.match(hung[0].detail, /greedy did not answer within 1 s \(per-case timeout: raise it with --case-timeout SECONDS or case_timeout_s in \S+\/niah\.json\)/);
  assert.ok(hung[0].niah_seed !== null);
  const hungVerdict = hang.verdicts.find((v) => v.check === "niah")!;
  assert.match(hungVerdict.status === "error" ? hungVerdict.reason : "", /^1 needle case\(s\) errored; the others did not run: .*per-case timeout/);
});

test("the clean model passes in every one of 10 reruns", async () => {
  // Ten copies of parity16's F32 arm in one bench run: each is its own leg (a fresh SUT, every gate
  // again) as a rerun was, without ten process starts (ten runs: about 2.9 s of CPU each; one run of ten legs: 6.9 s),
  // in this process (helpers/in-process-run.ts).
  const suite = JSON.parse(readFileSync(join(PACKAGE_ROOT, "suites", "parity16.json"), "utf8")) as { arms: { label: string }[] };
  const f32 = suite.arms.find((a) => a.label === "F32")!;
  const labels = Array.from({ length: 10 }, (_, i) => `F32 rerun ${i}`);
  const path = join(work.path, "reruns.json");
  writeFileSync(path, JSON.stringify({ ...suite, $schema: undefined, arms: labels.map((label) => ({ ...f32, label })) }));
  const result = await runInProcess(runs, "reruns", { suites: [path] });
  assert.is(result.code, 0, describeRun(result));
  const verdicts = summaryOf("reruns").verdicts as GateVerdict[];
  for (const label of labels) {
    const own = verdicts.filter((v) => v.arm === label);
    // What the rerun's own exit code said: every required gate of that arm ran and passed.
    assert.ok(own.length > 0, `${label} ran`);
    assert.is(exitCodeFor(own), 0, `${label}: ${JSON.stringify(own)}`);
  }
});

test("bad input: unknown suite field, missing goldens, goldens for another artifact, unknown arm — one line, exit 2", () => {
  const suite = JSON.parse(readFileSync(join(PACKAGE_ROOT, "suites", "parity16.json"), "utf8"));
  const unknownField = join(work.path, "unknown-field.json");
  writeFileSync(unknownField, JSON.stringify({ ...suite, $schema: undefined, promtps: [] }));
  let result = bench(["run", "--suite", unknownField, "--runs-dir", runs]);
  assert.is(result.status, 2);
  assert.match(result.stderr, /^bench: error: .*unknown-field\.json: promtps: unknown field \(fix: remove it or check its spelling/m);
  assert.is(result.stderr.trim().split("\n").length, 1, `one line: ${result.stderr}`);

  const noGoldens = join(work.path, "no-goldens.json");
  writeFileSync(noGoldens, JSON.stringify({ ...suite, $schema: undefined, name: "no-goldens" }));
  result = bench(["run", "--suite", noGoldens, "--runs-dir", runs]);
  assert.is(result.status, 2);
  // Given by path, the suite is named by path in the fix: its name alone would not find it.
  assert.ok(result.stderr.includes(`no goldens for suite no-goldens on tiny-random:F32 (fix: make them: bench goldens make --suite ${noGoldens})`), result.stderr);

  const otherOracle = join(work.path, "parity16.json");
  writeFileSync(otherOracle, JSON.stringify({ ...suite, $schema: undefined, oracle: { model: "tiny-random:Q8_0" } }));
  result = bench(["run", "--suite", otherOracle, "--runs-dir", runs]);
  assert.is(result.status, 2);
  assert.match(result.stderr, /no goldens for suite parity16 on tiny-random:Q8_0/);

  result = bench(["run", "--arm", "Q4_KM", "--runs-dir", runs]);
  assert.is(result.status, 2);
  assert.match(result.stderr, /no arm "Q4_KM" in parity16, zoo-quick, niah-quick, serve-conformance, owned-kernels \(did you mean "Q4_K"\?\)/);

  // The default battery's parity suites hold 16 and 4 prompts: an index only parity16 has is refused before any arm runs.
  result = bench(["run", "--prompt", "4", "--prompt", "5", "--runs-dir", runs]);
  assert.is(result.status, 2);
  assert.match(result.stderr, /zoo-quick\.json: --prompt: prompt index 4 is out of range \(fix: use 0\.\.3\)/);
  assert.not.match(result.stdout, /correctness gate/, "no arm ran");
});

test("Ctrl-C mid-run: the SUT is stopped, finished cells are kept, status interrupted, exit 2", async () => {
  const child = spawn(process.execPath, [BENCH_BIN, "run", "--runs-dir", runs, "--run-id", "interrupted"], { cwd: PACKAGE_ROOT, env: { ...withoutForceColor(process.env), CI: "1" } });
  let stdout = "";
  let interrupted = false;
  child.stdout.on("data", (chunk) => {
    stdout += chunk;
    // One Ctrl-C only: a second one is a forced stop, a different path (test/exit-paths.test.ts).
    if (!interrupted && stdout.includes("correctness gate")) {
      interrupted = true;
      child.kill("SIGINT");
    }
  });
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  assert.is(code, 2, stdout);
  const summary = summaryOf("interrupted");
  assert.is(summary.status, "interrupted");
  assert.ok(summary.cells > 0);
  assert.ok(existsSync(join(runs, "interrupted", "cells.arrow")));
});

test.run();
