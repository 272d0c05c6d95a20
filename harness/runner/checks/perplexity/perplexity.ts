import { describeBound, type BoundResult } from "../../../accuracy/distribution-bounds.js";
import { boundsFromMeasured, SAME_TOP_MARGIN, UPPER_MARGIN } from "../../../perplexity/derived-bounds.js";
import { corpusStatistics, scorePosition, type CorpusStatistics, type PositionScore } from "../../../perplexity/statistics.js";
import type { PerplexityBounds } from "../../../suites/perplexity-suite.js";
import { askTeacherForced } from "../../../sut/answer-shape.js";
import { makeCell, type CheckOutcome } from "../../check.js";
import type { PerplexityCheck } from "./perplexity-arm-state.js";

const BOUND_KEYS = ["max_abs_ln_ppl_ratio", "max_kld_mean", "max_kld_p99", "max_rms_delta_p", "min_same_top"] as const satisfies readonly (keyof PerplexityBounds)[];

/** The measured value each bound is held to. */
function measured(statistics: CorpusStatistics, bound: keyof PerplexityBounds): number {
  switch (bound) {
    case "max_abs_ln_ppl_ratio": return Math.abs(statistics.lnPplRatio.value);
    case "max_kld_mean": return statistics.kld.mean;
    case "max_kld_p99": return statistics.kld.p99;
    case "max_rms_delta_p": return statistics.rmsDeltaP.value;
    case "min_same_top": return statistics.sameTop.p;
  }
}

/** Every bound the arm sets, held to its measured value; a value that is not finite fails its bound. */
function holdToPerplexityBounds(statistics: CorpusStatistics, bounds: PerplexityBounds): BoundResult<keyof PerplexityBounds>[] {
  return BOUND_KEYS.filter((bound) => bounds[bound] !== undefined).map((bound) => {
    const limit = bounds[bound]!;
    const value = measured(statistics, bound);
    const ok = Number.isFinite(value) && (bound.startsWith("max_") ? value <= limit : value >= limit);
    return { bound, limit, value, ok };
  });
}

const estimate = (value: number, stderr: number | undefined, digits: number) => `${value.toFixed(digits)} ± ${stderr === undefined ? "n/a" : stderr.toFixed(digits)}`;
/** A PPL as llama-perplexity prints it (4 decimals), but for one too large for those decimals to mean anything (a random-weight fixture's, 4e13): 7 significant digits. */
const pplText = (ppl: number | undefined) => (ppl === undefined ? "n/a" : ppl < 1e6 ? ppl.toFixed(4) : ppl.toExponential(6));

/** The statistics in llama-perplexity's words, for a summary line. */
function describeStatistics(s: CorpusStatistics): string {
  return `PPL ${pplText(s.ppl.value)} ± ${pplText(s.ppl.stderr)} (base ${pplText(s.pplBase.value)}), ln(PPL/PPL base) ${estimate(s.lnPplRatio.value, s.lnPplRatio.stderr, 6)}, ` +
    `KLD mean ${s.kld.mean.toExponential(3)} ± ${s.kld.stderr?.toExponential(1) ?? "n/a"} median ${s.kld.median.toExponential(3)} p99 ${s.kld.p99.toExponential(3)} max ${s.kld.max.toExponential(3)}, ` +
    `RMS Δp ${estimate(100 * s.rmsDeltaP.value, s.rmsDeltaP.stderr === undefined ? undefined : 100 * s.rmsDeltaP.stderr, 3)} %, same top p ${estimate(100 * s.sameTop.p, s.sameTop.stderr === undefined ? undefined : 100 * s.sameTop.stderr, 3)} %`;
}

/** Every number of the statistics, flat, for summary.json (fractions and nats, never percentages). */
function statisticsMetrics(s: CorpusStatistics): Record<string, number | null> {
  const ladder = (prefix: string, d: CorpusStatistics["kld"]) => Object.fromEntries(
    (["mean", "stderr", "min", "p0_1", "p1", "p5", "p10", "median", "p90", "p95", "p99", "p99_9", "max"] as const).map((key) => [`${prefix}_${key}`, d[key] ?? null]));
  return {
    positions: s.positions, ppl: s.ppl.value, ppl_stderr: s.ppl.stderr ?? null, ppl_base: s.pplBase.value, ppl_base_stderr: s.pplBase.stderr ?? null,
    ln_ppl_ratio: s.lnPplRatio.value, ln_ppl_ratio_stderr: s.lnPplRatio.stderr ?? null,
    ...ladder("kld", s.kld), ...ladder("delta_p", s.deltaP),
    rms_delta_p: s.rmsDeltaP.value, rms_delta_p_stderr: s.rmsDeltaP.stderr ?? null, same_top: s.sameTop.p, same_top_stderr: s.sameTop.stderr ?? null,
  };
}

