import type { SuiteArm, SuiteFile } from "./parity-suite.js";

/** A needle-in-a-haystack suite as its JSON file says (schema: suites/schema/niah.schema.json). */
export interface NiahSuite extends SuiteFile<"niah", SuiteArm> {
  readonly lengths: readonly number[];
  readonly depths: readonly number[];
  readonly trials: number;
  readonly needle_alphabet?: string;
  readonly needle_length?: number;
  readonly template?: { readonly prefix?: string; readonly needle?: string; readonly question?: string };
  readonly filler?: string;
  readonly max_tokens?: number;
  readonly length_tolerance?: number;
}

/** The field's needle test (docs/metrics.md), used where a suite does not say otherwise. */
export const NIAH_DEFAULTS = {
  needleAlphabet: "BCDFGHJKLMNPQRSTVWXYZ23456789",
  needleLength: 8,
  prefix: "",
  needle: "REMEMBER THIS: The magic password is {needle}. END REMEMBER.",
  question: "Based only on the document above, what is the magic password? Answer with only the 8-character password.",
  filler: "The history of science is a history of patient measurement. Each careful observer adds a little to what is known, and each error that is found and corrected makes the whole a little more sound. ",
  maxTokens: 40,
  lengthTolerance: 5,
} as const;

/** The suite with every default applied, resolved once. */
export interface ResolvedNiahSuite {
  readonly suite: NiahSuite;
  readonly needleAlphabet: string;
  readonly needleLength: number;
  readonly prefix: string;
  readonly needleSentence: string;
  readonly question: string;
  readonly filler: string;
  readonly maxTokens: number;
  readonly lengthTolerance: number;
}

export function resolveNiahSuite(suite: NiahSuite): ResolvedNiahSuite {
  return {
    suite,
    needleAlphabet: suite.needle_alphabet ?? NIAH_DEFAULTS.needleAlphabet,
    needleLength: suite.needle_length ?? NIAH_DEFAULTS.needleLength,
    prefix: suite.template?.prefix ?? NIAH_DEFAULTS.prefix,
    needleSentence: suite.template?.needle ?? NIAH_DEFAULTS.needle,
    question: suite.template?.question ?? NIAH_DEFAULTS.question,
    filler: suite.filler ?? NIAH_DEFAULTS.filler,
    maxTokens: suite.max_tokens ?? NIAH_DEFAULTS.maxTokens,
    lengthTolerance: suite.length_tolerance ?? NIAH_DEFAULTS.lengthTolerance,
  };
}
