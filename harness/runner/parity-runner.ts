import { checksOf } from "./checks/registry.js";
import { ParityArmState, type ParityArmContext } from "./checks/parity/parity-arm-state.js";

/**
 * Runs every parity check of one arm (checks/registry.ts), in order, over one shared state. A check
 * whose capability is missing is SKIPPED with the reason; a check that throws becomes an error
 * verdict; the other checks still run.
 */
export async function runParityArm(context: ParityArmContext): Promise<{ summaryLine: string | undefined }> {
  const state = new ParityArmState(context);
  for (const check of checksOf("parity")) await state.run(check);
  return { summaryLine: state.summaryLine };
}
