import { BenchError } from "../errors.js";
import type { TokenId, TokenKind } from "../sut/types.js";
import { readGguf } from "./read.js";

/** llama.cpp's token types (llama_token_type) as the kinds a suite asks about; user-defined and unused tokens are text. */
const KIND_OF_TYPE: Readonly<Record<number, TokenKind>> = { 1: "text", 2: "unknown", 3: "control", 4: "text", 5: "text", 6: "byte" };

/**
 * The kind of each id, read from a GGUF's `tokenizer.ggml.token_type`: what a server serving that
 * file would say if it had a word for it (llama.cpp's server has none). Only for a server
 * started on that very file, or one the arm says serves it.
 */
export function tokenKindsFromGguf(path: string): (ids: readonly TokenId[]) => TokenKind[] {
  const types = readGguf(path).metadata.get("tokenizer.ggml.token_type");
  if (types === undefined || !Array.isArray(types.value)) throw new BenchError("the GGUF has no token types", { file: path, field: "tokenizer.ggml.token_type", fix: "embed the tokenizer's token types in the GGUF" });
  const kinds = (types.value as readonly unknown[]).map((type) => KIND_OF_TYPE[Number(type)] ?? "text");
  return (ids) => ids.map((id) => {
    const kind = kinds[id];
    if (kind === undefined) throw new Error(`id ${id} is outside the vocabulary (${kinds.length} tokens)`);
    return kind;
  });
}