/**
 * One arm over the chunked corpus: fed the goldens' chunk ids, its whole distribution taken at each
 * scored position, its statistics against the base's, and each bound the arm sets one cell. An arm
 * with no bound still reports its statistics, SKIPPED (nothing it computed could have failed).
 */
export const perplexityCheck: PerplexityCheck<"perplexity"> = {
  kind: "perplexity",
  name: "perplexity",
  needs: ["teacherForcedTopK"],
  level: ({ context }) => context.suite.gate,
  async run({ context }, gate): Promise<CheckOutcome> {
    const { suite, arm, goldens } = context;
      const requests = goldens.chunks.map((chunk) => ({ ...chunk, k: context.vocabSize }));
      const answers = await askTeacherForced(context.sut, requests, context.vocabSize);
      const cell = (fields: Parameters<typeof makeCell>[3], selector = "") => makeCell(context, "perplexity", gate, fields, selector);
      const scores: PositionScore[] = [];
      const broken: string[] = [];
      for (const [c, answer] of answers.entries()) {
        if (!answer.ok) {
          broken.push(`chunk ${c}: ${answer.reason}`);
          continue;
        }
        answer.value.forEach((row, j) => {
          const next = goldens.chunks[c].continuationIds[j];
          const score = scorePosition(goldens.base[c][j], row, next);
          if (score === undefined) broken.push(`chunk ${c} position ${j}: the distribution omits the next token ${next}`);
          else scores.push(score);
        });
      }
      const statistics = broken.length === 0 ? corpusStatistics(scores) : undefined;
      if (statistics === undefined) {
        await context.emit({ kind: "cells", cells: broken.slice(0, 20).map((detail) => cell({ status: "fail", detail })) });
        return { status: "fail", summary: `${arm.label}: ${broken.length} chunk(s) or position(s) could not be scored (${broken[0] ?? "no position"})`, metrics: { rejected: broken.length } };
      }
      const described = `${arm.label} over ${statistics.positions} positions (${goldens.chunks.length} chunks of n_ctx ${suite.n_ctx}): ${describeStatistics(statistics)}`;
      const corpusSha256 = goldens.manifest.corpus.sha256;
      if (arm.bounds !== undefined && arm.bounds_corpus_sha256 !== undefined && arm.bounds_corpus_sha256 !== corpusSha256) {
        const names = BOUND_KEYS.filter((bound) => arm.bounds![bound] !== undefined);
        const derived = boundsFromMeasured(names, (bound) => measured(statistics, bound));
        const reason = `bounds set on another corpus (sha256 ${arm.bounds_corpus_sha256.slice(0, 12)}…; this one ${corpusSha256.slice(0, 12)}…), and a quantized arm's error moves with the text: not tested. ` +
          `measured: ${described}; the shipped rule (${UPPER_MARGIN}× each upper value, same top ${SAME_TOP_MARGIN * 100} points below) gives "bounds": ${JSON.stringify(derived)}, "bounds_corpus_sha256": "${corpusSha256}" (arms[].bounds in ${suite.path}), from this CPU variant alone: before you ship them, apply the rule to the worst of every variant (npm run variant-spread; docs/perplexity.md)`;
        await context.emit({ kind: "cells", cells: [cell({ status: "skip", detail: reason })] });
        return { status: "skip", reason };
      }
      const results = holdToPerplexityBounds(statistics, arm.bounds ?? {});
      if (results.length === 0) {
        const reason = `no bound set for this arm (arms[].bounds in ${suite.path}); measured: ${described}`;
        await context.emit({ kind: "cells", cells: [cell({ status: "skip", detail: reason })] });
        return { status: "skip", reason };
      }
      await context.emit({ kind: "cells", cells: results.map((r) => cell({ status: r.ok ? "pass" : "fail", detail: describeBound(r) })) });
      return {
        status: results.every((r) => r.ok) ? "pass" : "fail",
        summary: `${described}; ${results.map(describeBound).join("; ")}`,
        metrics: { ...statisticsMetrics(statistics), failed_bounds: results.filter((r) => !r.ok).length, ...Object.fromEntries(results.flatMap((r) => [[r.bound, r.limit], [`${r.bound}_measured`, r.value]])) },
      };
  },
};
