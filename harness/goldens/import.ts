import { BenchError } from "../errors.js";
import { readGguf } from "../gguf/read.js";
import { tokenizerFingerprint } from "../gguf/tokenizer-fingerprint.js";
import type { ModelRef } from "../fixtures/registry.js";
import { sha256File } from "../io/sha256.js";
import { HARNESS_VERSION } from "../version.js";
import { PROMPT_PAD, promptIdsSha256, writeGoldens } from "./goldens.js";
import { creationTime, type GoldensManifest } from "./manifest.js";
import { readNpyInt32 } from "./npy.js";
import { isRawPromptLayout, rawPromptFile, readRawPrompts } from "./raw-prompts.js";
import { existsSync, readdirSync, statSync } from "node:fs";
import { resolve } from "node:path";

export interface ImportRequest {
  /** Another project's `greedy_ids.npy`: `<i4` [P, T]. */
  readonly greedyPath: string;
  /**
   * Prompt ids as fed to the model: a `<i4` [P, L] .npy padded with -1, or (as C++ engines commit
   * them) a directory of raw little-endian int32 files `p{i}_prompt.i32`.
   */
  readonly promptsPath: string;
  readonly suite: string;
  readonly model: ModelRef;
  readonly source: string;
  readonly directory: string;
  /** Replace goldens already in `directory` (they may be committed, with log-probs an import cannot bring back). */
  readonly force?: boolean;
}

/** Existing goldens are kept unless the user asks for them to go: an import holds ids only (K = 0). */
function refuseToOverwrite(directory: string, force: boolean): void {
  if (force || !existsSync(directory) || readdirSync(directory).length === 0) return;
  const held = readdirSync(directory).sort().join(", ");
  throw new BenchError(`already holds goldens (${held}); an import would replace them with ids only`, {
    file: directory, fix: "pass --out with another directory, or --force to replace them",
  });
}

function readNpyPrompts(path: string, count: number): number[][] {
  const prompts = readNpyInt32(path, 2);
  if (prompts.shape[0] !== count) {
    throw new BenchError(`holds ${prompts.shape[0]} prompts, greedy_ids.npy holds ${count}`, { file: path, field: "shape[0]", fix: "pass the prompt ids that produced these greedy ids" });
  }
  const width = prompts.shape[1];
  return Array.from({ length: count }, (_, p) => Array.from(prompts.data.subarray(p * width, (p + 1) * width)).filter((id) => id !== PROMPT_PAD));
}

/**
 * Writes another project's greedy goldens in our format, with provenance "imported". They carry
 * no log-probs: K = 0 is recorded, and the checks that need the oracle's log-probs are SKIPPED
 * on them, never passed.
 */
export async function importGoldens(request: ImportRequest): Promise<GoldensManifest> {
  refuseToOverwrite(request.directory, request.force === true);
  const greedy = readNpyInt32(request.greedyPath, 2);
  const [P, T] = greedy.shape;
  const raw = isRawPromptLayout(request.promptsPath);
  const promptIds = raw ? readRawPrompts(request.promptsPath, P) : readNpyPrompts(request.promptsPath, P);
  const file = readGguf(request.model.path);
  const vocabSize = (file.metadata.get("tokenizer.ggml.tokens")?.value as unknown[] | undefined)?.length ?? 0;
  const greedyIds = Array.from({ length: P }, (_, p) => Array.from(greedy.data.subarray(p * T, (p + 1) * T)));
  // The error names the file that holds the bad id: in the raw layout, that prompt's own file.
  const holderOf = (table: "prompts" | "greedy", p: number) => (table === "greedy" ? request.greedyPath : raw ? rawPromptFile(request.promptsPath, p) : request.promptsPath);
  for (const [table, rows] of [["prompts", promptIds], ["greedy", greedyIds]] as const) {
    rows.forEach((ids, p) => ids.forEach((id, j) => {
      if (id < 0 || id >= vocabSize) {
        throw new BenchError(`id ${id} at [${p}, ${j}] is outside the model's vocabulary (0..${vocabSize - 1}, ${request.model.path})`, { file: holderOf(table, p), field: `[${p}, ${j}]`, fix: "import against the model these ids were made with" });
      }
    }));
  }
  return writeGoldens(request.directory, { promptIds, greedyIds }, {
    schema_version: 1,
    suite: request.suite,
    // A file's absolute path, so that `goldens verify` and reruns find the model from any directory.
    model: { id: request.model.quant === "file" ? resolve(request.model.path) : request.model.id, file: request.model.path.split("/").pop()!, sha256: await sha256File(request.model.path), bytes: statSync(request.model.path).size },
    oracle: { name: "imported", engine: "unknown", settings: {}, source: request.source },
    tokenizer: { fingerprint: tokenizerFingerprint(file) },
    prompts: { count: P, texts_sha256: null, ids_sha256: promptIdsSha256(promptIds) },
    T,
    K: 0,
    sampler: { temperature: 0, decoding: "greedy" },
    created: creationTime(),
    harness_version: HARNESS_VERSION,
  });
}

