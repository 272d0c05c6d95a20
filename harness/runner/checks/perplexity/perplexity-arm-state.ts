import type { CorpusGoldens } from "../../../perplexity/corpus-goldens.js";
import type { PerplexityArm, PerplexitySuite } from "../../../suites/perplexity-suite.js";
import type { ArmScope } from "../../check.js";
import type { CheckModule } from "../check-module.js";

export interface PerplexityArmContext extends ArmScope {
  readonly suite: PerplexitySuite;
  readonly arm: PerplexityArm;
  readonly goldens: CorpusGoldens;
  /** The base model's vocabulary: the arm is asked for its whole distribution at every scored position. */
  readonly vocabSize: number;
}

/** What the check of one perplexity arm has: its context (the arm has one check). */
export interface PerplexityArmState {
  readonly context: PerplexityArmContext;
}

/** A check of a perplexity arm (one module under checks/perplexity/, listed in checks/registry.ts). */
export type PerplexityCheck<Name extends string = string> = CheckModule<Name, PerplexityArmState, "perplexity">;
