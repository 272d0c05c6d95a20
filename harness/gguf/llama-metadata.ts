import { BenchError } from "../errors.js";
import type { GgufFile } from "./types.js";

/**
 * Keys llama.cpp needs for `general.architecture = llama`. A missing or zero
 * `feed_forward_length` or `attention.head_count` makes llama.cpp abort the whole process
 * (uncatchable), so the harness checks them before llama.cpp ever sees the file.
 */
const REQUIRED_POSITIVE_KEYS = [
  "context_length",
  "embedding_length",
  "block_count",
  "feed_forward_length",
  "attention.head_count",
] as const;

export interface LlamaHyperparameters {
  readonly architecture: string;
  readonly contextLength: number;
  readonly embeddingLength: number;
  readonly blockCount: number;
  readonly feedForwardLength: number;
  readonly headCount: number;
  readonly headCountKv: number;
  readonly vocabSize: number;
}

function positive(file: GgufFile, path: string, key: string): number {
  const entry = file.metadata.get(key);
  if (entry === undefined) {
    throw new BenchError(`required key is missing (llama.cpp would abort the process)`, { file: path, field: key, fix: `add ${key} to the GGUF metadata` });
  }
  const value = Number(entry.value);
  if (!Number.isFinite(value) || value <= 0) {
    throw new BenchError(`required key is ${String(entry.value)}, must be a positive number`, { file: path, field: key, fix: `set ${key} to the model's real value` });
  }
  return value;
}

/** Validates the metadata a llama-family model must carry and returns its hyperparameters. */
export function validateLlamaMetadata(file: GgufFile, path: string): LlamaHyperparameters {
  const architectureEntry = file.metadata.get("general.architecture");
  if (architectureEntry === undefined || typeof architectureEntry.value !== "string") {
    throw new BenchError("general.architecture is missing", { file: path, field: "general.architecture", fix: "set it to the model family, e.g. llama" });
  }
  const arch = architectureEntry.value;
  const values = Object.fromEntries(REQUIRED_POSITIVE_KEYS.map((key) => [key, positive(file, path, `${arch}.${key}`)]));
  const headCountKvEntry = file.metadata.get(`${arch}.attention.head_count_kv`);
  const tokens = file.metadata.get("tokenizer.ggml.tokens");
  if (tokens === undefined || !Array.isArray(tokens.value) || tokens.value.length === 0) {
    throw new BenchError("the vocabulary is missing", { file: path, field: "tokenizer.ggml.tokens", fix: "embed the tokenizer in the GGUF" });
  }
  const headCount = values["attention.head_count"];
  if (values.embedding_length % headCount !== 0) {
    throw new BenchError(`embedding_length ${values.embedding_length} is not divisible by head_count ${headCount}`, {
      file: path, field: `${arch}.attention.head_count`, fix: "use a head count that divides the embedding length",
    });
  }
  return {
    architecture: arch,
    contextLength: values.context_length,
    embeddingLength: values.embedding_length,
    blockCount: values.block_count,
    feedForwardLength: values.feed_forward_length,
    headCount,
    headCountKv: headCountKvEntry === undefined ? headCount : Number(headCountKvEntry.value),
    vocabSize: tokens.value.length,
  };
}
