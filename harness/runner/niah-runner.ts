import type { ResolvedNiahSuite } from "../suites/niah-suite.js";
import { renderNeedleGrid } from "../niah/grid.js";
import { runCheckModule } from "./checks/check-module.js";
import { gridLabel, type NeedleCase, type NiahArmContext, type NiahArmState } from "./checks/niah/niah-arm-state.js";
import { checksOf } from "./checks/registry.js";

export function needleCases(spec: ResolvedNiahSuite, only?: readonly string[]): NeedleCase[] {
  const all = spec.suite.lengths.flatMap((length) => spec.suite.depths.flatMap((depth) =>
    Array.from({ length: spec.suite.trials }, (_, trial) => ({ length, depth, trial }))));
  return only === undefined ? all : all.filter((c) => only.includes(`${c.length}:${c.depth}:${c.trial}`));
}

/** Runs every needle check of one arm (checks/registry.ts), in order; the grid they fill is the arm's summary. */
export async function runNiahArm(context: NiahArmContext): Promise<{ summaryLine: string | undefined }> {
  const state: NiahArmState = { context, grid: [] };
  for (const check of checksOf("niah")) await runCheckModule(context, check, state);
  return { summaryLine: state.grid.length > 0 ? renderNeedleGrid(gridLabel(context), state.grid) : undefined };
}
