import { BenchError } from "../errors.js";
import type { TokenId } from "../sut/types.js";

/**
 * One chunk of the corpus as llama-perplexity evaluates it: n_ctx tokens from a fresh context, the
 * chunk's first token replaced by BOS (where the vocabulary adds one), the first half only context.
 * The distribution after position p scores token p + 1, for p from n_ctx/2 to n_ctx − 2: so
 * `promptIds` runs to position n_ctx/2 and `continuationIds` holds the n_ctx − 1 − n_ctx/2 scored tokens.
 */
export interface CorpusChunk {
  readonly promptIds: readonly TokenId[];
  readonly continuationIds: readonly TokenId[];
}

/** Scored tokens per chunk: llama-perplexity's n_ctx − 1 − n_ctx/2. */
export function scoredPerChunk(nCtx: number): number {
  return nCtx - 1 - Math.floor(nCtx / 2);
}

/**
 * Cuts the tokenized corpus (BOS first, as the tokenizer gave it) into `chunks` chunks of `nCtx`.
 * llama-perplexity wants at least 2 × n_ctx tokens and quietly scores fewer chunks than asked when
 * the corpus is short; here a short corpus is refused, so a suite never scores less than it says.
 */
export function corpusChunks(ids: readonly TokenId[], nCtx: number, chunks: number, bos: TokenId | undefined, file: string): CorpusChunk[] {
  const available = Math.floor(ids.length / nCtx);
  if (ids.length < 2 * nCtx || chunks > available) {
    throw new BenchError(`the corpus tokenizes to ${ids.length} tokens: ${chunks} chunks of n_ctx ${nCtx} need ${Math.max(chunks, 2) * nCtx}`, {
      file, field: "chunks", fix: `lower chunks to at most ${available}, lower n_ctx, or lengthen the corpus`,
    });
  }
  const first = Math.floor(nCtx / 2);
  return Array.from({ length: chunks }, (_, c) => {
    const chunk = ids.slice(c * nCtx, (c + 1) * nCtx);
    if (bos !== undefined) chunk[0] = bos;
    return { promptIds: chunk.slice(0, first + 1), continuationIds: chunk.slice(first + 1) };
  });
}
