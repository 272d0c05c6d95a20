import type { SamplingServer } from "../../../sampling/sampling-wire.js";
import type { TokenId } from "../../../sut/types.js";
import type { SamplingArm, SamplingSuite } from "../../../suites/sampling-suite.js";
import type { ArmScope } from "../../check.js";
import type { ExpectedModel } from "../../identity.js";
import type { CheckModule } from "../check-module.js";

/** A suite prompt as the arm's server tokenized it. */
export interface TokenizedPrompt {
  readonly index: number;
  readonly label: string;
  readonly ids: readonly TokenId[];
}

export interface SamplingArmContext extends ArmScope {
  readonly suite: SamplingSuite;
  readonly samplingArm: SamplingArm;
  /** The leg's server, in the arm's wire format, each request bounded by the per-case timeout. */
  readonly server: SamplingServer;
  readonly prompts: readonly TokenizedPrompt[];
  readonly vocabSize: number;
  /** The file the oracle's distributions come from: the server must run it (identity). */
  readonly expectedModel: ExpectedModel;
  /** The oracle's full next-token log-probs after `ids` (one per vocabulary id; -Infinity where it gives none). */
  oracle(ids: readonly TokenId[]): Promise<Float64Array>;
}

/** What the checks of one sampling arm share: the context, and the summary line sampling_fit writes. */
export interface SamplingArmState {
  readonly context: SamplingArmContext;
  summaryLine?: string;
}

/** A check of a sampling arm (one module under checks/sampling/, listed in checks/registry.ts). */
export type SamplingCheck<Name extends string = string> = CheckModule<Name, SamplingArmState, "sampling">;
