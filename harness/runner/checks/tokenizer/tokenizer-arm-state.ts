import type { KnownTokenizerDifference, SpecialTokenMode, TokenizerArm, TokenizerSideName, TokenizerSuite } from "../../../suites/tokenizer-suite.js";
import type { CorpusText } from "../../../tokenizer/corpus.js";
import type { ArmScope } from "../../check.js";
import type { ReferenceComparison } from "../../known-differences.js";
import type { CheckModule } from "../check-module.js";

/** One tokenizer as the comparisons read it: ids with nothing added, ids back to text (special tokens rendered), one id's piece. Async: a runner answers over the protocol. */
export interface TokenizerSide {
  readonly name: TokenizerSideName;
  encode(text: string, mode: SpecialTokenMode): Promise<number[]>;
  decode(ids: readonly number[]): Promise<string>;
  piece(id: number): Promise<string>;
}

export interface TokenizerArmContext extends ArmScope {
  readonly suite: TokenizerSuite;
  readonly arm: TokenizerArm;
  /** The side the other is held to (the Hugging Face reference; llama.cpp on a runner arm), and the side held to it. */
  readonly expected: TokenizerSide;
  readonly observed: TokenizerSide;
  /** The sides whose round trips (text → ids → text) are checked. */
  readonly roundTrips: readonly TokenizerSide[];
  /** Why the arm cannot be compared here (a tool not built, a runner without `tokenize_special`), or undefined when it can. */
  readonly missing: string | undefined;
  /** The corpus texts this run asks, with their index in the corpus (`--prompt` selects them). */
  readonly texts: ReadonlyArray<CorpusText & { readonly index: number }>;
}

/** One comparison of one text: the two sides agree (and how), or where they first differ. */
export type Comparison = { readonly where: KnownTokenizerDifference["where"] } & ReferenceComparison;

/** What the checks of one tokenizer arm share: its context (they keep nothing else between them). */
export interface TokenizerArmState {
  readonly context: TokenizerArmContext;
}

/** A check of a tokenizer arm (one module under checks/tokenizer/, listed in checks/registry.ts). */
export type TokenizerCheck<Name extends string = string> = CheckModule<Name, TokenizerArmState, "tokenizer">;
