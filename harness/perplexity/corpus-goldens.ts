import { existsSync, readFileSync } from "node:fs";
import type { CpuIdentity } from "../cpu/cpu-identity.js";
import { basename, join } from "node:path";
import { BenchError } from "../errors.js";
import { resolveModel, type ModelRef } from "../fixtures/registry.js";
import { validateLlamaMetadata } from "../gguf/llama-metadata.js";
import { readGguf } from "../gguf/read.js";
import { tokenizerFingerprint } from "../gguf/tokenizer-fingerprint.js";
import { goldensDir } from "../goldens/goldens.js";
import { goldensModelDirName } from "../goldens/make.js";
import { creationTime, type GoldensManifest } from "../goldens/manifest.js";
import { assertGoldensMatchModel } from "../goldens/model-check.js";
import { encodeNpy, readNpyFloat32, readNpyInt32 } from "../goldens/npy.js";
import { writeDirectoryAtomic, writeFileAtomic } from "../io/atomic-write.js";
import { assertMatchesSchema, readJsonFile } from "../io/json-schema.js";
import { sha256Bytes } from "../io/sha256.js";
import { ORACLE_NAME } from "../oracle/llamacpp-oracle.js";
import { GOLDENS_DIR } from "../paths.js";
import { loadSuite, suiteArgument } from "../suites/load.js";
import type { PerplexitySuite } from "../suites/perplexity-suite.js";
import { LlamaCppSut, ORACLE_SETTINGS, type LlamaCppSettings } from "../sut/llamacpp.js";
import { HARNESS_VERSION } from "../version.js";
import { corpusChunks, scoredPerChunk, type CorpusChunk } from "./chunks.js";
import { corpusGoldensDiff, type CorpusGoldensDiff } from "./corpus-goldens-diff.js";
import { readCorpusText } from "./corpus.js";
import type { BasePosition } from "./statistics.js";

/** goldens/<model>/<suite>/perplexity.json (schema: goldens/perplexity.schema.json); a parity suite's manifest.json is another contract. */
export const CORPUS_MANIFEST_FILE = "perplexity.json";
const CORPUS_MANIFEST_SCHEMA = join(GOLDENS_DIR, "perplexity.schema.json");

export interface CorpusGoldensManifest extends Pick<GoldensManifest, "schema_version" | "suite" | "model" | "tokenizer" | "files" | "created" | "harness_version"> {
  readonly oracle: { readonly name: string; readonly engine: string; readonly settings: Readonly<Record<string, string | number | boolean>>; readonly cpu?: CpuIdentity };
  readonly corpus: { readonly file: string; readonly sha256: string; readonly tokens: number };
  readonly n_ctx: number;
  readonly chunks: number;
  readonly scored_per_chunk: number;
  readonly K: number;
}

/** The base model over the chunked corpus: the ids every arm is fed, and what the statistics need of the base at each scored position. */
export interface CorpusGoldens {
  readonly manifest: CorpusGoldensManifest;
  readonly directory: string;
  readonly chunks: readonly CorpusChunk[];
  /** [chunk][scored position]. */
  readonly base: readonly (readonly BasePosition[])[];
}

/**
 * The settings the base and every arm run with: the oracle recipe, with a context that holds a chunk.
 * One context size for both, so a base arm run through the harness computes the goldens' very numbers.
 */
export function corpusSettings(suite: Pick<PerplexitySuite, "n_ctx">): LlamaCppSettings {
  return { ...ORACLE_SETTINGS, contextSize: Math.max(ORACLE_SETTINGS.contextSize, suite.n_ctx) };
}

/** goldens/<base model>/<suite name>/. */
export function corpusGoldensDir(suite: Pick<PerplexitySuite, "name">, model: ModelRef): string {
  return goldensDir(goldensModelDirName(model), suite.name);
}

/** The base model over the suite's chunked corpus, in memory: what the goldens hold, and their manifest but for the files' hashes. */
export interface BaseEvaluation {
  readonly chunks: readonly CorpusChunk[];
  readonly base: readonly (readonly BasePosition[])[];
  readonly manifest: Omit<CorpusGoldensManifest, "files">;
}

/**
 * Runs the base model over the suite's chunked corpus, teacher-forced, with the whole distribution
 * at each scored position, and keeps what the statistics need: the top-K log-probs and the log-prob
 * of each next token. K log-probs per position, not the vocabulary's: the goldens do not grow with it.
 */
