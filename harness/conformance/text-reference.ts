import type { LlamaModel, Token } from "node-llama-cpp";
import { llamaRuntime } from "../sut/llamacpp.js";
import { TokenPieces, tokenizeAsLlamaCpp } from "../sut/token-pieces.js";

/**
 * What the text checks hold a server's answers to: llama.cpp's own tokenizer and pieces of the
 * model file the arm serves, loaded here vocabulary-only (no weights, no context), apart from the
 * server under test.
 */
export interface TextReference {
  tokenize(text: string, addSpecial: boolean, parseSpecial: boolean): number[];
  pieces(ids: readonly number[], special: boolean): Uint8Array[];
  text(ids: readonly number[], special: boolean): string;
  /** Whether a server could get `ids`' text wrong the usual ways: llama_detokenize's clean-up of spaces changes it, a character is split over ids, or bytes are not UTF-8 (U+FFFD). */
  isTricky(ids: readonly number[]): boolean;
  /** A control token's text (`special` rendered), for prompts that hold special-token text; undefined where the file names none. */
  readonly controlTexts: readonly string[];
}

/** A reference opened for an arm's text checks, or why none can be exact; `close` frees the vocabulary. */
export interface OpenedTextReference {
  readonly reference: TextReference | string;
  close(): Promise<void>;
}

/** Loads `modelPath`'s vocabulary as the text checks' reference (once per arm: a 262k-row vocabulary takes seconds). */
export async function openTextReference(modelPath: string): Promise<OpenedTextReference> {
  const model: LlamaModel = await (await llamaRuntime()).loadModel({ modelPath, vocabOnly: true });
  const close = () => model.dispose();
  const pieces = TokenPieces.of(model);
  if (!pieces.source.exact) return { reference: `llama.cpp's pieces cannot be read exactly here: ${pieces.source.reason}`, close };
  const { bos, eos, eot } = model.tokens;
  const controlTexts = [...new Set([eot, eos, bos].filter((id) => id !== null).map((id) => pieces.text([id!], true)))].filter((t) => t !== "");
  return {
    reference: {
      tokenize: (text, addSpecial, parseSpecial) => tokenizeAsLlamaCpp(model, text, addSpecial, parseSpecial),
      pieces: (ids, special) => pieces.bytesOf(ids, special),
      text: (ids, special) => pieces.text(ids, special),
      isTricky: (ids) => {
        const text = pieces.text(ids, false);
        return text.includes("\uFFFD") || model.detokenize(ids as Token[], false) !== text || ids.map((id) => pieces.text([id], false)).join("") !== text;
      },
      controlTexts,
    },
    close,
  };
}
