import type { LlamaModel } from "node-llama-cpp";
import { TokenPieces } from "../harness/sut/token-pieces.js";
import type { TokenId } from "../harness/sut/types.js";

/**
 * Renders a token sequence one token at a time into the pieces of its text, as llama-server does:
 * each token's bytes (llama_token_to_piece) appended to the rest, read as UTF-8, so the pieces
 * always concatenate to the text of the ids and a piece never rewrites an earlier one. A token that
 * ends inside a UTF-8 character adds "" and the character goes to the token that completes it.
 * Special tokens render as "".
 */
export class PieceRenderer {
  private readonly decoder: { push(id: number): string; end(): string };
  private text = "";

  constructor(model: LlamaModel) {
    this.decoder = TokenPieces.of(model).stream();
  }

  /** Everything rendered so far. */
  get rendered(): string {
    return this.text;
  }

  /** The text `id` adds. */
  push(id: TokenId): string {
    const piece = this.decoder.push(id);
    this.text += piece;
    return piece;
  }

  /** The whole text once no token follows: a character left unfinished becomes U+FFFD, as reading all the bytes at once gives. */
  finish(): string {
    this.text += this.decoder.end();
    return this.text;
  }
}

/** The pieces of a whole token sequence (echo): pieces[i] is the text token i adds. */
export function tokenPieces(model: LlamaModel, ids: readonly TokenId[]): string[] {
  const renderer = new PieceRenderer(model);
  return ids.map((id) => renderer.push(id));
}

/** One token's own text (top-log-prob keys), special tokens rendered, as llama-server writes a candidate. */
export function tokenText(model: LlamaModel, id: TokenId): string {
  return TokenPieces.of(model).text([id], true);
}
