import { BenchError } from "../errors.js";
import type { ReuseSuite } from "../suites/reuse-suite.js";
import { runCheckModule } from "./checks/check-module.js";
import { checksOf } from "./checks/registry.js";
import type { ReuseArmContext, ReuseArmState } from "./checks/reuse/reuse-arm-state.js";

/**
 * Runs every reuse check of one arm (checks/registry.ts), in order: `reuse` holds every scenario's
 * last answers, served from the server's cache, to the same requests served cold; `reuse_efficacy`
 * measures what the server says it reused against what was reusable; `reuse_prefill` holds them
 * to an arm that prefills in other chunks.
 */
export async function runReuseArm(context: ReuseArmContext): Promise<{ summaryLine: string | undefined }> {
  const state: ReuseArmState = { context, countersBefore: await context.sut.promptCounters?.().catch(() => undefined), measurements: [], lines: [] };
  for (const check of checksOf("reuse")) await runCheckModule(context, check, state);
  return { summaryLine: state.lines.length === 0 ? undefined : [`${context.arm.label} reuse:`, ...state.lines].join("\n") };
}

/** Every `prefill_reference` names an arm listed before its own, on the same model (bad input otherwise, before any arm runs). */
export function assertPrefillReferences(suite: ReuseSuite): void {
  for (const arm of suite.arms.filter((a) => a.prefill_reference !== undefined)) {
    const reference = suite.arms.find((a) => a.label === arm.prefill_reference);
    if (reference === undefined || reference.model !== arm.model || suite.arms.indexOf(reference) > suite.arms.indexOf(arm)) {
      throw new BenchError(`arm "${arm.label}": prefill_reference "${arm.prefill_reference}" is not an earlier arm on ${arm.model}`, { file: suite.path, field: "prefill_reference", fix: "name an arm listed before this one, on the same model" });
    }
  }
}
