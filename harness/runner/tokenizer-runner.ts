import { runCheckModule } from "./checks/check-module.js";
import { checksOf } from "./checks/registry.js";
import type { TokenizerArmContext, TokenizerArmState } from "./checks/tokenizer/tokenizer-arm-state.js";

/** Runs every tokenizer check of one arm (checks/registry.ts), in order: ids in both special-token modes, then the round trips. */
export async function runTokenizerArm(context: TokenizerArmContext): Promise<{ summaryLine: string | undefined }> {
  const state: TokenizerArmState = { context };
  for (const check of checksOf("tokenizer")) await runCheckModule(context, check, state);
  return { summaryLine: undefined };
}
