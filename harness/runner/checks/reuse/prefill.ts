import { compareWithReference } from "../../../reuse/prefill-reference.js";
import { makeCell, type CheckOutcome } from "../../check.js";
import type { ReuseArmContext, ReuseCheck } from "./reuse-arm-state.js";

/** Where the arm names a `prefill_reference`: the same prompts prefilled in other chunks must get that arm's ids. */
export const reusePrefillCheck: ReuseCheck<"reuse_prefill"> = {
  kind: "reuse",
  name: "reuse_prefill",
  needs: ["cachedGreedy"],
  level: ({ context }) => (context.arm.prefill_reference === undefined ? undefined : "required"),
  async run(state, gate) {
    const { context } = state;
    const outcome = prefillOutcome(context);
    const detail = outcome.status === "skip" ? outcome.reason : outcome.summary;
    state.lines.push(`  prefill${outcome.status === "skip" ? " SKIPPED" : ""}: ${detail}`);
    await context.emit({ kind: "cells", cells: [makeCell(context, "reuse_prefill", gate, { status: outcome.status, detail })] });
    return outcome;
  },
};

/** This arm's answers against its prefill reference's. */
function prefillOutcome(context: ReuseArmContext): CheckOutcome {
  const reference = context.arm.prefill_reference!;
  if (context.referenceAnswers === undefined) return { status: "skip", reason: `the reference arm "${reference}" did not run before this one in this run (run both: --arm "${reference}" --arm "${context.arm.label}")` };
  const { compared, differences } = compareWithReference(context.answers, context.referenceAnswers);
  if (compared === 0) return { status: "skip", reason: `no final prompt was asked by both this arm and "${reference}"` };
  const first = differences[0];
  return {
    status: differences.length === 0 ? "pass" : "fail",
    summary: `${compared - differences.length}/${compared} prompts answered as "${reference}" answers them (ubatch ${context.units.ubatch})${first === undefined ? "" : `; FAIL: ${first.label} ${first.which} answer diverges at generated position ${first.position}: reference ${first.referenceId ?? "(ended)"}, here ${first.observedId ?? "(ended)"}${differences.length > 1 ? ` (and ${differences.length - 1} more)` : ""}; reproduce: ${context.reproduce} --arm "${reference}"`}`,
    metrics: { compared, differing: differences.length, ubatch: context.units.ubatch },
  };
}
