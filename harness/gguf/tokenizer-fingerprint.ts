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
 * Keys that decide the ids too but were added after goldens were committed: they enter the hash
 * only when present, so a file without them keeps the fingerprint its goldens recorded. The
 * pre-tokenizer splits text before BPE merges anything (`qwen2`, `llama3`, …).
 */
const TOKENIZER_KEYS_WHEN_PRESENT = ["tokenizer.ggml.pre"] as const;

/** By parsed header (readGguf hands back the same object for an unchanged file): a 152k vocabulary's hash is ~0.06 s. */
const fingerprints = new WeakMap<GgufFile, string>();

/**
 * sha256 over the tokenizer metadata of a GGUF: two files with the same fingerprint turn the same
 * text into the same ids. Weights do not enter it, so quantized variants share the fingerprint.
 */
export function tokenizerFingerprint(file: GgufFile): string {
  let fingerprint = fingerprints.get(file);
  if (fingerprint === undefined) {
    fingerprint = hashTokenizer(file);
    fingerprints.set(file, fingerprint);
  }
  return fingerprint;
}

function hashTokenizer(file: GgufFile): string {
  const hash = createHash("sha256");
  for (const key of TOKENIZER_KEYS) {
    const entry = file.metadata.get(key);
    hash.update(`${key}=`);
    hash.update(entry === undefined ? "absent" : JSON.stringify(entry.value, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v)));
    hash.update("\n");
  }
  for (const key of TOKENIZER_KEYS_WHEN_PRESENT) {
    const entry = file.metadata.get(key);
    if (entry !== undefined) hash.update(`${key}=${JSON.stringify(entry.value)}\n`);
  }
  return hash.digest("hex");
}
