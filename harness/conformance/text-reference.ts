import type { LlamaModel } from "node-llama-cpp";
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
  /** A control token's text (`special` rendered), for prompts that hold special-token text; undefined where the file names none. */
  readonly controlTexts: readonly string[];
}

/** Opens the reference, runs `use` with it, and frees it; a string instead of a reference says why none can be exact here. */
export async function withTextReference<T>(modelPath: string | undefined, use: (reference: TextReference | string) => Promise<T>): Promise<T> {
  if (modelPath === undefined) return use("the arm names no model file to detokenize with (a url arm)");
  const model: LlamaModel = await (await llamaRuntime()).loadModel({ modelPath, vocabOnly: true });
  try {
    const pieces = TokenPieces.of(model);
    if (!pieces.source.exact) return await use(`llama.cpp's pieces cannot be read exactly here: ${pieces.source.reason}`);
    const { bos, eos, eot } = model.tokens;
    const controlTexts = [...new Set([eot, eos, bos].filter((id) => id !== null).map((id) => pieces.text([id!], true)))].filter((t) => t !== "");
    return await use({
      tokenize: (text, addSpecial, parseSpecial) => tokenizeAsLlamaCpp(model, text, addSpecial, parseSpecial),
      pieces: (ids, special) => pieces.bytesOf(ids, special),
      text: (ids, special) => pieces.text(ids, special),
      controlTexts,
    });
  } finally {
    await model.dispose();
  }
}
