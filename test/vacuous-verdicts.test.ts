// test-tier: fast

import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { GateVerdict, RunEvent } from "../harness/results/types.js";
import { runKernelArm, DEFAULT_TIMING_PLAN } from "../harness/runner/kernel-runner.js";
import { runNiahArm } from "../harness/runner/niah-runner.js";
import { loadSuite } from "../harness/suites/load.js";
import type { KernelSuite } from "../harness/suites/kernel-suite.js";
import { resolveNiahSuite, type NiahSuite } from "../harness/suites/niah-suite.js";
import type { SystemUnderTest } from "../harness/sut/types.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("vacuous-verdicts");
test.after(() => work.remove());
const runs = join(work.path, "runs");

/** A FAKE SUT that has every method a check asks for and must never be called: the checks below have nothing to ask it. */
function neverCalled(label: string, kernelPairs: SystemUnderTest["kernelPairs"] = []): SystemUnderTest {
  const called = async (): Promise<never> => { throw new Error(`${label} was called`); };
  return {
    label, provenance: { kind: "fake", engine: "FAKE", settings: {} }, kernelPairs,
    tokenize: called, detokenize: called, inspectTokens: called, greedy: called, kernel: called, kernelTime: called,
    close: async () => {},
  };
}

function collect(): { verdicts: GateVerdict[]; emit: (event: RunEvent) => void } {
  const verdicts: GateVerdict[] = [];
  return { verdicts, emit: (event) => { if (event.kind === "verdict") verdicts.push(event.verdict); } };
}

test("--prompt 0 alone: batch invariance (B=1 vs B=1) is SKIPPED with the reason, not passed; a required skip exits 77", () => {
  const result = bench(["run", "--suite", "parity16", "--arm", "F32", "--prompt", "0", "--runs-dir", runs, "--run-id", "one-prompt"]);
  assert.is(result.status, 77, result.stdout + result.stderr);
  const verdicts = JSON.parse(readFileSync(join(runs, "one-prompt", "summary.json"), "utf8")).verdicts as GateVerdict[];
  const batch = verdicts.find((v) => v.check === "batch_invariance")!;
  assert.is(batch.status, "skip");
  assert.match((batch as { reason: string }).reason, /one prompt selected: B=1 against B=1 cannot fail \(select two or more prompts, e.g. --prompt 0 --prompt 1\)/);
  // An empty list would pass `every`: parity must be among the gates that ran.
  const others = verdicts.filter((v) => v.check !== "batch_invariance");
  assert.ok(others.some((v) => v.check === "greedy_parity") && others.every((v) => v.status === "pass"), `the other gates ran and passed: ${JSON.stringify(others.map((v) => [v.check, v.status]))}`);
  assert.match(result.stdout, /SKIPPED — NOT A PASS/);
  const two = bench(["run", "--suite", "parity16", "--arm", "F32", "--prompt", "0", "--prompt", "1", "--runs-dir", runs, "--run-id", "two-prompts"]);
  assert.is(two.status, 0, two.stdout + two.stderr);
});

test("a needle arm with no case is SKIPPED (an empty grid cannot fail), not failed or passed; a SUT that cannot say its model leaves identity unverified", async () => {
  const { verdicts, emit } = collect();
  const spec = resolveNiahSuite(loadSuite("niah") as NiahSuite);
  const expectedModel = { file: "copy-4k.gguf", sha256: "0".repeat(64), what: "the model the arm names (copy-4k)" };
  await runNiahArm({ suiteName: "niah", spec, cases: [], arm: { label: "copy-4k", gate: "required" }, sut: neverCalled("FAKE needle SUT"), emit, signal: new AbortController().signal, reproduce: "bench run --suite niah", expectedModel });
  assert.equal(verdicts.map((v) => [v.check, v.gate, v.status]), [["identity", "required", "skip"], ["niah", "required", "skip"]]);
  assert.match((verdicts[0] as { reason: string }).reason, /^unverified: FAKE needle SUT does not say which model file it loaded .*the model the arm names \(copy-4k\) is copy-4k\.gguf/);
  assert.match((verdicts[1] as { reason: string }).reason, /no needle case to run in niah/);
});

test("a timing pass with no case timed is SKIPPED, not passed", async () => {
  const { verdicts, emit } = collect();
  const suite = loadSuite("quant-kernels") as KernelSuite;
  // The FAKE SUT registers no pair: every case is SKIPPED by name, so nothing is timed.
  await runKernelArm({ suiteName: suite.name, arm: { label: "FAKE", gate: "required" }, sut: neverCalled("FAKE kernel SUT"), cases: suite.cases.slice(0, 1).map((spec, index) => ({ index, spec })), timing: DEFAULT_TIMING_PLAN, emit, signal: new AbortController().signal, reproduce: "bench run" });
  assert.equal(verdicts.map((v) => [v.check, v.status]), [[suite.cases[0].op, "skip"], ["kernel_time", "skip"]]);
  assert.match((verdicts[1] as { reason: string }).reason, /no case was timed/);
});

test.run();
