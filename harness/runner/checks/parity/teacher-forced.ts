import type { CheckOutcome } from "../../check.js";
import { goldensLackLogprobs, logprobCheckLevel, rejectedClause, type ParityCheck } from "./parity-arm-state.js";

/** Teacher-forced top-1 accuracy below this fails the teacher_forced check (tt-metal gates on top-1/top-5). */
export const DEFAULT_MIN_TOP1 = 0.9;

/** The SUT's top-k along the goldens' own continuation: top-1/top-5 agreement, KLD over the oracle's top-k, Δp. */
export const teacherForcedCheck: ParityCheck<"teacher_forced"> = {
  kind: "parity",
  name: "teacher_forced",
  needs: ["teacherForcedTopK"],
  level: ({ context }) => logprobCheckLevel(context.goldens, context.suite.checks.teacher_forced),
  async run(state, gate): Promise<CheckOutcome> {
    const { arm, goldens, prompts } = state.context;
    const missing = goldensLackLogprobs(goldens);
    if (missing !== undefined) return state.skip("teacher_forced", gate, missing);
    const { scored, rows, oracle, accuracy, broken } = await state.scoreTeacherForcedOnce();
    await state.record([...scored.flatMap((p, i) => rows[i].map((row, t) => state.cell("teacher_forced", gate, {
      prompt: p, position: t, status: row.ids[0] === oracle[i][t].ids[0] ? "pass" : "fail",
      expected_id: oracle[i][t].ids[0], observed_id: row.ids[0],
      detail: oracle[i][t].ids.slice(0, 5).includes(row.ids[0]) ? "in reference top-5" : "outside reference top-5",
    }))), ...state.brokenCells("teacher_forced", gate, "teacher-forced top-k", broken)]);
    const rejected = rejectedClause(broken, prompts.length);
    if (scored.length === 0) {
      return { status: "fail", summary: `${arm.label} teacher-forced: no prompt could be scored${rejected}`, metrics: { positions: 0, rejected: broken.length, min_top1: DEFAULT_MIN_TOP1 } };
    }
    const kld = accuracy.kldTopK;
    const summary = `${arm.label} teacher-forced: top-1 ${(accuracy.top1.p * 100).toFixed(2)}%, top-5 ${(accuracy.top5.p * 100).toFixed(2)}% over ${accuracy.positions} positions; ` +
      `KLD (top-${goldens.manifest.K} support, tail bounded) mean ${kld?.mean.toExponential(3)} ± ${kld?.stderr?.toExponential(2) ?? "n/a"}; RMS Δp ${(accuracy.rmsDeltaP * 100).toFixed(3)}%${rejected}`;
    return {
      status: broken.length === 0 && accuracy.top1.p >= DEFAULT_MIN_TOP1 ? "pass" : "fail",
      summary,
      metrics: {
        positions: accuracy.positions, top1: accuracy.top1.p, top1_stderr: accuracy.top1.stderr ?? null, top5: accuracy.top5.p,
        same_top: accuracy.sameTop.p, kld_topk_mean: kld?.mean ?? null, kld_topk_stderr: kld?.stderr ?? null, kld_topk_max: kld?.max ?? null,
        kld_topk_p99: kld?.p99 ?? null, kld_topk_median: kld?.median ?? null, kld_floored_terms: accuracy.kldFlooredTerms,
        delta_p_mean: accuracy.deltaP?.mean ?? null, delta_p_stderr: accuracy.deltaP?.stderr ?? null, rms_delta_p: Number.isNaN(accuracy.rmsDeltaP) ? null : accuracy.rmsDeltaP,
        min_top1: DEFAULT_MIN_TOP1, rejected: broken.length,
      },
    };
  },
};
