import type { LlamaModel, Token } from "node-llama-cpp";
import type { TokenId } from "../harness/sut/types.js";

/**
 * Context tokens detokenized with each new token: enough for SentencePiece's leading-space rule and
 * for a UTF-8 character split over byte tokens (at most 4), few enough to keep a token O(1).
 */
const CONTEXT_TOKENS = 8;

/**
 * Renders a token sequence one token at a time into the pieces of its text, so that the pieces
 * always concatenate to the text: each piece is the text a token adds *in context* (a `▁The` after
 * other tokens renders " The", not "The"). A token that ends inside an incomplete UTF-8 character
 * adds "" and the character goes to the token that completes it. Special tokens render as "".
 */
export class PieceRenderer {
  private readonly ids: TokenId[] = [];
  /** First token whose text has not been given out yet (the start of an incomplete character). */
  private pendingFrom = 0;
  private text = "";

  constructor(private readonly model: LlamaModel, context: readonly TokenId[] = []) {
    this.ids.push(...context);
    this.pendingFrom = this.ids.length;
  }

  /** Everything rendered so far (the context excluded). */
  get rendered(): string {
    return this.text;
  }

  /** The text `id` adds. */
  push(id: TokenId): string {
    this.ids.push(id);
    const from = Math.max(0, this.pendingFrom - CONTEXT_TOKENS);
    const before = this.detokenize(from, this.pendingFrom);
    const after = this.detokenize(from, this.ids.length);
    const incomplete = after.endsWith("\uFFFD") || !after.startsWith(before);
    // A character is at most 4 bytes: past that the replacement character is the model's own text.
    if (incomplete && this.ids.length - this.pendingFrom < 4) return "";
    this.pendingFrom = this.ids.length;
    const piece = after.startsWith(before) ? after.slice(before.length) : after;
    this.text += piece;
    return piece;
  }

  private detokenize(from: number, to: number): string {
    return from === to ? "" : this.model.detokenize(this.ids.slice(from, to) as Token[], false);
  }
}

/** The pieces of a whole token sequence (echo): pieces[i] is the text token i adds. */
export function tokenPieces(model: LlamaModel, ids: readonly TokenId[]): string[] {
  const renderer = new PieceRenderer(model);
  return ids.map((id) => renderer.push(id));
}

/**
 * A token's text as it reads after other text (for top-log-prob keys, which have no context of
 * their own): rendered twice over and the first copy cut off, so SentencePiece's rule of dropping
 * a leading space at the start of a text does not turn `▁` into "".
 */
export function tokenTextInContext(model: LlamaModel, id: TokenId): string {
  const once = model.detokenize([id as Token], true);
  const twice = model.detokenize([id, id] as Token[], true);
  return twice.startsWith(once) ? twice.slice(once.length) : once;
}
