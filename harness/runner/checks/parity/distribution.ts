import { describeBound, holdToBounds } from "../../../accuracy/distribution-bounds.js";
import type { CpuIdentity } from "../../../cpu/cpu-identity.js";
import type { DistributionBounds, ParitySuite, SuiteArm } from "../../../suites/parity-suite.js";
import type { CheckOutcome } from "../../check.js";
import { goldensLackLogprobs, logprobCheckLevel, rejectedClause, type ParityCheck } from "./parity-arm-state.js";

/** The arm's distribution bounds: the suite's, each replaced by the arm's own where it sets one. */
function armDistributionBounds(suite: ParitySuite, arm: Pick<SuiteArm, "distribution">): DistributionBounds {
  const { gate: _level, ...suiteBounds } = suite.checks.distribution ?? { gate: "informational" };
  return { ...suiteBounds, ...arm.distribution };
}

/**
 * Where the two sides computed, said with a failed bound: log-probs differ between ggml's CPU
 * variants (docs/findings-cpu.md), so "goldens under zen4, this SUT under x64" is the first thing
 * to know about a bound that failed on a new machine.
 */
function whereComputed(goldens: CpuIdentity | undefined, sut: CpuIdentity | undefined): string {
  const side = (cpu: CpuIdentity | undefined, unknown: string) => (cpu === undefined ? unknown : `ggml ${cpu.variant} on ${cpu.model}`);
  if (goldens === undefined && sut === undefined) return "";
  return ` (goldens computed under ${side(goldens, "a CPU variant they do not record")}; this SUT ${sut === undefined ? "does not say where it computes" : `under ${side(sut, "")}`})`;
}

/** The teacher-forced pass held to the arm's distribution bounds (KLD, top-1, Δp): one cell per bound. */
export const distributionCheck: ParityCheck<"distribution"> = {
  kind: "parity",
  name: "distribution",
  needs: ["teacherForcedTopK"],
  level: ({ context }) => logprobCheckLevel(context.goldens, context.suite.checks.distribution?.gate),
  async run(state, gate): Promise<CheckOutcome> {
    const { suite, arm, goldens, prompts, sut } = state.context;
    const bounds = armDistributionBounds(suite, arm);
    const cannot = goldensLackLogprobs(goldens) ?? (Object.keys(bounds).length === 0 ? "no distribution bound is set for this arm (checks.distribution in the suite, or the arm's distribution)" : undefined);
    if (cannot !== undefined) return state.skip("distribution", gate, cannot);
    const { scored, accuracy, broken } = await state.scoreTeacherForcedOnce();
    const results = holdToBounds(accuracy, bounds);
    await state.record([
      ...results.map((r) => state.cell("distribution", gate, { status: r.ok ? "pass" : "fail", detail: describeBound(r) })),
      ...state.brokenCells("distribution", gate, "teacher-forced top-k", broken),
    ]);
    const failed = results.filter((r) => !r.ok);
    return {
      status: failed.length === 0 && broken.length === 0 && scored.length > 0 ? "pass" : "fail",
      summary: `${arm.label} distribution over ${accuracy.positions} teacher-forced positions: ${results.map(describeBound).join("; ")}${rejectedClause(broken, prompts.length)}${failed.length === 0 ? "" : whereComputed(goldens.manifest.oracle.cpu, sut.provenance.cpu)}`,
      metrics: {
        positions: accuracy.positions, failed_bounds: failed.length, rejected: broken.length,
        ...Object.fromEntries(results.flatMap((r) => [[r.bound, r.limit], [`${r.bound}_measured`, r.value]])),
      },
    };
  },
};
