import type { SamplerConvention } from "../sampling/convention.js";
import type { GateLevel, SuiteFile } from "./parity-suite.js";

/** How an arm's requests are written: OpenAI's /v1/completions (ids read from `token_ids`), or llama.cpp's /completion (`return_tokens`). */
export type SamplingWire = "openai" | "llama.cpp";

/** Parameters the parameters check holds to their effect (or to a 400 naming them). */
export const SAMPLING_PARAMETERS = ["logit_bias", "frequency_penalty", "presence_penalty", "repeat_penalty", "min_p", "n"] as const;
export type SamplingParameter = (typeof SAMPLING_PARAMETERS)[number];

/** One server, its declared sampler convention, and what it is held to. */
export interface SamplingArm {
  readonly label: string;
  /** The model (fixture[:QUANT] or .gguf): `{model}` in the command, and the oracle's model. */
  readonly model: string;
  readonly command: readonly string[];
  readonly convention: SamplerConvention;
  readonly wire: SamplingWire;
  /** Each draw's answer streamed (server-sent events) or whole. */
  readonly stream: boolean;
  /** Bits of a seed the server keeps: 53 (every JSON-exact integer is its own stream) or 32 (seeds 2^32 apart draw alike). */
  readonly seed_bits: 32 | 53;
  /** The parameters this arm is held to; the others are not asked (the check names them). */
  readonly parameters: readonly SamplingParameter[];
  /** Indices into the suite's settings this arm draws (absent: all); a streamed arm can draw fewer. */
  readonly settings?: readonly number[];
  readonly gate: GateLevel;
  readonly why?: string;
}

/** A setting of the grid; top_k "narrowest" is the k (up to 20) whose cut falls in the prompt's narrowest settled gap (convention.ts narrowestTopK). */
export interface SamplingGridSetting {
  readonly temperature: number;
  readonly top_k: number | "narrowest";
  readonly top_p: number;
  readonly min_p: number;
}

export interface SamplingPrompt {
  readonly label: string;
  /** The text (tokenized by the SUT), `repeat` times over. */
  readonly text: string;
  readonly repeat?: number;
  /** Draws per setting at this prompt. */
  readonly draws: number;
  /** Indices into the suite's settings drawn at this prompt (absent: all). */
  readonly settings?: readonly number[];
}

/**
 * What a server draws at temperature > 0, held to the oracle's distribution under the arm's
 * declared convention (schema: suites/schema/sampling.schema.json; docs/sampling.md).
 */
export interface SamplingSuite extends SuiteFile<"sampling", SamplingArm> {
  readonly prompts: readonly SamplingPrompt[];
  readonly settings: readonly SamplingGridSetting[];
  /** Each fit's level: a p-value below it fails the setting (chosen so that a clean battery fails < 1 in 1000 runs: docs/sampling.md). */
  readonly level: number;
  /** Prompts per request (a batch of the same prompt, each drawn alone) and requests in flight at once. */
  readonly batch: number;
  readonly concurrency: number;
  readonly checks: { readonly sampling_fit: GateLevel; readonly seeds: GateLevel; readonly parameters: GateLevel };
}
