import { runCheckModule } from "./checks/check-module.js";
import { checksOf } from "./checks/registry.js";
import type { SamplingArmContext, SamplingArmState } from "./checks/sampling/sampling-arm-state.js";

/** Runs every sampling check of one arm (checks/registry.ts), in order; the arm's summary line is what sampling_fit wrote. */
export async function runSamplingArm(context: SamplingArmContext): Promise<{ summaryLine: string | undefined }> {
  const state: SamplingArmState = { context };
  for (const check of checksOf("sampling")) await runCheckModule(context, check, state);
  return { summaryLine: state.summaryLine };
}
