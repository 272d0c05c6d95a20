import type { DistributionBounds } from "../suites/parity-suite.js";
import type { TeacherForcedAccuracy } from "./teacher-forced.js";

export const DISTRIBUTION_BOUND_KEYS = ["max_kld_mean", "max_kld_p99", "max_rms_delta_p", "min_same_top", "min_top1"] as const satisfies readonly (keyof DistributionBounds)[];

/** One bound held against its measured value: `value` null when the data could not give it (no position scored). Named `max_…` or `min_…`. */
export interface BoundResult<Bound extends string = keyof DistributionBounds> {
  readonly bound: Bound;
  readonly limit: number;
  readonly value: number | null;
  readonly ok: boolean;
}

/** The measured value each bound is held to. */
function measured(accuracy: TeacherForcedAccuracy, bound: keyof DistributionBounds): number | null {
  switch (bound) {
    case "max_kld_mean": return accuracy.kldTopK?.mean ?? null;
    case "max_kld_p99": return accuracy.kldTopK?.p99 ?? null;
    case "max_rms_delta_p": return Number.isNaN(accuracy.rmsDeltaP) ? null : accuracy.rmsDeltaP;
    case "min_same_top": return accuracy.positions === 0 ? null : accuracy.sameTop.p;
    case "min_top1": return accuracy.positions === 0 ? null : accuracy.top1.p;
  }
}

/**
 * Every bound given, held to its measured value. A value the data cannot give (no position, no
 * next token in the oracle's top-K) fails its bound: a bound that could not be tested is not met.
 */
export function holdToBounds(accuracy: TeacherForcedAccuracy, bounds: DistributionBounds): BoundResult[] {
  return DISTRIBUTION_BOUND_KEYS.filter((bound) => bounds[bound] !== undefined).map((bound) => {
    const limit = bounds[bound]!;
    const value = measured(accuracy, bound);
    const ok = value !== null && Number.isFinite(value) && (bound.startsWith("max_") ? value <= limit : value >= limit);
    return { bound, limit, value, ok };
  });
}

/** `kld mean 3.66e-6 ≤ 2.5e-5` or `FAIL kld mean 1.12e-1 > 1e-6`, for a summary line. */
export function describeBound(result: BoundResult<string>): string {
  const name = result.bound.replace(/^(max|min)_/, "").replaceAll("_", " ");
  // Upper bounds are small and span decades (KLD, RMS Δp): exponents; lower bounds are fractions near 1.
  const upper = result.bound.startsWith("max_");
  const value = result.value === null ? "n/a" : upper ? result.value.toExponential(2) : result.value.toFixed(4);
  const limit = upper ? result.limit.toExponential() : String(result.limit);
  const comparison = result.value === null ? "(cannot be measured), bound" : upper ? (result.ok ? "≤" : ">") : (result.ok ? "≥" : "<");
  return `${result.ok ? "" : "FAIL "}${name} ${value} ${comparison} ${limit}`;
}
