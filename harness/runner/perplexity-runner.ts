import { runCheckModule } from "./checks/check-module.js";
import type { PerplexityArmContext, PerplexityArmState } from "./checks/perplexity/perplexity-arm-state.js";
import { checksOf } from "./checks/registry.js";

/** Runs every perplexity check of one arm (checks/registry.ts), in order. */
export async function runPerplexityArm(context: PerplexityArmContext): Promise<{ summaryLine: string | undefined }> {
  const state: PerplexityArmState = { context };
  for (const check of checksOf("perplexity")) await runCheckModule(context, check, state);
  return { summaryLine: undefined };
}