export async function evaluateBase(suite: PerplexitySuite, model: ModelRef): Promise<BaseEvaluation> {
  const corpus = readCorpusText(suite);
  const oracle = await LlamaCppSut.open(model.path, corpusSettings(suite), `oracle llama.cpp ${model.id}`);
  try {
    const vocabSize = validateLlamaMetadata(readGguf(model.path), model.path).vocabSize;
    // The empty text tokenizes to the BOS alone where the vocabulary adds one: llama-perplexity puts that id at every chunk's start.
    const [[bos], ids] = [(await oracle.tokenize([""]))[0], (await oracle.tokenize([corpus.text]))[0]];
    const chunks = corpusChunks(ids, suite.n_ctx, suite.chunks, bos, suite.path);
    const rows = await oracle.teacherForcedTopK(chunks.map((chunk) => ({ ...chunk, k: vocabSize })));
    const base = rows.map((chunkRows, c) => chunkRows.map((row, j): BasePosition => {
      const next = chunks[c].continuationIds[j];
      const at = row.ids.indexOf(next);
      if (at < 0) throw new Error(`the base gave no probability for token ${next} (chunk ${c}, scored position ${j}): its distribution underflowed`);
      return { topK: { ids: row.ids.slice(0, suite.top_k), logprobs: row.logprobs.slice(0, suite.top_k) }, nextLogprob: row.logprobs[at] };
    }));
    return {
      chunks,
      base,
      manifest: {
        schema_version: 1,
        suite: suite.name,
        model: { id: model.id, file: basename(model.path), sha256: oracle.provenance.modelSha256!, bytes: oracle.provenance.modelBytes! },
        oracle: { name: ORACLE_NAME, engine: oracle.provenance.engine, settings: oracle.provenance.settings, ...(oracle.provenance.cpu === undefined ? {} : { cpu: oracle.provenance.cpu }) },
        tokenizer: { fingerprint: tokenizerFingerprint(readGguf(model.path)) },
        corpus: { file: basename(corpus.path), sha256: sha256Bytes(corpus.text), tokens: ids.length },
        n_ctx: suite.n_ctx,
        chunks: suite.chunks,
        scored_per_chunk: scoredPerChunk(suite.n_ctx),
        K: suite.top_k,
        created: creationTime(),
        harness_version: HARNESS_VERSION,
      },
    };
  } finally {
    await oracle.close();
  }
}

/** Evaluates the base (evaluateBase) and writes its goldens atomically. */
export async function makeCorpusGoldens(suite: PerplexitySuite, model: ModelRef, directory = corpusGoldensDir(suite, model)): Promise<CorpusGoldensManifest> {
  const { chunks, base, manifest } = await evaluateBase(suite, model);
  return writeCorpusGoldens(directory, chunks, base, manifest);
}

/**
 * Re-makes one directory of corpus goldens in place from what its manifest names (suite, base model)
 * and says what moved. The old goldens are read first, without the model check: the model's bytes
 * may be what changed.
 */
export async function remakeCorpusGoldens(directory: string): Promise<CorpusGoldensDiff> {
  const before = readCorpusGoldens(directory);
  const suite = loadSuite(before.manifest.suite);
  if (suite.kind !== "perplexity") {
    throw new BenchError(`suite ${suite.name} is a ${suite.kind} suite, these are a perplexity suite's corpus goldens`, { file: join(directory, CORPUS_MANIFEST_FILE), field: "suite", fix: "name the perplexity suite the goldens were made for, or remove the directory" });
  }
  await makeCorpusGoldens(suite, await resolveModel(before.manifest.model.id), directory);
  return corpusGoldensDiff(before, readCorpusGoldens(directory));
}

async function writeCorpusGoldens(directory: string, chunks: readonly CorpusChunk[], base: readonly (readonly BasePosition[])[], manifest: Omit<CorpusGoldensManifest, "files">): Promise<CorpusGoldensManifest> {
  const { chunks: C, n_ctx, scored_per_chunk: S, K } = manifest;
  const positions = base.flat();
  if (positions.some((p) => p.topK.ids.length !== K)) throw new Error(`the base's distribution holds fewer than K = ${K} tokens at some position: lower top_k`);
  const arrays: Record<string, Uint8Array> = {
    "chunk_ids.npy": encodeNpy(Int32Array.from(chunks.flatMap((c) => [...c.promptIds, ...c.continuationIds])), [C, n_ctx]),
    "topk_ids.npy": encodeNpy(Int32Array.from(positions.flatMap((p) => p.topK.ids)), [C, S, K]),
    "topk_logprobs.npy": encodeNpy(Float32Array.from(positions.flatMap((p) => p.topK.logprobs)), [C, S, K]),
    "next_logprobs.npy": encodeNpy(Float32Array.from(positions.map((p) => p.nextLogprob)), [C, S]),
  };
  const complete: CorpusGoldensManifest = { ...manifest, files: Object.fromEntries(Object.entries(arrays).map(([name, bytes]) => [name, sha256Bytes(bytes)])) };
  await writeDirectoryAtomic(directory, async (temporary) => {
    for (const [name, bytes] of Object.entries(arrays)) await writeFileAtomic(join(temporary, name), bytes);
    await writeFileAtomic(join(temporary, CORPUS_MANIFEST_FILE), `${JSON.stringify(complete, null, 2)}\n`);
  });
  return complete;
}

