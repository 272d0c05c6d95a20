import type { ReuseMeasurement } from "../../../reuse/efficacy.js";
import type { AnswersByPrompt } from "../../../reuse/prefill-reference.js";
import type { SplitUnits } from "../../../reuse/split-points.js";
import type { ReuseArm, ReuseSuite } from "../../../suites/reuse-suite.js";
import type { PromptCounters } from "../../../sut/types.js";
import type { ArmScope } from "../../check.js";
import type { CheckModule } from "../check-module.js";

export interface ReuseArmContext extends ArmScope {
  readonly suite: ReuseSuite;
  readonly arm: ReuseArm;
  /** The arm's ubatch and the model's sliding window, which split points are written in. */
  readonly units: SplitUnits;
  /** Filled with this arm's answers, for arms that name it their `prefill_reference`. */
  readonly answers: AnswersByPrompt;
  /** The answers of the arm this one names as `prefill_reference`; undefined when that arm did not run. */
  readonly referenceAnswers: AnswersByPrompt | undefined;
}

/**
 * What the checks of one reuse arm share: the server's prompt counters before the first scenario,
 * each scenario's measurements (reuse fills them, reuse_efficacy reads them) and the arm's summary
 * lines, one or more per check.
 */
export interface ReuseArmState {
  readonly context: ReuseArmContext;
  readonly countersBefore: PromptCounters | undefined;
  readonly measurements: ReuseMeasurement[];
  readonly lines: string[];
}

/** A check of a reuse arm (one module under checks/reuse/, listed in checks/registry.ts). */
export type ReuseCheck<Name extends string = string> = CheckModule<Name, ReuseArmState, "reuse">;
