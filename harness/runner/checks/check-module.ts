import type { CheckName, GateVerdict } from "../../results/types.js";
import type { GateLevel } from "../../suites/parity-suite.js";
import type { Capability } from "../../sut/types.js";
import { runCheck, type ArmScope, type CheckOutcome } from "../check.js";

/**
 * One check as a plug-in of its suite kind (listed in ./registry.ts): the suite kind whose arms
 * run it; its name, which is the `check` column of its cells and verdict; the SUT capabilities
 * without which it is SKIPPED; its gate level on an arm (undefined: the suite does not ask for
 * it); and its body, which records its own cells and returns the verdict. `State` is what the
 * kind's checks of one arm share.
 */
export interface CheckModule<Name extends string, State, Kind extends string = string> {
  readonly kind: Kind;
  readonly name: Name;
  readonly needs: readonly Capability[];
  level(state: State): GateLevel | undefined;
  run(state: State, gate: GateLevel): Promise<CheckOutcome>;
}

/** Runs one check module on an arm through runCheck: SKIPPED without its capabilities, an error verdict when it throws. */
export function runCheckModule<Name extends CheckName, State>(scope: ArmScope, check: CheckModule<Name, State, string>, state: State): Promise<GateVerdict | undefined> {
  return runCheck(scope, check.name, check.level(state), check.needs, (gate) => check.run(state, gate));
}
