import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { basename, join } from "node:path";
import { sha256File } from "../harness/io/sha256.js";
import { ensureFixture, resolveModel } from "../harness/fixtures/registry.js";
import { copyMargins } from "../harness/fixtures/copy-model.js";
import { buildHaystack } from "../harness/niah/haystack.js";
import { needleFromSeed, needleSeed } from "../harness/niah/needle.js";
import { scoreNeedle } from "../harness/niah/score.js";
import { renderNeedleGrid } from "../harness/niah/grid.js";
import { loadSuite } from "../harness/suites/load.js";
import { resolveNiahSuite, type NiahSuite } from "../harness/suites/niah-suite.js";
import { LlamaCppSut, ORACLE_SETTINGS } from "../harness/sut/llamacpp.js";
import { PACKAGE_ROOT } from "../harness/paths.js";
import { describeRun, runInProcess } from "./helpers/in-process-run.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("niah");
test.after(() => work.remove());
const runs = join(work.path, "runs");

function summaryOf(runId: string) {
  return JSON.parse(readFileSync(join(runs, runId, "summary.json"), "utf8"));
}

function niahCells(runId: string): Array<{ niah_depth: number; prompt_class: string; detail: string }> {
  return readFileSync(join(runs, runId, "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line)).filter((c) => c.check === "niah");
}

/** A copy of suites/niah.json with some fields changed, written where the test can point at it. */
function variantSuite(name: string, change: (suite: Record<string, unknown>) => void): string {
  const suite = JSON.parse(readFileSync(join(PACKAGE_ROOT, "suites", "niah.json"), "utf8"));
  delete suite.$schema;
  suite.arms = [suite.arms[0]]; // the embedded SUT only: faults are about the model, not the transport
  change(suite);
  const path = join(work.path, `${name}.json`);
  writeFileSync(path, JSON.stringify(suite));
  return path;
}

test("copy-4k: pinned sha256, and the attention margins the construction relies on", async () => {
  const path = await ensureFixture("copy-4k", "F32", join(work.path, "models"));
  assert.is(createHash("sha256").update(readFileSync(path)).digest("hex"), "60e5bd8e31f3f09a0645f67c0c02ef0d9f9a64773b5a1658673c479ce1124be9");
  const margins = copyMargins();
  assert.ok(margins.previousTokenNats > 39.9, `previous-token margin ${margins.previousTokenNats}`);
  assert.ok(margins.previousTokenNatsFloat32 > 39.9, `float32 margin ${margins.previousTokenNatsFloat32}`);
  assert.is(margins.inductionNats, 25);
  assert.is(margins.outputNats, 40);
  // A design with the amplitudes flattened loses the margin, and the builder refuses it.
  assert.throws(() => copyMargins(new Array(40).fill(1 / 40)), /previous-token margin .* below the 39\.5-nat design/);
});

test("scoring, seeds and the grid: Y / P / N exactly as defined; a seed reproduces its needle", () => {
  assert.is(scoreNeedle("SWPDMXHD. Re", "SWPDMXHD"), "Y");
  assert.is(scoreNeedle("xxPDMXyy", "SWPDMXHD"), "P");
  assert.is(scoreNeedle("nothing", "SWPDMXHD"), "N");
  const seed = needleSeed(0, 0.5, 4000);
  assert.is(needleFromSeed(seed, "BCDFGHJKLMNPQRSTVWXYZ23456789", 8), needleFromSeed(needleSeed(0, 0.5, 4000), "BCDFGHJKLMNPQRSTVWXYZ23456789", 8));
  assert.is.not(needleSeed(0, 0.5, 4000), needleSeed(1, 0.5, 4000));
  assert.match(needleFromSeed(seed, "BCDFGHJKLMNPQRSTVWXYZ23456789", 8), /^[BCDFGHJKLMNPQRSTVWXYZ2-9]{8}$/);
  assert.is(renderNeedleGrid("m", [{ length: 4000, depth: 0.25, score: "Y" }, { length: 4000, depth: 0.5, score: "N" }]),
    "m needle grid: 1/2 Y\n  L \\ depth 0.25 0.50 \n  4000      Y    N    ");
});

test("haystacks hit the target length exactly with the SUT's tokenizer, needle at int(len × depth)", async () => {
  const suite = loadSuite("niah") as NiahSuite;
  const spec = resolveNiahSuite(suite);
  const sut = await LlamaCppSut.open((await resolveModel("copy-4k")).path, { ...ORACLE_SETTINGS, contextSize: 4096 });
  try {
    for (const [length, depth] of [[500, 0.1], [1000, 0.5], [2048, 0.9], [4000, 0.25]] as const) {
      const haystack = await buildHaystack(sut, spec, "BCDF2345", length, depth);
      assert.is(haystack.tokens, length, `L=${length}`);
      const [text] = await sut.detokenize([haystack.promptIds]);
      assert.ok(text.includes("The pass-key: BCDF2345."), "the needle sentence is in the prompt");
    }
  } finally {
    await sut.close();
  }
});

test("bench run --suite niah: L = 4000 at depths 0.25 / 0.5 / 0.75, every cell Y on the embedded SUT and through the server, exit 0", async () => {
  // The llama-server arm (where built) runs in the whole-battery run of server.test.ts: once is enough.
  // In this process (helpers/in-process-run.ts): the needle grid is tried here, not the CLI.
  const result = await runInProcess(runs, "clean", { suites: ["niah"], arms: ["copy-4k", "server copy-4k"] });
  assert.is(result.code, 0, describeRun(result));
  const printed = result.summaryLines.join("\n");
  assert.match(printed, /^copy-4k needle grid: 3\/3 Y\n {2}L \\ depth 0\.25 0\.50 0\.75 \n {2}4000 {6}Y {4}Y {4}Y/m);
  assert.match(printed, /^server copy-4k needle grid: 3\/3 Y$/m);
  const cells = niahCells("clean");
  assert.is(cells.length, 6);
  for (const cell of cells) assert.match(cell.detail, /at token \d+\/4000;/);
  // Each needle arm first verifies it runs the file it names, as parity arms do.
  const identities = summaryOf("clean").verdicts.filter((v: { check: string }) => v.check === "identity");
  assert.equal(identities.map((v: { arm: string; gate: string; status: string }) => [v.arm, v.gate, v.status]), [["copy-4k", "required", "pass"], ["server copy-4k", "required", "pass"]]);
  assert.match(identities[0].summary, /^copy-4k identity: runs copy-4k\.v\d+\.F32\.gguf \(sha256 [0-9a-f]{16}…, per the harness \(it loaded this file itself\)\), the model the arm names$/);
  assert.match(identities[1].summary, /per the server's \/v1\/models\), the model the arm names$/);
});

test("a needle arm whose runner loads another model file than the arm names: identity FAILS with both files and hashes, exit 1", async () => {
  const other = (await resolveModel("tiny-random:F32")).path;
  const result = await runInProcess(runs, "other-model", { suites: ["niah"], runner: ["python3", "{bench}/harness/oracle/float64/reference_forward.py", other] });
  assert.is(result.code, 1, describeRun(result));
  const identity = summaryOf("other-model").verdicts.find((v: { check: string }) => v.check === "identity");
  assert.is(identity.gate, "required");
  assert.is(identity.status, "fail");
  const copy = (await resolveModel("copy-4k")).path;
  assert.is(identity.summary, `runner identity: MISMATCH — the runner's hello says it runs ${basename(other)} (sha256 ${await sha256File(other)}); ` +
    `the model the arm names (copy-4k) is ${basename(copy)} (sha256 ${await sha256File(copy)}): this arm's verdicts are about another artifact`);
});

// The planted truncation fault (N at early depths, Y where the needle survives) is checked in
// report-gate.test.ts, on the run whose lost Y its needle-grid gate reads: made once there.

test("planted fault: changed RoPE frequencies (freq_base 10000) — N, exit 1", async () => {
  const result = await runInProcess(runs, "rope", { suites: ["niah"], model: "copy-4k-rope-base", niahCases: ["4000:0.5:0"] });
  assert.is(result.code, 1, describeRun(result));
  assert.equal(niahCells("rope").map((c) => c.prompt_class), ["N"]);
});

test("documented limit: a filler holding the query's 4-gram is reported N (or P), never a crash", async () => {
  const suite = variantSuite("collision", (s) => {
    s.filler = "The old monkey: bright eyes and a grey tail, sitting by the gate all day. ";
  });
  const result = await runInProcess(runs, "collision", { suites: [suite], niahCases: ["4000:0.5:0"] });
  assert.is(result.code, 1, describeRun(result));
  assert.ok(["N", "P"].includes(niahCells("collision")[0].prompt_class));
  assert.is(summaryOf("collision").status, "complete");
});

test("bad input: a needle the tokenizer cannot represent is a clear error, exit 2", () => {
  const suite = variantSuite("unrepresentable", (s) => {
    s.needle_alphabet = "ÄÖÜ";
  });
  const result = bench(["run", "--suite", suite, "--runs-dir", runs, "--run-id", "unrepresentable", "--niah-case", "4000:0.5:0"]);
  assert.is(result.status, 2);
  assert.match(result.stderr, /^bench: error: .*unrepresentable\.json: needle_alphabet: needle "[ÄÖÜ]{8}" cannot be represented by the SUT's tokenizer \(token \d+ is a byte piece\) \(fix: use characters the model's vocabulary holds as text tokens\)$/m);
});

test.run();
