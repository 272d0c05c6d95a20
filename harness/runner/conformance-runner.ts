import { runCheckModule } from "./checks/check-module.js";
import type { ConformanceArmContext, ConformanceArmState } from "./checks/conformance/conformance-arm-state.js";
import { checksOf } from "./checks/registry.js";

/** Runs every conformance check of one arm (checks/registry.ts), in order. */
export async function runConformanceArm(context: ConformanceArmContext): Promise<{ summaryLine: string | undefined }> {
  const state: ConformanceArmState = { context };
  for (const check of checksOf("conformance")) await runCheckModule(context, check, state);
  return { summaryLine: state.summaryLine };
}
