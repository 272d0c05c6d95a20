import { test } from "uvu";
import * as assert from "uvu/assert";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { goldensDir, readGoldens } from "../harness/goldens/goldens.js";
import { encodeNpy } from "../harness/goldens/npy.js";
import { readGguf } from "../harness/gguf/read.js";
import { validateLlamaMetadata } from "../harness/gguf/llama-metadata.js";
import { TeacherForcedCache } from "../harness/oracle/teacher-forced-cache.js";
import { resolveModel } from "../harness/fixtures/registry.js";
import { openLlamaCppOracle } from "../harness/oracle/llamacpp-oracle.js";
import { runParityArm } from "../harness/runner/parity-runner.js";
import { loadParitySuite } from "../harness/suites/load.js";
import type { GateVerdict, RunEvent } from "../harness/results/types.js";
import { GOLDENS_DIR, SUITES_DIR } from "../harness/paths.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("goldens-import");
/** Goldens a test filed for its own model under goldens/ (where a team's go): removed after. */
const ownGoldens: string[] = [];
test.after(() => {
  work.remove();
  for (const directory of ownGoldens) rmSync(directory, { recursive: true, force: true });
});
const resolvedTinyRandomPath = (await resolveModel("tiny-random")).path;
const committed = readGoldens(goldensDir("tiny-random.F32", "parity16"));

/** A C++ engine's commit: greedy_ids.npy plus one headerless little-endian int32 file per prompt. */
function writeCppLayout(directory: string): void {
  mkdirSync(directory, { recursive: true });
  writeFileSync(join(directory, "greedy_ids.npy"), encodeNpy(Int32Array.from(committed.greedyIds.flat()), [16, 16]));
  committed.promptIds.forEach((ids, p) => {
    const bytes = Buffer.alloc(ids.length * 4);
    ids.forEach((id, j) => bytes.writeInt32LE(id, j * 4));
    writeFileSync(join(directory, `p${p}_prompt.i32`), bytes);
  });
}

function importCpp(directory: string, prompts: string, out: string) {
  return bench(["goldens", "import", "--greedy", join(directory, "greedy_ids.npy"), "--prompts", prompts, "--model", "tiny-random", "--suite", "parity16", "--source", "engine.cpp tests/goldens", "--out", out]);
}

test("bench goldens import takes a C++ engine's layout: greedy_ids.npy + raw little-endian p{i}_prompt.i32, K = 0", () => {
  const theirs = join(work.path, "cpp");
  writeCppLayout(theirs);
  for (const [label, prompts] of [["directory", theirs], ["one of its files", join(theirs, "p0_prompt.i32")]] as const) {
    const out = join(work.path, `imported-${label.replaceAll(" ", "-")}`);
    const result = importCpp(theirs, prompts, out);
    assert.is(result.status, 0, `${label}: ${result.stderr}`);
    const imported = readGoldens(out);
    assert.equal(imported.promptIds, committed.promptIds, label);
    assert.equal(imported.greedyIds, committed.greedyIds, label);
    assert.is(imported.manifest.K, 0);
    assert.is(imported.manifest.oracle.name, "imported");
    assert.is(imported.manifest.oracle.source, "engine.cpp tests/goldens");
    assert.is(imported.topkIds, undefined);
    assert.ok(!existsSync(join(out, "topk_logprobs.npy")));
  }
});

