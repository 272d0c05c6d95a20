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
] as const;

/**
 * Keys llama.cpp reads as a scalar or as one value per layer (get_key_or_arr). Hybrid families
 * (nemotron_h_moe) mark a layer's kind with zeros in these arrays, so an array needs only one
 * positive entry; a scalar must be positive.
 */
const PER_LAYER_KEYS = ["feed_forward_length", "attention.head_count"] as const;

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

/** A scalar or per-layer key as its largest value; an array must hold one value per layer. */
function perLayerMax(file: GgufFile, path: string, key: string, blockCount: number, required: boolean): number | undefined {
  const entry = file.metadata.get(key);
  if (entry === undefined) {
    if (!required) return undefined;
    throw new BenchError(`required key is missing (llama.cpp would abort the process)`, { file: path, field: key, fix: `add ${key} to the GGUF metadata` });
  }
  if (!Array.isArray(entry.value)) return required ? positive(file, path, key) : Number(entry.value);
  const values = entry.value.map(Number);
  if (values.length !== blockCount || values.some((value) => !Number.isInteger(value) || value < 0)) {
    throw new BenchError(`per-layer array must hold ${blockCount} non-negative integers (one per layer), holds [${values.join(", ")}]`, { file: path, field: key, fix: "write one value per layer" });
  }
  const largest = Math.max(...values);
  if (required && largest <= 0) {
    throw new BenchError("per-layer array is all zeros (llama.cpp would abort the process)", { file: path, field: key, fix: `set ${key} to the model's real values` });
  }
  return largest;
}

/**
 * Validates the metadata a model must carry before llama.cpp sees it and returns its
 * hyperparameters; per-layer keys are reported as their largest value.
 */
export function validateLlamaMetadata(file: GgufFile, path: string): LlamaHyperparameters {
  const architectureEntry = file.metadata.get("general.architecture");
  if (architectureEntry === undefined || typeof architectureEntry.value !== "string") {
    throw new BenchError("general.architecture is missing", { file: path, field: "general.architecture", fix: "set it to the model family, e.g. llama" });
  }
  const arch = architectureEntry.value;
  const values: Record<string, number> = Object.fromEntries(REQUIRED_POSITIVE_KEYS.map((key) => [key, positive(file, path, `${arch}.${key}`)]));
  for (const key of PER_LAYER_KEYS) values[key] = perLayerMax(file, path, `${arch}.${key}`, values.block_count, true)!;
  const headCountKv = perLayerMax(file, path, `${arch}.attention.head_count_kv`, values.block_count, false);
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
    headCountKv: headCountKv ?? headCount,
    vocabSize: tokens.value.length,
  };
}
