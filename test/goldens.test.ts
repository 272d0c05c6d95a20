import { test } from "uvu";
import * as assert from "uvu/assert";
import { cpSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { GOLDENS_DIR, SUITES_DIR } from "../harness/paths.js";
import { join } from "node:path";
import { goldensDir, readGoldens } from "../harness/goldens/goldens.js";
import { verifyGoldens } from "../harness/goldens/verify.js";
import { encodeNpy, readNpyFloat32, readNpyInt32 } from "../harness/goldens/npy.js";
import { topKDifference } from "../harness/goldens/logprob-tolerance.js";
import { createHash } from "node:crypto";
import { BenchError } from "../harness/errors.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("goldens");
test.after(() => work.remove());
const committed = goldensDir("tiny-random.F32", "parity16");

test("the committed parity16 goldens verify against the fixture, prompts, tokenizer and oracle recipe", async () => {
  const check = await verifyGoldens(committed);
  assert.is(check.status, "ok", check.status === "mismatch" ? check.reason : "");
  const goldens = readGoldens(committed);
  assert.is(goldens.promptIds.length, 16);
  assert.is(goldens.greedyIds[0].length, 16);
  assert.is(goldens.topkIds![0][0].length, 20);
  assert.is(goldens.manifest.oracle.settings.flashAttention, false);
  assert.is(goldens.manifest.oracle.settings.kvCacheType, "F32");
  assert.is(goldens.manifest.oracle.settings.threads, 1);
  // Golden top-1 is the greedy id: the oracle teacher-forced on its own continuation agrees with itself.
  goldens.greedyIds.forEach((ids, p) => ids.forEach((id, t) => assert.is(goldens.topkIds![p][t][0], id)));
});

test("two separate processes produce byte-identical goldens; against the committed ones, ids are exact and log-probs within tolerance", () => {
  const env = { SOURCE_DATE_EPOCH: "1764460800" };
  const a = join(work.path, "a");
  const b = join(work.path, "b");
  for (const out of [a, b]) {
    const result = bench(["goldens", "make", "--suite", "parity16", "--out", out], env);
    assert.is(result.status, 0, result.stderr);
  }
  const files = readdirSync(a).sort();
  assert.equal(files, ["greedy_ids.npy", "manifest.json", "prompt_ids.npy", "topk_ids.npy", "topk_logprobs.npy"]);
  for (const file of files) assert.ok(readFileSync(join(a, file)).equals(readFileSync(join(b, file))), file);
  // Another CPU runs other llama.cpp kernels: ids stay exact, log-probs move by up to ~2e-5.
  for (const file of ["prompt_ids.npy", "greedy_ids.npy"]) assert.ok(readFileSync(join(a, file)).equals(readFileSync(join(committed, file))), `${file} matches the committed goldens`);
  const rowsOf = (goldens: ReturnType<typeof readGoldens>) => goldens.topkIds!.map((prompt, p) => prompt.map((ids, t) => ({ ids, logprobs: goldens.topkLogprobs![p][t] })));
  assert.is(topKDifference(rowsOf(readGoldens(committed)), rowsOf(readGoldens(a))), undefined);
});

/** A copy of the committed goldens with every log-prob moved by `deltaNats`, re-signed as `goldens make` would. */
function nudgedGoldens(name: string, deltaNats: number): string {
  const directory = join(work.path, name);
  cpSync(committed, directory, { recursive: true });
  const logprobs = readNpyFloat32(join(directory, "topk_logprobs.npy"), 3);
  const bytes = encodeNpy(logprobs.data.map((value) => Math.min(0, value - deltaNats)), logprobs.shape);
  resign(directory, "topk_logprobs.npy", bytes);
  return directory;
}

function resign(directory: string, file: string, bytes: Uint8Array): void {
  writeFileSync(join(directory, file), bytes);
  const manifest = JSON.parse(readFileSync(join(directory, "manifest.json"), "utf8"));
  manifest.files[file] = createHash("sha256").update(bytes).digest("hex");
  writeFileSync(join(directory, "manifest.json"), JSON.stringify(manifest));
}

// Under a forced variant the committed goldens (made under zen4) are re-run on another one: the
// cross-variant tolerance applies (1.3e-4 for llama), and the re-run itself moves them by up to 2.6e-5.
test("verify --recompute: log-probs 1.9e-5 away (another CPU) verify, 5e-4 away do not", async () => {
  const otherCpu = await verifyGoldens(nudgedGoldens("other-cpu", 1.9e-5), { recompute: true });
  assert.is(otherCpu.status, "ok", otherCpu.status === "mismatch" ? otherCpu.reason : "");
  const drifted = await verifyGoldens(nudgedGoldens("drifted", 5e-4), { recompute: true });
  assert.match(drifted.status === "mismatch" ? drifted.reason : "ok", /topk_logprobs\.npy: re-running the oracle gives other top-k log-probs: prompt 0 position 0 rank 0: .*\(\|Δ\| [45]\.\d\de-4 > 0\.000(1|13)\)/);
});

test("a truncated .npy is one line naming the file; NaN golden log-probs fail verify", async () => {
  const truncated = join(work.path, "truncated");
  cpSync(committed, truncated, { recursive: true });
  const topk = readFileSync(join(truncated, "topk_ids.npy"));
  resign(truncated, "topk_ids.npy", topk.subarray(0, topk.length - 40));
  const truncatedCheck = await verifyGoldens(truncated);
  assert.match(truncatedCheck.status === "mismatch" ? truncatedCheck.reason : "ok", /topk_ids\.npy: shape: holds 20440 data bytes, its header's shape \(16, 16, 20\) needs 20480 \(truncated or padded file\)/);

  const nan = join(work.path, "nan");
  cpSync(committed, nan, { recursive: true });
  const logprobs = readNpyFloat32(join(nan, "topk_logprobs.npy"), 3);
  logprobs.data[7] = NaN;
  resign(nan, "topk_logprobs.npy", encodeNpy(logprobs.data, logprobs.shape));
  const nanCheck = bench(["goldens", "verify", nan]);
  assert.is(nanCheck.status, 2);
  assert.match(nanCheck.stdout, /MISMATCH  .*topk_logprobs\.npy: \[7\]: value NaN at flat index 7 is not a log-probability \(finite, ≤ 0\)/);

  const greedy = readFileSync(join(committed, "greedy_ids.npy"));
  const cut = join(work.path, "cut-greedy.npy");
  writeFileSync(cut, greedy.subarray(0, greedy.length - 4));
  const imported = bench(["goldens", "import", "--greedy", cut, "--prompts", join(committed, "prompt_ids.npy"), "--model", "tiny-random", "--suite", "x", "--out", join(work.path, "never-cut")]);
  assert.is(imported.status, 2);
  assert.match(imported.stderr, /^bench: error: .*cut-greedy\.npy: shape: holds 1020 data bytes, its header's shape \(16, 16\) needs 1024/m);
  assert.not.match(imported.stderr, /\n\s+at /, "no stack trace");
});

test("verify fails loudly on an edited array, a different model artifact, and changed oracle settings", async () => {
  const edited = join(work.path, "edited");
  cpSync(committed, edited, { recursive: true });
  const greedy = readNpyInt32(join(edited, "greedy_ids.npy"), 2);
  greedy.data[5] += 1;
  writeFileSync(join(edited, "greedy_ids.npy"), encodeNpy(greedy.data, greedy.shape));
  const editedCheck = await verifyGoldens(edited);
  assert.is(editedCheck.status, "mismatch");
  assert.match(editedCheck.status === "mismatch" ? editedCheck.reason : "", /greedy_ids\.npy: files\.greedy_ids\.npy: sha256 .* does not match/);

  const otherModel = join(work.path, "other-model");
  cpSync(committed, otherModel, { recursive: true });
  const manifest = JSON.parse(readFileSync(join(otherModel, "manifest.json"), "utf8"));
  manifest.model.id = "tiny-random:Q8_0";
  writeFileSync(join(otherModel, "manifest.json"), JSON.stringify(manifest));
  const modelCheck = await verifyGoldens(otherModel);
  assert.match(modelCheck.status === "mismatch" ? modelCheck.reason : "ok", /model\.sha256: goldens were made from a different model artifact/);

  const settings = join(work.path, "settings");
  cpSync(committed, settings, { recursive: true });
  const m2 = JSON.parse(readFileSync(join(settings, "manifest.json"), "utf8"));
  m2.oracle.settings.flashAttention = true;
  writeFileSync(join(settings, "manifest.json"), JSON.stringify(m2));
  const settingsCheck = await verifyGoldens(settings);
  assert.match(settingsCheck.status === "mismatch" ? settingsCheck.reason : "ok", /oracle\.settings\.flashAttention: oracle setting flashAttention is true/);

  const schema = join(work.path, "schema");
  cpSync(committed, schema, { recursive: true });
  const m3 = JSON.parse(readFileSync(join(schema, "manifest.json"), "utf8"));
  m3.extra = 1;
  writeFileSync(join(schema, "manifest.json"), JSON.stringify(m3));
  const schemaCheck = await verifyGoldens(schema);
  assert.match(schemaCheck.status === "mismatch" ? schemaCheck.reason : "ok", /manifest\.json: extra: unknown field/);
});

test(".npy with the wrong dtype, byte order or rank is refused with the fix", () => {
  const path = join(work.path, "bad.npy");
  const npy = (descr: string, shape: string, bytes: number) => {
    let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape}), }`;
    while ((10 + header.length + 1) % 64 !== 0) header += " ";
    header += "\n";
    const out = Buffer.alloc(10 + header.length + bytes);
    out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]);
    out.writeUInt16LE(header.length, 8);
    out.write(header, 10, "latin1");
    return out;
  };
  const message = (fn: () => unknown) => {
    try {
      fn();
    } catch (error) {
      if (error instanceof BenchError) return error.oneLine();
      throw error;
    }
    return "no error";
  };
  writeFileSync(path, npy(">i4", "2, 2", 16));
  assert.match(message(() => readNpyInt32(path, 2)), /bad\.npy: descr: byte order is big-endian.*fix: save it as numpy\.asarray\(x, dtype="<i4"\)/);
  writeFileSync(path, npy("<i8", "2, 2", 32));
  assert.match(message(() => readNpyInt32(path, 2)), /dtype is <i8, the goldens contract needs <i4/);
  writeFileSync(path, npy("<i4", "4,", 16));
  assert.match(message(() => readNpyInt32(path, 2)), /shape: array has shape \(4\), rank 2 expected/);
  writeFileSync(path, "not numpy");
  assert.match(message(() => readNpyInt32(path, 2)), /not a \.npy file/);
});

test("bench goldens import takes another project's <i4 [16,16] greedy ids and writes our format, provenance imported", () => {
  // Another project's files, written as numpy would (numpy-style header padding, '<i4').
  const source = readGoldens(committed);
  const greedyPath = join(work.path, "theirs-greedy.npy");
  const promptsPath = join(work.path, "theirs-prompts.npy");
  writeFileSync(greedyPath, encodeNpy(Int32Array.from(source.greedyIds.flat()), [16, 16]));
  const width = Math.max(...source.promptIds.map((p) => p.length));
  const padded = new Int32Array(16 * width).fill(-1);
  source.promptIds.forEach((ids, p) => padded.set(ids, p * width));
  writeFileSync(promptsPath, encodeNpy(padded, [16, width]));
  const out = join(work.path, "imported");
  const result = bench(["goldens", "import", "--greedy", greedyPath, "--prompts", promptsPath, "--model", "tiny-random", "--suite", "parity16", "--source", "vllm.cpp tests/parity", "--out", out]);
  assert.is(result.status, 0, result.stderr);
  const imported = readGoldens(out);
  assert.is(imported.manifest.oracle.name, "imported");
  assert.is(imported.manifest.oracle.source, "vllm.cpp tests/parity");
  assert.is(imported.manifest.K, 0);
  assert.equal(imported.greedyIds, source.greedyIds);
  assert.ok(!existsSync(join(out, "topk_ids.npy")));

  const wrong = bench(["goldens", "import", "--greedy", greedyPath, "--prompts", greedyPath.replace("greedy", "missing"), "--model", "tiny-random", "--suite", "x", "--out", join(work.path, "never")]);
  assert.is(wrong.status, 2);
  assert.match(wrong.stderr, /^bench: error: .*theirs-missing\.npy: cannot read \(ENOENT\)/m);
  assert.ok(!existsSync(join(work.path, "never")), "nothing half-written");
});

test("a custom suite given by path: the missing-goldens hint names the path, and that very command makes goldens the run then uses", () => {
  const name = `my-parity-${process.pid}`;
  const made = join(GOLDENS_DIR, "tiny-random.F32", name);
  try {
    const suite = JSON.parse(readFileSync(join(SUITES_DIR, "parity16.json"), "utf8"));
    delete suite.$schema;
    Object.assign(suite, { name, prompts: suite.prompts.slice(0, 2), max_tokens: 4, arms: [suite.arms[0]] });
    const path = join(work.path, "my-parity.json");
    writeFileSync(path, JSON.stringify(suite));
    const runArgs = ["run", "--suite", path, "--runs-dir", join(work.path, "runs")];
    const missing = bench(runArgs);
    assert.is(missing.status, 2, missing.stdout + missing.stderr);
    const hint = /\(fix: make them: bench (goldens make --suite \S+)\)/.exec(missing.stderr);
    assert.ok(hint !== null, missing.stderr);
    assert.is(hint![1], `goldens make --suite ${path}`);
    const make = bench(hint![1].split(" "));
    assert.is(make.status, 0, make.stderr);
    const rerun = bench([...runArgs, "--run-id", "custom"]);
    assert.is(rerun.status, 0, rerun.stdout + rerun.stderr);
    assert.match(rerun.stdout, /^F32 correctness gate: 2\/2 prompts PASS/m);
    const reproduce = readFileSync(join(work.path, "runs", "custom", "cells.jsonl"), "utf8").trim().split("\n").map((line) => JSON.parse(line).reproduce);
    assert.ok(reproduce.length > 0 && reproduce.every((line: string) => line.startsWith(`bench run --suite ${path} --arm "F32"`)), reproduce[0]);
  } finally {
    rmSync(made, { recursive: true, force: true });
  }
});

test.run();
