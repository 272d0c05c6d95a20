import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("reference-forward");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const REFERENCE = "python3 {bench}/scripts/runners/reference_forward.py {model}";
const runWith = (runner: string, runId: string, model = "tiny-random:F32") =>
  bench(["run", "--suite", "parity16", "--model", model, "--runner", runner, "--prompt", "4", "--runs-dir", runs, "--run-id", runId]);

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

test("a suite may borrow another suite's goldens (goldens_of): the reference forward as its arm passes on parity16's goldens; other prompts are refused", () => {
  const parity16 = JSON.parse(readFileSync(resolve(PACKAGE_ROOT, "suites", "parity16.json"), "utf8"));
  const borrowed = bench(["run", "--suite", borrowingSuite("parity16-reference", parity16.prompts), "--prompt", "4", "--prompt", "5", "--runs-dir", runs, "--run-id", "borrowed"]);
  assert.is(borrowed.status, 0, borrowed.stdout + borrowed.stderr);
  assert.match(borrowed.stdout, /^parity16-reference +reference +greedy_parity +required +PASS +2\/2 prompts PASS \(STRICT 2\/2;/m);
  const summary = JSON.parse(readFileSync(join(runs, "borrowed", "summary.json"), "utf8"));
  assert.match(summary.oracles[0].goldens, /goldens\/tiny-random\.F32\/parity16$/);
  const changed = bench(["run", "--suite", borrowingSuite("parity16-changed", ["Hello, world!"]), "--runs-dir", runs, "--run-id", "changed"]);
  assert.is(changed.status, 2);
  assert.match(changed.stderr, /prompts\.texts_sha256: the suite's prompts changed since its goldens were made \(fix: re-make them: bench goldens make --suite parity16\)/);
});

test("the reference refuses, in its hello, a FAULT its family cannot carry and a quantized model: exit 2, one line", () => {
  const fault = runWith(`${REFERENCE} --fault swa-off-by-one`, "wrong-fault");
  assert.is(fault.status, 2, fault.stdout + fault.stderr);
  assert.match(fault.stderr, /--fault swa-off-by-one: does not apply to llama \(it takes: final-norm-skipped, output-head-x0.5, output-head-x1.01, trace-buffers-leak, trace-position-frozen\)/);
  const quantized = runWith(REFERENCE, "quantized", "tiny-random:Q8_0");
  assert.is(quantized.status, 2, quantized.stdout + quantized.stderr);
  assert.match(quantized.stderr, /tensor \S+ is ggml type 8; the reference reads F32\/F16 models \(use the :F32 fixture\)/);
});

test("zoo-reference: the reference forward of every family passes its family's llama.cpp goldens (one prompt here; all 16 in the table of docs/oracles.md)", () => {
  const run = bench(["run", "--suite", "zoo-reference", "--prompt", "4", "--runs-dir", runs, "--run-id", "zoo-reference"]);
  // One prompt cannot test batch invariance: SKIPPED, exit 77; every gate that could run passed.
  assert.is(run.status, 77, run.stdout + run.stderr);
  const verdicts: { check: string; status: string }[] = JSON.parse(readFileSync(join(runs, "zoo-reference", "summary.json"), "utf8")).verdicts;
  assert.equal([...new Set(verdicts.filter((v) => v.status !== "pass").map((v) => `${v.check} ${v.status}`))], ["batch_invariance skip"]);
  // Each arm's own distribution bounds (twice its clean value over 16 prompts) hold on this prompt too.
  for (const arm of ["qwen35 reference", "qwen35moe reference", "gemma4 reference", "gemma4 reference, ggml GELU table", "nemotron_h_moe reference"]) {
    assert.match(run.stdout, new RegExp(`^zoo-reference +${arm} +distribution +required +PASS +`, "m"), arm);
  }
  for (const family of ["qwen35", "qwen35moe", "gemma4", "nemotron_h_moe"]) {
    assert.match(run.stdout, new RegExp(`^zoo-reference +${family} reference +greedy_parity +required +PASS +1/1 prompts PASS \\(STRICT 1/1;`, "m"));
    assert.match(run.stdout, new RegExp(`^zoo-reference +${family} reference +determinism +required +PASS`, "m"));
  }
});

test("each planted FAULT of the reference fails its family's gates: delta-net gate sign, slot poisoning (qwen35, nemotron_h_moe), weights not renormalised, window off by one", () => {
  const faulty = (family: string, fault: string) => bench(["run", "--suite", "zoo-reference", "--arm", `${family} reference`, "--runner", `${REFERENCE} --fault ${fault}`, "--prompt", "4", "--runs-dir", runs, "--run-id", `${family}-${fault}`]);
  for (const [family, fault] of [["qwen35", "gdn-gate-sign"], ["qwen35moe", "moe-no-renorm"], ["gemma4", "swa-off-by-one"]]) {
    const run = faulty(family, fault);
    assert.is(run.status, 1, `${family} ${fault}: ${run.stdout}${run.stderr}`);
    assert.match(run.stdout, /greedy_parity +required +FAIL +0\/1 prompts PASS \(STRICT 0\/1; near-tie-band only 0\/1; max gap \d+\.\d+ nats @ prompt\[4\] tok=\d+; 1 forward-divergent\)/, `${family} ${fault}`);
    const summary = JSON.parse(readFileSync(join(runs, `${family}-${fault}`, "summary.json"), "utf8"));
    assert.ok(summary.suts[0].provenance.engine.endsWith(`FAULT ${fault} (runner protocol v1)`), summary.suts[0].provenance.engine);
    // The runner stands in for the arm --arm names (its family's goldens): the reproduce line must name that arm too.
    const reproduce: string[] = readFileSync(join(runs, `${family}-${fault}`, "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line).reproduce);
    assert.ok(reproduce.length > 0 && reproduce.every((line) => line.includes(`--arm "${family} reference"`)), reproduce[0]);
  }
  for (const family of ["qwen35", "nemotron_h_moe"]) {
    const run = faulty(family, "state-not-cleared");
    assert.is(run.status, 1, run.stdout + run.stderr);
    assert.match(run.stdout, /determinism +required +FAIL +0\/1 prompts identical over 3 reruns; .*state leaking from earlier requests/);
    // One prompt: B=1 against B=1 is not a batch, so that check is SKIPPED; determinism has already caught the leak.
    assert.match(run.stdout, /batch_invariance +required +SKIPPED — NOT A PASS +one prompt selected/);
  }
});

test("zoo-reference is distribution-gated per arm: FAULT output-head-x1.01 keeps every greedy id and fails its family's bounds", () => {
  // gemma4 through the GELU-table arm: the exact-GELU arm's floor (llama.cpp's fp16 table) is above this fault.
  for (const [arm, extra] of [["qwen35 reference", ""], ["nemotron_h_moe reference", ""], ["gemma4 reference, ggml GELU table", " --gelu ggml-fp16-table"]]) {
    const runId = `head-${arm.split(" ")[0]}`;
    const run = bench(["run", "--suite", "zoo-reference", "--arm", arm, "--runner", `${REFERENCE}${extra} --fault output-head-x1.01`, "--prompt", "4", "--runs-dir", runs, "--run-id", runId]);
    assert.is(run.status, 1, `${arm}: ${run.stdout}${run.stderr}`);
    assert.match(run.stdout, /greedy_parity +required +PASS +1\/1 prompts PASS \(STRICT 1\/1;/, arm);
    assert.match(run.stdout, /distribution +required +FAIL +.*FAIL (kld p99|rms delta p) /, arm);
  }
});

test.run();
