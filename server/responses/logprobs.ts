import type { LlamaModel } from "node-llama-cpp";
import type { TopK } from "../../harness/sut/types.js";
import type { GeneratedToken } from "../generation.js";
import { tokenText } from "../token-text.js";

/** Log-probs in the two OpenAI response shapes: the legacy completions one and the chat one. */

export interface LogprobEntry {
  readonly id: number;
  /** The piece of the choice's text this token is (the pieces concatenate to the text). */
  readonly piece: string;
  readonly logprob: number | null;
  readonly top: TopK | undefined;
}

/** A generated token as a completions log-prob entry. */
export function generatedEntry(token: GeneratedToken): LogprobEntry {
  return { id: token.id, piece: token.piece, logprob: token.logprob ?? null, top: token.top };
}

/**
 * OpenAI's legacy completions logprobs, plus token-id columns so a client can compare ids, not
 * strings. `tokens` are the pieces of the text and `text_offset` where each starts in it;
 * `top_logprobs` keys are each candidate's own text.
 */
export function completionLogprobs(model: LlamaModel, entries: readonly LogprobEntry[], startOffset: number) {
  let offset = startOffset;
  const text = (id: number) => tokenText(model, id);
  return {
    tokens: entries.map((e) => e.piece),
    token_logprobs: entries.map((e) => e.logprob),
    top_logprobs: entries.map((e) => (e.top === undefined ? null : Object.fromEntries(e.top.ids.map((id, i) => [text(id), e.top!.logprobs[i]])))),
    text_offset: entries.map((e) => { const at = offset; offset += e.piece.length; return at; }),
    token_ids: entries.map((e) => e.id),
    top_token_ids: entries.map((e) => (e.top === undefined ? null : e.top.ids)),
    top_token_logprobs: entries.map((e) => (e.top === undefined ? null : e.top.logprobs)),
  };
}

/** The chat API's logprobs: one entry per generated token, each with its top alternatives and, as llama-server gives them, the ids. */
export function chatLogprobs(model: LlamaModel, tokens: readonly GeneratedToken[], pieces: readonly string[]) {
  const bytes = (text: string) => [...Buffer.from(text, "utf8")];
  return {
    content: tokens.map((t, i) => ({
      id: t.id, token: pieces[i], logprob: t.logprob ?? null, bytes: bytes(pieces[i]),
      top_logprobs: (t.top?.ids ?? []).map((id, j) => { const text = tokenText(model, id); return { id, token: text, logprob: t.top!.logprobs[j], bytes: bytes(text) }; }),
    })),
    refusal: null,
  };
}
