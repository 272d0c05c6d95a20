import { createHash } from "node:crypto";
import type { GgufFile } from "./types.js";

/** Metadata that decides how text becomes ids. */
const TOKENIZER_KEYS = [
  "tokenizer.ggml.model",
  "tokenizer.ggml.tokens",
  "tokenizer.ggml.token_type",
  "tokenizer.ggml.merges",
  "tokenizer.ggml.bos_token_id",
  "tokenizer.ggml.eos_token_id",
  "tokenizer.ggml.add_bos_token",
  "tokenizer.ggml.add_space_prefix",
] as const;

/**
 * sha256 over the tokenizer metadata of a GGUF: two files with the same fingerprint turn the same
 * text into the same ids. Weights do not enter it, so quantized variants share the fingerprint.
 */
export function tokenizerFingerprint(file: GgufFile): string {
  const hash = createHash("sha256");
  for (const key of TOKENIZER_KEYS) {
    const entry = file.metadata.get(key);
    hash.update(`${key}=`);
    hash.update(entry === undefined ? "absent" : JSON.stringify(entry.value, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v)));
    hash.update("\n");
  }
  return hash.digest("hex");
}
