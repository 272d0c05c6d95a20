/**
 * How far a caught fault sits beyond the distribution bound that caught it. A catch a few percent
 * over its bound may not hold on another CPU (log-probs move between instruction-set variants), so
 * a catch within WARN_WITHIN of its bound is flagged.
 */
import type { GateVerdict } from "../../harness/results/types.js";

/** A catch less than 25% beyond its bound is a warning. */
export const WARN_WITHIN = 0.25;

export interface Margin {
  /** The bound, e.g. max_rms_delta_p. */
  readonly bound: string;
  /** measured / bound for a max_* bound; (1 − measured) / (1 − bound) for a min_* bound (misses over allowed misses). */
  readonly ratio: number;
  readonly warning: boolean;
}

/**
 * How much of a bound a measurement takes: measured / bound for a max_* bound, misses over allowed
 * misses, (1 − measured) / (1 − bound), for a min_* bound; NaN for a name that is neither. Over 1
 * fails the bound.
 */
export function boundRatio(bound: string, limit: number, measured: number): number {
  return bound.startsWith("max_") ? measured / limit : bound.startsWith("min_") ? (1 - measured) / (1 - limit) : Number.NaN;
}

/** The widest margin among the distribution verdict's failed bounds (the one most likely to hold elsewhere); undefined when no bound failed. */
export function distributionMargin(verdict: GateVerdict | undefined): Margin | undefined {
  if (verdict === undefined || verdict.status !== "fail") return undefined;
  let widest: Margin | undefined;
  for (const [bound, limit] of Object.entries(verdict.metrics)) {
    const measured = verdict.metrics[`${bound}_measured`];
    if (typeof limit !== "number" || typeof measured !== "number") continue;
    const ratio = boundRatio(bound, limit, measured);
    if (!(ratio > 1)) continue;
    if (widest === undefined || ratio > widest.ratio) widest = { bound, ratio, warning: ratio < 1 + WARN_WITHIN };
  }
  return widest;
}

export function formatMargin(margin: Margin | undefined): string {
  if (margin === undefined) return "—";
  const text = `${margin.ratio < 10 ? margin.ratio.toFixed(2) : margin.ratio.toPrecision(2)}× ${margin.bound}`;
  return margin.warning ? `⚠ ${text} (within ${WARN_WITHIN * 100}% of the bound)` : text;
}
