import { machineFingerprint } from "../results/machine.js";
import type { StoredRun } from "../results/read-run.js";
import { percentile } from "../stats/distribution.js";
import { DEFAULT_PERF_TOLERANCE, type Better, type GatedMetrics } from "./baseline.js";

/**
 * How a band is learned from repeated runs on one machine (docs/speed-gates.md): the tolerance is
 * SPREAD_MULTIPLIER times the largest relative distance of a run from the median, kept between
 * MIN_LEARNED_TOLERANCE (a quiet machine's runs can agree to 1%, which says nothing about next
 * week's load) and MAX_LEARNED_TOLERANCE (the schema's limit is 1: a band down to zero gates nothing).
 */
export const SPREAD_MULTIPLIER = 3;
export const MIN_LEARNED_TOLERANCE = 0.1;
export const MAX_LEARNED_TOLERANCE = 0.9;
/** Fewer runs than this give no spread worth learning from: the default tolerance is kept. */
export const MIN_RUNS_TO_LEARN = 3;

/** A band learned from n runs' values: the median as target. */
export interface LearnedBand {
  readonly target: number;
  readonly tolerance: number;
  /** How many runs gave a value (1: the default tolerance, nothing learned). */
  readonly learned_from: number;
  /** The largest relative distance of a run from the median (absent: fewer than MIN_RUNS_TO_LEARN runs). */
  readonly spread?: number;
}

/**
 * Whether runs on this machine scatter too widely for any band to tell a regression from noise:
 * the learned tolerance would exceed MAX_LEARNED_TOLERANCE. Such a speed is reported, not gated —
 * a band capped below the spread would fail passing runs, one wide enough would never fail.
 */
export function tooNoisyToGate(band: { readonly spread?: number }): boolean {
  return band.spread !== undefined && SPREAD_MULTIPLIER * band.spread > MAX_LEARNED_TOLERANCE;
}

export function learnBand(values: readonly number[]): LearnedBand {
  const median = percentile([...values].sort((a, b) => a - b), 50);
  // Four significant digits: sub-millisecond latencies must not round to 0.
  const target = Number(median.toPrecision(4));
  if (values.length < MIN_RUNS_TO_LEARN) return { target, tolerance: DEFAULT_PERF_TOLERANCE, learned_from: values.length };
  const spread = Math.max(...values.map((v) => Math.abs(v - median) / median));
  const tolerance = Math.min(MAX_LEARNED_TOLERANCE, Math.max(MIN_LEARNED_TOLERANCE, SPREAD_MULTIPLIER * spread));
  return { target, tolerance: Number(tolerance.toPrecision(2)), learned_from: values.length, spread: Number(spread.toPrecision(2)) };
}

/**
 * The speed each suite's other arms are divided by: its first arm on the embedded llama.cpp (raw
 * llama.cpp in this process, the same model family and battery). Measured in the same run, it sees
 * the same load, so the ratio cancels a busy machine out. Keyed by suite.
 */
export function speedReferences(run: StoredRun): Map<string, string> {
  const references = new Map<string, string>();
  for (const sut of run.summary.suts) {
    if (sut.provenance.kind !== "llamacpp" || references.has(sut.suite)) continue;
    const key = `${sut.suite}/${sut.arm}/tokens_per_second`;
    if (run.summary.verdicts.some((v) => v.suite === sut.suite && v.arm === sut.arm && v.check === "greedy_parity" && v.status !== "skip" && v.status !== "error" && typeof v.metrics.tokens_per_second === "number")) {
      references.set(sut.suite, key);
    }
  }
  return references;
}

/** A batch-1 speed as a fraction of its suite's reference in the same run, for every arm but the reference. */
export function speedRatios(perf: GatedMetrics["perf"], references: ReadonlyMap<string, string>): Map<string, { readonly reference: string; readonly ratio: number; readonly better: Better }> {
  const ratios = new Map<string, { reference: string; ratio: number; better: Better }>();
  for (const [key, { value, better }] of perf) {
    const reference = references.get(key.split("/")[0]);
    const base = reference === undefined ? undefined : perf.get(reference);
    if (reference === undefined || base === undefined || reference === key || !key.endsWith("/tokens_per_second")) continue;
    ratios.set(key, { reference, ratio: value / base.value, better });
  }
  return ratios;
}

/** The fingerprint shared by every run a baseline's speed is learned from; undefined when they differ. */
export function sharedFingerprint(runs: readonly StoredRun[]): string | undefined {
  const prints = new Set(runs.map((r) => machineFingerprint(r.summary.machine)));
  return prints.size === 1 ? [...prints][0] : undefined;
}
