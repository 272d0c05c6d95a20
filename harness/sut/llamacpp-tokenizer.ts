import type { LlamaModel, Token } from "node-llama-cpp";
import { BenchError } from "../errors.js";
import { validateLlamaMetadata } from "../gguf/llama-metadata.js";
import { readGguf } from "../gguf/read.js";
import type { SpecialTokenMode } from "../suites/tokenizer-suite.js";
import { embeddedProvenance, llamaRuntime } from "./llamacpp.js";
import type { SutProvenance, SystemUnderTest } from "./types.js";

/** A llama.cpp tokenizer as a tokenizer suite asks it: ids in either special-token mode, ids back to text, one id's piece. */
export interface LlamaCppTokenizer {
  tokenizeText(text: string, mode: SpecialTokenMode): number[];
  detokenizeIds(ids: readonly number[]): string;
  piece(id: number): string;
  /** Why this tokenizer cannot run here (a tool not built), or undefined when it can. */
  readonly missing?: string;
}

/**
 * llama.cpp's tokenizer alone: a model loaded vocabulary-only (no weights read, no context), as a
 * tokenizer suite's SUT. Unlike the SUT `tokenize` capability (BOS added, special text plain), it
 * tokenizes with or without special-token parsing and adds nothing, so it can be held id for id to a
 * Hugging Face tokenizer called with `add_special_tokens=False`.
 */
export class LlamaCppTokenizerSut implements SystemUnderTest, LlamaCppTokenizer {
  private constructor(readonly label: string, readonly provenance: SutProvenance, private readonly model: LlamaModel) {}

  static async open(modelPath: string, label: string): Promise<LlamaCppTokenizerSut> {
    // Our reader first: some malformed files abort llama.cpp's process instead of failing the load.
    validateLlamaMetadata(readGguf(modelPath), modelPath);
    const llama = await llamaRuntime();
    let model: LlamaModel;
    try {
      model = await llama.loadModel({ modelPath, vocabOnly: true });
    } catch (error) {
      throw new BenchError(`llama.cpp could not load the vocabulary: ${(error as Error).message}`, { file: modelPath, fix: "check that the file is a complete GGUF with tokenizer.* metadata" });
    }
    return new LlamaCppTokenizerSut(label, await embeddedProvenance(modelPath, { vocabOnly: true }), model);
  }

  /** Ids of `text`, nothing added; `parsed` reads special-token text as the special token (llama_tokenize's parse_special). */
  tokenizeText(text: string, mode: SpecialTokenMode): number[] {
    return [...this.model.tokenize(text, mode === "parsed")];
  }

  /** Ids of a chat prompt as llama-server tokenizes one: special-token text parsed, BOS added where the file's add_bos_token says so. */
  chatPromptIds(text: string): number[] {
    const ids = this.tokenizeText(text, "parsed");
    const bos = this.model.tokens.bos;
    return bos !== null && this.model.tokens.shouldPrependBosToken ? [bos, ...ids] : ids;
  }

  /** Ids back to text with special tokens rendered (the inverse of `parsed`). */
  detokenizeIds(ids: readonly number[]): string {
    return this.model.detokenize(ids as Token[], true);
  }

  /** One id's text, special tokens rendered. */
  piece(id: number): string {
    return this.model.detokenize([id as Token], true);
  }

  async close(): Promise<void> {
    await this.model.dispose();
  }
}