test("a broken raw prompt layout is refused with the file and the fix, nothing half-written", () => {
  const cases: Array<[string, (directory: string) => void, RegExp]> = [
    ["missing prompt", (d) => rmSync(join(d, "p3_prompt.i32")), /p3_prompt\.i32: cannot read \(ENOENT\).*p0_prompt\.i32 … p15_prompt\.i32 must all exist/],
    ["torn file", (d) => writeFileSync(join(d, "p5_prompt.i32"), Buffer.alloc(7)), /p5_prompt\.i32: 7 bytes is not a non-empty whole number of int32 values/],
    ["extra prompt", (d) => writeFileSync(join(d, "p16_prompt.i32"), Buffer.alloc(4)), /holds p16_prompt\.i32, but the greedy ids have 16 rows/],
    ["id outside the vocabulary", (d) => writeFileSync(join(d, "p2_prompt.i32"), Buffer.from(Int32Array.from([1, 100000]).buffer)), /p2_prompt\.i32: \[2, 1\]: id 100000 at \[2, 1\] is outside the model's vocabulary/],
  ];
  for (const [label, breakIt, message] of cases) {
    const theirs = join(work.path, `broken-${label.replaceAll(" ", "-")}`);
    writeCppLayout(theirs);
    breakIt(theirs);
    const out = join(work.path, `never-${label.replaceAll(" ", "-")}`);
    const result = importCpp(theirs, theirs, out);
    assert.is(result.status, 2, `${label}: ${result.stdout}${result.stderr}`);
    assert.match(result.stderr, message, label);
    assert.ok(!existsSync(out), `${label}: nothing half-written`);
  }
});

test("goldens imported without log-probs: the log-prob checks are SKIPPED as not applying (informational), never passed; greedy parity scores ids and the summary says it is all", async () => {
  const theirs = join(work.path, "cpp-run");
  writeCppLayout(theirs);
  const out = join(work.path, "imported-run");
  assert.is(importCpp(theirs, theirs, out).status, 0);
  const goldens = readGoldens(out);
  const parity16 = loadParitySuite("parity16");
  const suite = { ...parity16, checks: { greedy_parity: "required", teacher_forced: "required", distribution: { gate: "required", max_kld_mean: 1e-6 } } } as const;
  const model = await resolveModel("tiny-random");
  const vocabSize = validateLlamaMetadata(readGguf(model.path), model.path).vocabSize;
  const sut = await openLlamaCppOracle(model);
  const verdicts: GateVerdict[] = [];
  const cells: string[] = [];
  let summaryLine: string | undefined;
  try {
    ({ summaryLine } = await runParityArm({
      suite, goldens, prompts: [0, 1, 2], vocabSize,
      oracle: new TeacherForcedCache(sut, join(work.path, "oracle-cache")),
      suiteName: "parity16", arm: { label: "F32", gate: "required" }, sut, signal: new AbortController().signal, reproduce: "bench run",
      emit: async (event: RunEvent) => {
        if (event.kind === "verdict") verdicts.push(event.verdict);
        if (event.kind === "cells") cells.push(...event.cells.filter((c) => c.check === "teacher_forced").map((c) => `${c.status}: ${c.detail}`));
      },
    }));
  } finally {
    await sut.close();
  }
  const teacherForced = verdicts.find((v) => v.check === "teacher_forced");
  assert.is(teacherForced?.status, "skip");
  assert.match(teacherForced?.status === "skip" ? teacherForced.reason : "", /goldens hold no log-probs \(K = 0, oracle imported\).*does not apply: the arm is gated on greedy parity alone/);
  const distribution = verdicts.find((v) => v.check === "distribution");
  assert.is(distribution?.status, "skip");
  for (const verdict of [teacherForced, distribution]) assert.is(verdict?.gate, "informational", `${verdict?.check}: required in the suite, does not apply to ids-only goldens`);
  assert.match(summaryLine ?? "", /3\/3 prompts PASS .*; ids-only goldens \(K = 0\): greedy parity alone, no log-prob checks$/);
  assert.equal(cells, [`skip: ${teacherForced?.status === "skip" ? teacherForced.reason : ""}`]);
  const greedy = verdicts.find((v) => v.check === "greedy_parity");
  assert.is(greedy?.status, "pass");
  assert.is(greedy?.status === "pass" ? greedy.metrics.strict : null, 3);
  assert.ok(readFileSync(join(out, "manifest.json"), "utf8").includes('"K": 0'));
});

test("a team's own GGUF with imported ids: bench goldens import --model PATH.gguf, then its suite passes (exit 0) on greedy parity alone and says so", () => {
  // The team's model: a file no fixture names (the tiny-random bytes, under the team's own name).
  const name = `team-model-${process.pid}`;
  const own = join(work.path, "team");
  mkdirSync(own, { recursive: true });
  const modelPath = join(own, `${name}.gguf`);
  copyFileSync(resolvedTinyRandomPath, modelPath);
  const suitePath = join(own, "team-parity.json");
  const parity16 = JSON.parse(readFileSync(join(SUITES_DIR, "parity16.json"), "utf8"));
  writeFileSync(suitePath, JSON.stringify({
    ...parity16, $schema: undefined, name: "team-parity", oracle: { model: modelPath },
    arms: [{ label: "team F32", model: modelPath, gate: "required" }],
  }));
  const goldensHome = join(GOLDENS_DIR, name);
  ownGoldens.push(goldensHome);
  const importOwn = (...extra: string[]) => bench(["goldens", "import", "--greedy", join(committed.directory, "greedy_ids.npy"), "--prompts", join(committed.directory, "prompt_ids.npy"), "--model", modelPath, "--suite", "team-parity", ...extra]);
  const imported = importOwn();
  assert.is(imported.status, 0, imported.stderr);
  assert.is(readGoldens(join(goldensHome, "team-parity")).manifest.model.id, modelPath, "the manifest names the file by its absolute path");

  const run = bench(["run", "--suite", suitePath, "--runs-dir", join(work.path, "runs"), "--run-id", "team"]);
  assert.is(run.status, 0, run.stdout + run.stderr);
  assert.match(run.stdout, /^team F32 correctness gate: 16\/16 prompts PASS .*; ids-only goldens \(K = 0\): greedy parity alone, no log-prob checks$/m);
  const summary = JSON.parse(readFileSync(join(work.path, "runs", "team", "summary.json"), "utf8"));
  assert.ok(summary.summary_lines.some((line: string) => line.endsWith("ids-only goldens (K = 0): greedy parity alone, no log-prob checks")));
  assert.match(readFileSync(join(work.path, "runs", "team", "summary.md"), "utf8"), /ids-only goldens \(K = 0\): greedy parity alone/);

  // Importing again does not replace them silently; --force does.
  const again = importOwn();
  assert.is(again.status, 2, again.stdout + again.stderr);
  assert.match(again.stderr, new RegExp(`${name}/team-parity: already holds goldens \\(greedy_ids\\.npy, manifest\\.json, prompt_ids\\.npy\\).*fix: pass --out with another directory, or --force to replace them`));
  assert.is(importOwn("--force").status, 0);
});

test("importing over committed goldens is refused without --force: the default --out keeps their log-probs", () => {
  const before = readFileSync(join(committed.directory, "topk_logprobs.npy"));
  const result = bench(["goldens", "import", "--greedy", join(committed.directory, "greedy_ids.npy"), "--prompts", join(committed.directory, "prompt_ids.npy"), "--model", "tiny-random", "--suite", "parity16"]);
  assert.is(result.status, 2, result.stdout + result.stderr);
  assert.match(result.stderr, /goldens\/tiny-random\.F32\/parity16: already holds goldens \(greedy_ids\.npy, manifest\.json, prompt_ids\.npy, topk_ids\.npy, topk_logprobs\.npy\)/);
  assert.ok(readFileSync(join(committed.directory, "topk_logprobs.npy")).equals(before));
});

test("an unknown model name points at the path of one's own GGUF", () => {
  const result = bench(["goldens", "import", "--greedy", "g.npy", "--prompts", "p.npy", "--model", "team-model", "--suite", "x", "--out", join(work.path, "never")]);
  assert.is(result.status, 2);
  assert.match(result.stderr, /unknown fixture "team-model".*or the path of your own \.gguf\)$/m);
});

test.run();
