import type { Baseline, Better } from "../gates/baseline.js";
import { perfBandEdges } from "../gates/perf-band.js";
import { QUANTITY_KINDS, quantityKey, type QuantityKind } from "./quantities.js";

/** Where a value counts as unchanged: [low, high], an open side null. */
export interface Band {
  readonly low: number | null;
  readonly high: number | null;
  /** "baseline" (bench gate's), or the run id whose value the kind's default tolerance was taken around. */
  readonly source: string;
}

export type BandState = "below" | "within" | "above";

export function bandState(value: number, band: Band): BandState {
  if (band.low !== null && value < band.low) return "below";
  if (band.high !== null && value > band.high) return "above";
  return "within";
}

/** Whether leaving the band this way is a regression: below is worse where higher is better, and above where lower is. */
export function isWorse(state: BandState, better: Better): boolean {
  return state === (better === "higher" ? "below" : "above");
}

/**
 * The band bench gate holds this quantity to, or undefined where the baseline has none: perf bands
 * two-sided (fail edge and "update the target" edge), parity STRICT and needle Y as floors (the
 * ratchets), trace demand and an arm's peak memory (its groups' limits added up) as ceilings. Fields other helpers may add to a baseline are read only
 * where they share the perf band's shape.
 */
export function baselineBand(kind: QuantityKind, subject: string, baseline: Baseline): Band | undefined {
  const better = QUANTITY_KINDS[kind].better;
  if (kind === "parity_strict") {
    const entry = baseline.parity[subject];
    return entry === undefined ? undefined : { low: entry.strict, high: null, source: "baseline" };
  }
  if (kind === "needle_y") {
    const entry = baseline.needles[subject];
    return entry === undefined ? undefined : { low: entry.length, high: null, source: "baseline" };
  }
  if (kind === "trace_demand_bytes") {
    const entry = baseline.trace[subject];
    return entry === undefined ? undefined : { low: null, high: entry.demand_bytes * (1 + entry.tolerance), source: "baseline" };
  }
  if (kind === "peak_memory_bytes") {
    const groups = Object.entries(baseline.memory ?? {}).filter(([key]) => key.startsWith(`${subject}/`));
    return groups.length === 0 ? undefined : { low: null, high: groups.reduce((sum, [, g]) => sum + g.peak_bytes * (1 + g.tolerance), 0), source: "baseline" };
  }
  const band = baseline.perf[quantityKey({ kind, subject })];
  if (band === undefined || typeof band.target !== "number" || typeof band.tolerance !== "number") return undefined;
  const { worst, best } = perfBandEdges(band, better);
  return better === "higher" ? { low: worst, high: best, source: "baseline" } : { low: best, high: worst, source: "baseline" };
}

/**
 * The kind's default band around a reference value (the first run on a machine), with the same
 * edges as a perf band, ordered (a negative reference must not turn the band inside out) and at
 * least the kind's resolution wide on each side, so a value that differs from the reference by
 * rounding alone stays within it.
 */
export function defaultBand(kind: QuantityKind, reference: number, referenceRun: string): Band {
  const { better, tolerance, resolution } = QUANTITY_KINDS[kind];
  const { worst, best } = perfBandEdges({ target: reference, tolerance }, better);
  return {
    low: Math.min(worst, best, reference - resolution),
    high: Math.max(worst, best, reference + resolution),
    source: referenceRun,
  };
}
