import { StringDecoder } from "node:string_decoder";
import type { LlamaModel, Token } from "node-llama-cpp";
import { contextAccessAddon } from "./llamacpp-native-context.js";

/*
 * The text of token ids as llama.cpp's server writes it: each id's piece (llama_token_to_piece, no
 * leading space stripped), the pieces' bytes back to back, read as UTF-8. llama-server builds its
 * completions, its stream and its /detokenize this way, and so does ours; the text conformance
 * checks hold any server's answers to it. llama_detokenize (all node-llama-cpp offers) differs on
 * purpose: it runs the vocabulary's clean-up (clean_up_tokenization_spaces: Llama 3's turns
 * "vs !== y" into "vs!== y" and "rock ' n" into "rock'n") and strips SentencePiece's leading space,
 * so text cut into pieces by it neither concatenates to itself nor round-trips a prompt.
 */

/** How pieces are read: exactly (llama_token_to_piece through native/llama-context) or, without that addon, approximately. */
export type PieceSource = { readonly exact: true } | { readonly exact: false; readonly reason: string };

/**
 * The ids of `text` as llama_tokenize gives them: `addSpecial` adds the BOS and EOS the file asks
 * for (add_bos_token, add_eos_token: a vocabulary can name a BOS it never adds, Qwen3's), and
 * `parseSpecial` reads special-token text as the token. node-llama-cpp's tokenize adds nothing.
 */
export function tokenizeAsLlamaCpp(model: LlamaModel, text: string, addSpecial: boolean, parseSpecial: boolean): number[] {
  const ids = model.tokenize(text, parseSpecial) as number[];
  if (!addSpecial) return ids;
  const { bos, eos, shouldPrependBosToken, shouldAppendEosToken } = model.tokens;
  return [...(shouldPrependBosToken && bos !== null ? [bos] : []), ...ids, ...(shouldAppendEosToken && eos !== null ? [eos] : [])];
}

/** A piece as llama-server's /tokenize `with_pieces` writes it: the text where its bytes are whole UTF-8, else the byte values. */
export function pieceAsJson(bytes: Uint8Array): string | number[] {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return [...bytes];
  }
}

const opened = new WeakMap<LlamaModel, TokenPieces>();

export class TokenPieces {
  private constructor(
    private readonly model: LlamaModel,
    /** LlamaModel's `_model`, the wrapped native model the addon reads the vocabulary from; absent where the addon is not there. */
    private readonly nativeModel: object | undefined,
    readonly source: PieceSource,
  ) {}

  /** The pieces of `model`'s vocabulary (one reader per model). */
  static of(model: LlamaModel): TokenPieces {
    let pieces = opened.get(model);
    if (pieces === undefined) {
      pieces = TokenPieces.open(model);
      opened.set(model, pieces);
    }
    return pieces;
  }

  /** FAKE (a planted server fault, tests only): `model`'s pieces from llama_detokenize one id at a time, as a server without llama_token_to_piece makes them. */
  static plantByDetokenize(model: LlamaModel): void {
    opened.set(model, new TokenPieces(model, undefined, { exact: false, reason: "FAKE: planted text-by-detokenize" }));
  }

  private static open(model: LlamaModel): TokenPieces {
    const addon = contextAccessAddon();
    if (typeof addon === "string") return new TokenPieces(model, undefined, { exact: false, reason: addon });
    if (typeof addon.tokenPieces !== "function") return new TokenPieces(model, undefined, { exact: false, reason: "the llama-context addon is older than this checkout (no tokenPieces): rebuild it with npm run build:native" });
    // `_model` is private in node-llama-cpp's typings (the version is pinned exactly); the addon checks what it gets.
    const nativeModel = (model as unknown as { _model?: object })._model;
    if (nativeModel === undefined) return new TokenPieces(model, undefined, { exact: false, reason: "node-llama-cpp's model has no _model: its layout changed" });
    const pieces = new TokenPieces(model, nativeModel, { exact: true });
    try {
      pieces.bytesOf([0], true);
      return pieces;
    } catch (error) {
      return new TokenPieces(model, undefined, { exact: false, reason: (error as Error).message });
    }
  }

  /** Each id's piece as bytes; `special` renders control tokens' text (llama-server's /detokenize does, its completions do not). */
  bytesOf(ids: readonly number[], special: boolean): Uint8Array[] {
    if (this.nativeModel === undefined) {
      // Without the addon: one id at a time through llama_detokenize, whose clean-up can still change a piece such as " !==".
      return ids.map((id) => Buffer.from(this.model.detokenize([id as Token], special)));
    }
    const addon = contextAccessAddon() as { tokenPieces: NonNullable<Exclude<ReturnType<typeof contextAccessAddon>, string>["tokenPieces"]> };
    const { bytes, ends } = addon.tokenPieces(this.nativeModel, Int32Array.from(ids), special);
    return Array.from(ends, (end, i) => bytes.subarray(i === 0 ? 0 : ends[i - 1], end));
  }

  /** The text of `ids`: their pieces' bytes read as UTF-8 (an unfinished character at the end becomes U+FFFD). */
  text(ids: readonly number[], special: boolean): string {
    return Buffer.concat(this.bytesOf(ids, special)).toString("utf8");
  }

  /** A decoder for a stream of ids (special tokens not rendered, as in completions): `push` gives the text an id completes, `end` what an unfinished character left. */
  stream(): { push(id: number): string; end(): string } {
    const decoder = new StringDecoder("utf8");
    return { push: (id) => decoder.write(Buffer.from(this.bytesOf([id], false)[0])), end: () => decoder.end() };
  }
}
