import { countersDisagree, efficacyOutcome } from "../../../reuse/efficacy.js";
import { makeCell } from "../../check.js";
import type { ReuseCheck } from "./reuse-arm-state.js";

/** What the server says it reused against what was reusable; required where the arm declares `expect_reuse`. After reuse, whose measurements it reads. */
export const reuseEfficacyCheck: ReuseCheck<"reuse_efficacy"> = {
  kind: "reuse",
  name: "reuse_efficacy",
  needs: ["cachedGreedy"],
  level: ({ context }) => (context.arm.expect_reuse === undefined ? "informational" : "required"),
  async run(state, gate) {
    const { context } = state;
    const countersAfter = await context.sut.promptCounters?.().catch(() => undefined);
    const outcome = efficacyOutcome(state.measurements, context.arm.expect_reuse, countersDisagree(state.countersBefore, countersAfter));
    const detail = outcome.status === "skip" ? outcome.reason : outcome.summary;
    state.lines.push(`  efficacy${outcome.status === "skip" ? " SKIPPED" : ""}: ${detail}`);
    await context.emit({ kind: "cells", cells: [makeCell(context, "reuse_efficacy", gate, { status: outcome.status, detail })] });
    return outcome;
  },
};
