import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { describeRun, errorLine, runInProcess, verdictRow } from "./helpers/in-process-run.js";
import { temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("reference-forward");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const REFERENCE = "python3 {bench}/harness/oracle/float64/reference_forward.py {model}";
// Every run here is `bench run` in this process (helpers/in-process-run.ts): what is tried is the reference forward, not the CLI.
const runWith = (runner: string, runId: string, model = "tiny-random:F32") =>
  runInProcess(runs, runId, { suites: ["parity16"], model, runner: runner.split(" "), prompts: [4] });

/** parity16 with other arms, filed against parity16's goldens (`goldens_of`). */
function borrowingSuite(name: string, prompts: readonly string[]): string {
  const parity16 = JSON.parse(readFileSync(resolve(PACKAGE_ROOT, "suites", "parity16.json"), "utf8"));
  const path = join(work.path, `${name}.json`);
  const { $schema: _schema, ...rest } = parity16;
  writeFileSync(path, JSON.stringify({
    ...rest, name, goldens_of: "parity16", prompts,
    arms: [{ label: "reference", model: "tiny-random:F32", sut: "stdio", command: REFERENCE.split(" "), gate: "required" }],
  }));
  return path;
}

test("a suite may borrow another suite's goldens (goldens_of): the reference forward as its arm passes on parity16's goldens; other prompts are refused", async () => {
  const parity16 = JSON.parse(readFileSync(resolve(PACKAGE_ROOT, "suites", "parity16.json"), "utf8"));
  const borrowed = await runInProcess(runs, "borrowed", { suites: [borrowingSuite("parity16-reference", parity16.prompts)], prompts: [4, 5] });
  assert.is(borrowed.code, 0, describeRun(borrowed));
  assert.match(verdictRow(borrowed, "greedy_parity", { suite: "parity16-reference", arm: "reference" }), /^required pass .*2\/2 prompts PASS \(STRICT 2\/2;/);
  const summary = JSON.parse(readFileSync(join(runs, "borrowed", "summary.json"), "utf8"));
  assert.match(summary.oracles[0].goldens, /goldens\/tiny-random\.F32\/parity16$/);
  const changed = await runInProcess(runs, "changed", { suites: [borrowingSuite("parity16-changed", ["Hello, world!"])] });
  assert.is(changed.code, 2);
  assert.match(errorLine(changed), /prompts\.texts_sha256: the suite's prompts changed since its goldens were made \(fix: re-make them: bench goldens make --suite parity16\)/);
});

test("the reference refuses, in its hello, a FAULT its family cannot carry and a quantized model: exit 2, one line", async () => {
  const fault = await runWith(`${REFERENCE} --fault swa-off-by-one`, "wrong-fault");
  assert.is(fault.code, 2, describeRun(fault));
  assert.match(errorLine(fault), /--fault swa-off-by-one: does not apply to llama \(it takes: final-norm-skipped, output-head-x0.5, output-head-x1.01, trace-buffers-leak, trace-position-frozen, trace-weights-decoded\)/);
  const quantized = await runWith(REFERENCE, "quantized", "tiny-random:Q8_0");
  assert.is(quantized.code, 2, describeRun(quantized));
  assert.match(errorLine(quantized), /tensor \S+ is ggml type 8; the reference reads F32\/F16 models \(use the :F32 fixture\)/);
});

test("zoo-reference: the reference forward of every family passes its family's llama.cpp goldens (one prompt here; all 16 in the table of docs/oracles.md)", async () => {
  const run = await runInProcess(runs, "zoo-reference", { suites: ["zoo-reference"], prompts: [4] });
  // One prompt cannot test batch invariance: SKIPPED, exit 77; every gate that could run passed.
  assert.is(run.code, 77, describeRun(run));
  const verdicts: { check: string; status: string }[] = JSON.parse(readFileSync(join(runs, "zoo-reference", "summary.json"), "utf8")).verdicts;
  assert.equal([...new Set(verdicts.filter((v) => v.status !== "pass").map((v) => `${v.check} ${v.status}`))], ["batch_invariance skip"]);
  // Each arm's own distribution bounds (twice its clean value over 16 prompts) hold on this prompt too.
  for (const arm of ["qwen35 reference", "qwen35moe reference", "gemma4 reference", "gemma4 reference, ggml GELU table", "nemotron_h_moe reference"]) {
    assert.match(verdictRow(run, "distribution", { arm }), /^required pass /, arm);
  }
  for (const family of ["qwen35", "qwen35moe", "gemma4", "nemotron_h_moe"]) {
    assert.match(verdictRow(run, "greedy_parity", { arm: `${family} reference` }), /^required pass .*1\/1 prompts PASS \(STRICT 1\/1;/, family);
    assert.match(verdictRow(run, "determinism", { arm: `${family} reference` }), /^required pass /, family);
  }
});

test("each planted FAULT of the reference fails its family's gates: delta-net gate sign, slot poisoning (qwen35, nemotron_h_moe), weights not renormalised, window off by one", async () => {
  const faulty = (family: string, fault: string) => runInProcess(runs, `${family}-${fault}`, { suites: ["zoo-reference"], arms: [`${family} reference`], runner: `${REFERENCE} --fault ${fault}`.split(" "), prompts: [4] });
  for (const [family, fault] of [["qwen35", "gdn-gate-sign"], ["qwen35moe", "moe-no-renorm"], ["gemma4", "swa-off-by-one"]]) {
    const run = await faulty(family, fault);
    assert.is(run.code, 1, `${family} ${fault}: ${describeRun(run)}`);
    assert.match(verdictRow(run, "greedy_parity"), /^required fail .*0\/1 prompts PASS \(STRICT 0\/1; near-tie-band only 0\/1; max gap \d+\.\d+ nats @ prompt\[4\] tok=\d+; 1 forward-divergent\)/, `${family} ${fault}`);
    const summary = JSON.parse(readFileSync(join(runs, `${family}-${fault}`, "summary.json"), "utf8"));
    assert.ok(summary.suts[0].provenance.engine.endsWith(`FAULT ${fault} (runner protocol v1)`), summary.suts[0].provenance.engine);
    // The runner stands in for the arm --arm names (its family's goldens): the reproduce line must name that arm too.
    const reproduce: string[] = readFileSync(join(runs, `${family}-${fault}`, "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line).reproduce);
    assert.ok(reproduce.length > 0 && reproduce.every((line) => line.includes(`--arm "${family} reference"`)), reproduce[0]);
  }
  for (const family of ["qwen35", "nemotron_h_moe"]) {
    const run = await faulty(family, "state-not-cleared");
    assert.is(run.code, 1, describeRun(run));
    assert.match(verdictRow(run, "determinism"), /^required fail .*0\/1 prompts identical over 3 reruns; .*state leaking from earlier requests/);
    // One prompt: B=1 against B=1 is not a batch, so that check is SKIPPED; determinism has already caught the leak.
    assert.match(verdictRow(run, "batch_invariance"), /^required skip .*one prompt selected/);
  }
});

test("zoo-reference is distribution-gated per arm: FAULT output-head-x1.01 keeps every greedy id and fails its family's bounds", async () => {
  // gemma4 through the GELU-table arm: the exact-GELU arm's floor (llama.cpp's fp16 table) is above this fault.
  for (const [arm, extra] of [["qwen35 reference", ""], ["nemotron_h_moe reference", ""], ["gemma4 reference, ggml GELU table", " --gelu ggml-fp16-table"]]) {
    const runId = `head-${arm.split(" ")[0]}`;
    const run = await runInProcess(runs, runId, { suites: ["zoo-reference"], arms: [arm], runner: `${REFERENCE}${extra} --fault output-head-x1.01`.split(" "), prompts: [4] });
    assert.is(run.code, 1, `${arm}: ${describeRun(run)}`);
    assert.match(verdictRow(run, "greedy_parity"), /^required pass .*1\/1 prompts PASS \(STRICT 1\/1;/, arm);
    assert.match(verdictRow(run, "distribution"), /^required fail .*FAIL (kld p99|rms delta p) /, arm);
  }
});

test.run();
