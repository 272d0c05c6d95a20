import type { ConformanceTarget } from "../../../conformance/target.js";
import type { CaseTimeout } from "../../../sut/with-timeout.js";
import type { ArmScope } from "../../check.js";
import type { CheckModule } from "../check-module.js";

export interface ConformanceArmContext extends ArmScope {
  /** The suite's conformance checks (harness/conformance/checks.ts), by name. */
  readonly checks: readonly string[];
  readonly target: ConformanceTarget;
  /** How long one named check may wait on the server before the server counts as no longer answering. */
  readonly caseTimeout: CaseTimeout;
}

/** What the checks of one conformance arm share: its context, and the arm's summary line as the conformance check wrote it. */
export interface ConformanceArmState {
  readonly context: ConformanceArmContext;
  summaryLine?: string;
}

/** A check of a conformance arm (one module under checks/conformance/, listed in checks/registry.ts). */
export type ConformanceCheck<Name extends string = string> = CheckModule<Name, ConformanceArmState, "conformance">;
