import type { LlamaCppTokenizer } from "../sut/llamacpp-tokenizer.js";
import { TOKENIZE_SPECIAL_CAPABILITY } from "../sut/runner-lines.js";
import type { SystemUnderTest } from "../sut/types.js";
import type { ReferenceTokenizerName } from "../suites/tokenizer-suite.js";
import { referenceTokenizer } from "../tokenizer/reference-tokenizer.js";
import type { TokenizerSide } from "./checks/tokenizer/tokenizer-arm-state.js";

/** llama.cpp's tokenizer of a GGUF (embedded, or the llama-tokenize CLI) as a side of the comparisons. */
export function llamaCppSide(tokenizer: LlamaCppTokenizer): TokenizerSide {
  return {
    name: "llama.cpp",
    encode: async (text, mode) => tokenizer.tokenizeText(text, mode),
    decode: async (ids) => tokenizer.detokenizeIds(ids),
    piece: async (id) => tokenizer.piece(id),
  };
}

/**
 * The Hugging Face tokenizer the suite names, as a side, loaded when first asked: an arm SKIPPED
 * before its first text (llama-tokenize not built) never parses a tokenizer.json of up to 33 MB.
 */
export function referenceSide(name: ReferenceTokenizerName): TokenizerSide {
  return {
    name: "reference",
    encode: async (text, mode) => (await referenceTokenizer(name)).encode(text, mode),
    decode: async (ids) => (await referenceTokenizer(name)).decode(ids),
    piece: async (id) => (await referenceTokenizer(name)).piece(id),
  };
}

/**
 * A runner's tokenizer over the runner protocol, as a side: asked with nothing added and special-token
 * text parsed or plain, and to detokenize with special tokens rendered. Without `tokenize_special` in
 * its hello it can be asked neither (its tokenize adds BOS and reads special text as plain): `missing`
 * says so, and the arm's checks are SKIPPED with it, never passed.
 */
export function runnerSide(sut: SystemUnderTest): { readonly side: TokenizerSide; readonly missing: string | undefined } {
  const lacking = [...(sut.tokenizeSpecial === undefined ? ["tokenize"] : []), ...(sut.detokenizeSpecial === undefined ? ["detokenize"] : [])];
  const missing = lacking.length === 0 ? undefined
    : `the runner cannot be asked for ids without BOS or with special-token text parsed: its hello does not list ${lacking.join(" and ")} with "${TOKENIZE_SPECIAL_CAPABILITY}" (docs/runner-protocol.md)`;
  const decode = async (ids: readonly number[]) => (await sut.detokenizeSpecial!([ids], { renderSpecial: true }))[0];
  return {
    missing,
    side: {
      name: "runner",
      encode: async (text, mode) => (await sut.tokenizeSpecial!([text], { addSpecial: false, parseSpecial: mode === "parsed" }))[0],
      decode,
      piece: (id) => decode([id]),
    },
  };
}