/** Reads corpus goldens, checking every file's hash and shape against the manifest and every log-prob for sense. */
export function readCorpusGoldens(directory: string): CorpusGoldens {
  const manifestPath = join(directory, CORPUS_MANIFEST_FILE);
  const manifest = assertMatchesSchema<CorpusGoldensManifest>(readJsonFile(manifestPath), CORPUS_MANIFEST_SCHEMA, manifestPath);
  const { chunks: C, n_ctx, scored_per_chunk: S, K } = manifest;
  const fix = "re-make them with `bench goldens make --suite <the perplexity suite>`";
  if (S !== scoredPerChunk(n_ctx)) throw new BenchError(`scored_per_chunk ${S} is not n_ctx − 1 − n_ctx/2 = ${scoredPerChunk(n_ctx)}`, { file: manifestPath, field: "scored_per_chunk", fix });
  const load = <T extends { shape: readonly number[] }>(name: string, read: (path: string) => T, shape: readonly number[]): T => {
    const path = join(directory, name);
    if (manifest.files[name] === undefined || !existsSync(path)) throw new BenchError("a file of the corpus goldens is missing", { file: path, fix });
    const actual = sha256Bytes(readFileSync(path));
    if (actual !== manifest.files[name]) throw new BenchError(`sha256 ${actual.slice(0, 12)}… does not match the manifest's`, { file: path, field: `files.${name}`, fix });
    const array = read(path);
    if (array.shape.join(",") !== shape.join(",")) throw new BenchError(`shape (${array.shape.join(", ")}) is not the manifest's (${shape.join(", ")})`, { file: path, field: "shape", fix });
    return array;
  };
  const ids = load("chunk_ids.npy", (p) => readNpyInt32(p, 2), [C, n_ctx]).data;
  const topIds = load("topk_ids.npy", (p) => readNpyInt32(p, 3), [C, S, K]).data;
  const topLogprobs = load("topk_logprobs.npy", (p) => readNpyFloat32(p, 3), [C, S, K]).data;
  const nextLogprobs = load("next_logprobs.npy", (p) => readNpyFloat32(p, 2), [C, S]).data;
  // A NaN or positive log-prob would score every arm against nonsense: refuse the file instead.
  for (const [name, values] of [["topk_logprobs.npy", topLogprobs], ["next_logprobs.npy", nextLogprobs]] as const) {
    const bad = values.findIndex((value) => !(value <= 0));
    if (bad >= 0) throw new BenchError(`value ${values[bad]} at flat index ${bad} is not a log-probability (finite, ≤ 0)`, { file: join(directory, name), field: `[${bad}]`, fix });
  }
  const first = n_ctx - S;
  const chunks = Array.from({ length: C }, (_, c) => {
    const chunk = Array.from(ids.subarray(c * n_ctx, (c + 1) * n_ctx));
    return { promptIds: chunk.slice(0, first), continuationIds: chunk.slice(first) };
  });
  const base = Array.from({ length: C }, (_, c) => Array.from({ length: S }, (_, j): BasePosition => {
    const at = (c * S + j) * K;
    return { topK: { ids: Array.from(topIds.subarray(at, at + K)), logprobs: Array.from(topLogprobs.subarray(at, at + K)) }, nextLogprob: nextLogprobs[c * S + j] };
  }));
  return { manifest, directory, chunks, base };
}

/** Refuses corpus goldens made for another corpus text, chunking or K than the suite's. */
export function assertCorpusGoldensMatchSuite(goldens: CorpusGoldens, suite: PerplexitySuite): void {
  const { manifest } = goldens;
  const manifestPath = join(goldens.directory, CORPUS_MANIFEST_FILE);
  const fix = `re-make them: bench goldens make --suite ${suiteArgument(suite)}`;
  if (manifest.corpus.sha256 !== sha256Bytes(readCorpusText(suite).text)) throw new BenchError("the suite's corpus changed since its goldens were made", { file: manifestPath, field: "corpus.sha256", fix });
  for (const field of ["n_ctx", "chunks"] as const) {
    if (manifest[field] !== suite[field]) throw new BenchError(`goldens hold ${field} ${manifest[field]}, the suite asks ${suite[field]}`, { file: manifestPath, field, fix });
  }
  if (manifest.K !== suite.top_k) throw new BenchError(`goldens hold K ${manifest.K}, the suite asks top_k ${suite.top_k}`, { file: manifestPath, field: "K", fix });
}

/** The suite's corpus goldens, proven to belong to its base model, its corpus text and its chunking. */
export async function loadVerifiedCorpusGoldens(suite: PerplexitySuite): Promise<CorpusGoldens> {
  const model = await resolveModel(suite.base.model);
  const directory = corpusGoldensDir(suite, model);
  if (!existsSync(join(directory, CORPUS_MANIFEST_FILE))) throw new BenchError(`no corpus goldens for suite ${suite.name} on ${model.id}`, { file: directory, fix: `make them: bench goldens make --suite ${suiteArgument(suite)}` });
  const goldens = readCorpusGoldens(directory);
  await assertGoldensMatchModel(goldens, model, CORPUS_MANIFEST_FILE);
  assertCorpusGoldensMatchSuite(goldens, suite);
  return goldens;
}

/** Whether a goldens directory holds corpus goldens (a perplexity suite's) rather than a parity suite's. */
export function isCorpusGoldens(directory: string): boolean {
  return existsSync(join(directory, CORPUS_MANIFEST_FILE));
}
