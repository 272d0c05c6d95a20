import { runCheckModule } from "./checks/check-module.js";
import { checksOf } from "./checks/registry.js";
import type { SpeculativeArmContext, SpeculativeArmState } from "./checks/speculative/speculative-arm-state.js";

/** Runs every speculative check of one arm (checks/registry.ts), in order; the arm's summary line is what speculative_greedy wrote. */
export async function runSpeculativeArm(context: SpeculativeArmContext): Promise<{ summaryLine: string | undefined }> {
  const state: SpeculativeArmState = { context };
  for (const check of checksOf("speculative")) await runCheckModule(context, check, state);
  return { summaryLine: state.summaryLine };
}
