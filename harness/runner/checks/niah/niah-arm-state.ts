import type { GridCase } from "../../../niah/grid.js";
import type { ResolvedNiahSuite } from "../../../suites/niah-suite.js";
import type { ArmScope } from "../../check.js";
import type { ExpectedModel } from "../../identity.js";
import type { CheckModule } from "../check-module.js";

/** One needle case; `L:depth:trial` is also how `--niah-case` selects it. */
export interface NeedleCase {
  readonly length: number;
  readonly depth: number;
  readonly trial: number;
}

export interface NiahArmContext extends ArmScope {
  readonly spec: ResolvedNiahSuite;
  readonly cases: readonly NeedleCase[];
  /** The model file the arm names: the SUT must say it runs this one (no goldens: the arm's model is what its grid is about). */
  readonly expectedModel: ExpectedModel;
}

/** What the checks of one needle arm share: its context, and the grid the niah check fills (the arm's summary). */
export interface NiahArmState {
  readonly context: NiahArmContext;
  readonly grid: GridCase[];
}

/** A check of a needle arm (one module under checks/niah/, listed in checks/registry.ts). */
export type NiahCheck<Name extends string = string> = CheckModule<Name, NiahArmState, "niah">;

/** An informational arm's grid says so: "0/6 Y" above an exit-0 line must not read like a contradiction. */
export function gridLabel(context: NiahArmContext): string {
  return context.arm.gate === "informational" ? `${context.arm.label} (informational)` : context.arm.label;
}
