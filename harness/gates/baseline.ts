import { join } from "node:path";
import { assertMatchesSchema, readJsonFile } from "../io/json-schema.js";
import { PACKAGE_ROOT } from "../paths.js";
import { caseNameOfLine } from "../kernels/score.js";
import type { StoredRun } from "../results/read-run.js";
import { isKernelCheck } from "../results/kernel-checks.js";
import { machineFingerprint } from "../results/machine.js";
import { learnBand, MIN_RUNS_TO_LEARN, speedRatios, speedReferences } from "./speed-bands.js";

/** Which way a perf metric improves: throughput is better higher, latency lower. */
export type Better = "higher" | "lower";

/**
 * A two-sided band around a target: worse than the target by more than `tolerance` fails; better
 * by more than `update_beyond` (default twice the tolerance) warns "update the target".
 */
export interface PerfBand {
  readonly target: number;
  readonly tolerance: number;
  readonly update_beyond?: number;
  /** Absent: higher. */
  readonly better?: Better;
  /** How many runs on the baseline's machine the band was learned from (absent or 1: the default tolerance). */
  readonly learned_from?: number;
  /** Their largest relative distance from the median; above MAX_LEARNED_TOLERANCE / SPREAD_MULTIPLIER the speed is reported, not gated. */
  readonly spread?: number;
}

/** A speed held as a fraction of its suite's reference speed measured in the same run (gates/speed-bands.ts). */
export interface RatioBand extends PerfBand {
  /** The perf key of the reference: `<suite>/<arm>/tokens_per_second`. */
  readonly reference: string;
}

/**
 * How far a kernel case's worst ratio to its bound may grow: above
 * max(worst_ratio × (1 + tolerance), KERNEL_RATIO_FLOOR) fails. A correct kernel's ratio moves by
 * small factors when its summation order changes; half-precision accumulation moves it by 1,000×.
 */
export interface KernelRatioBand {
  readonly worst_ratio: number;
  readonly tolerance: number;
}

/** Default growth allowed before a ratio fails: ten times the baseline's. */
export const DEFAULT_KERNEL_RATIO_TOLERANCE = 9;
/** Below 1% of its bound, a ratio never fails the ratchet: a near-exact kernel's tiny ratio may grow by reordering alone. */
export const KERNEL_RATIO_FLOOR = 0.01;

/** reports/baselines/<name>.json (schema: reports/baselines/baseline.schema.json). */
export interface Baseline {
  readonly schema_version: 1;
  readonly name: string;
  readonly from_run: string;
  /**
   * Set only by `bench gate --update --accept-failing`: why the run it was taken from did not pass.
   * Every gate against such a baseline warns (fails under --strict) until a passing run replaces it.
   */
  readonly accepted_failing?: string;
  readonly parity: Readonly<Record<string, { readonly strict: number; readonly forward_divergent: number }>>;
  readonly needles: Readonly<Record<string, readonly string[]>>;
  /** Absent in baselines made before kernel suites existed. */
  readonly kernels?: Readonly<Record<string, readonly string[]>>;
  /** Per suite/arm/check/case: the case's worst ratio to its bound (absent in older baselines). */
  readonly kernel_ratios?: Readonly<Record<string, KernelRatioBand>>;
  readonly perf: Readonly<Record<string, PerfBand>>;
  /**
   * The machine fingerprint (results/machine.ts) the perf and ratio bands were measured on. Speed
   * is gated only for runs on this machine; elsewhere it is reported. Absent in older baselines:
   * their speed is reported, not gated, until re-taken.
   */
  readonly machine?: string;
  /**
   * The `bench run --jobs` its speeds were measured at: speed is gated only for runs made at the same
   * (suites measured beside another suite are slower than alone). Absent in older baselines and
   * baselines of runs that did not record it: gated whatever the run's.
   */
  readonly jobs?: number;
  /** Per suite/arm/tokens_per_second: the speed as a ratio to the suite's reference arm in the same run. */
  readonly speed_ratios?: Readonly<Record<string, RatioBand>>;
  readonly trace: Readonly<Record<string, { readonly demand_bytes: number; readonly tolerance: number }>>;
  /** Per suite/arm/device/group: the peak bytes an arm's memory check measured (absent in older baselines). */
  readonly memory?: Readonly<Record<string, MemoryBand>>;
}

/** How far a group's peak may grow against the baseline's run before the ratchet fails: above peak_bytes × (1 + tolerance). */
export interface MemoryBand {
  readonly peak_bytes: number;
  readonly tolerance: number;
}

/**
 * Default growth allowed for a group's peak. llama.cpp's buffers are the same bytes on every run of
 * one build and settings; a new llama.cpp or ggml CPU library may lay a graph out a little
 * differently (its compute buffer moves by a few percent), a leak or an extra copy by far more.
 */
export const DEFAULT_MEMORY_TOLERANCE = 0.05;

export const BASELINE_SCHEMA = join(PACKAGE_ROOT, "reports", "baselines", "baseline.schema.json");

/** Default perf band for a new baseline entry: single-sequence speed on a shared CI machine is noisy. */
export const DEFAULT_PERF_TOLERANCE = 0.5;

export function readBaseline(path: string): Baseline {
  return assertMatchesSchema<Baseline>(readJsonFile(path), BASELINE_SCHEMA, path);
}

/** The quantities a run offers to gate on, keyed as the baseline keys them. */
export interface GatedMetrics {
  readonly parity: Map<string, { strict: number; forwardDivergent: number; required: boolean }>;
  readonly needles: Map<string, string[]>;
  /** Kernel cases that passed, by their reproducible name, per suite/arm/check. */
  readonly kernels: Map<string, string[]>;
  /** Passing bounded kernel cases' worst ratio to their bound, per suite/arm/check/case. */
  readonly kernelRatios: Map<string, number>;
  readonly perf: Map<string, { readonly value: number; readonly better: Better }>;
  /** Batch-1 speeds as a fraction of their suite's reference arm in the same run. */
  readonly speedRatios: Map<string, { readonly reference: string; readonly ratio: number; readonly better: Better }>;
  readonly trace: Map<string, number>;
  /** Peak bytes per suite/arm/device/group, from arms' memory checks (a group not reported is absent). */
  readonly memory: Map<string, number>;
  /** The fingerprint of the machine the run ran on. */
  readonly machine: string;
  /** `bench run --jobs` (undefined: not recorded). */
  readonly jobs: number | undefined;
  /** What the run selected: baseline entries of suites (or arms) it did not select are out of its scope. */
  readonly scope: { readonly suites: readonly string[]; readonly arms: readonly string[] };
}

/** The load-point numbers a baseline holds: throughput, and the tails users feel. */
const LOAD_GATED: readonly (readonly [string, Better])[] = [
  ["output_tokens_per_second", "higher"],
  ["ttft_p99_ms", "lower"],
  ["tpot_p50_ms", "lower"],
];

export function gatedMetrics(run: StoredRun): GatedMetrics {
  const summary = run.summary;
  const metrics: GatedMetrics = {
    parity: new Map(), needles: new Map(), kernels: new Map(), kernelRatios: new Map(), perf: new Map(), speedRatios: new Map(), trace: new Map(), memory: new Map(),
    machine: machineFingerprint(summary.machine),
    jobs: summary.selection?.jobs,
    // The suites by the names the baseline keys them with (a selection may name a suite by its file).
    scope: { suites: summary.suites.map((s) => s.name), arms: summary.selection?.arms ?? [] },
  };
  for (const v of run.summary.verdicts) {
    if (v.status !== "pass" && v.status !== "fail") continue;
    const key = `${v.suite}/${v.arm}`;
    if (v.check === "greedy_parity") {
      metrics.parity.set(key, { strict: Number(v.metrics.strict), forwardDivergent: Number(v.metrics.forward_divergent), required: v.gate === "required" });
      if (typeof v.metrics.tokens_per_second === "number") metrics.perf.set(`${key}/tokens_per_second`, { value: v.metrics.tokens_per_second, better: "higher" });
    }
    if (isKernelCheck(v.check) && v.check !== "kernel_time") {
      const cells = run.cells.filter((c) => c.check === v.check && c.suite === v.suite && c.arm === v.arm && c.status === "pass");
      metrics.kernels.set(`${key}/${v.check}`, cells.map((c) => caseNameOfLine(c.detail)).sort());
      for (const c of cells) if (c.kernel_ratio !== null && Number.isFinite(c.kernel_ratio)) metrics.kernelRatios.set(`${key}/${v.check}/${caseNameOfLine(c.detail)}`, c.kernel_ratio);
      // Timed cases (--time): µs per call, gated by a perf band like any latency.
      for (const c of cells) if (c.kernel_us_median != null && c.kernel_us_median > 0) metrics.perf.set(`${key}/${caseNameOfLine(c.detail)}/us_per_call`, { value: c.kernel_us_median, better: "lower" });
    }
    if (v.check === "load" && v.status === "pass") {
      for (const [name, better] of LOAD_GATED) {
        const value = v.metrics[name];
        if (typeof value === "number" && value > 0) metrics.perf.set(`${key}/${name}`, { value, better });
      }
    }
    if (v.check === "niah") {
      const cells = run.cells.filter((c) => c.check === "niah" && c.suite === v.suite && c.arm === v.arm && c.prompt_class === "Y");
      metrics.needles.set(key, cells.map((c) => `${c.niah_length}:${c.niah_depth}:${c.niah_trial}`).sort());
    }
  }
  for (const t of run.summary.trace ?? []) metrics.trace.set(`${t.suite}/${t.arm}/${t.capture}`, t.demand_bytes);
  for (const m of run.summary.memory ?? []) if (m.peak_bytes !== null) metrics.memory.set(`${m.suite}/${m.arm}/${m.device}/${m.group}`, m.peak_bytes);
  for (const [key, ratio] of speedRatios(metrics.perf, speedReferences(run))) metrics.speedRatios.set(key, ratio);
  return metrics;
}

/**
 * A baseline taken from a run, keeping the tolerances of `previous` where it had them. Callers
 * check baselineRefusal first; `acceptedFailing` records why a run that did not pass was taken anyway.
 * `repeats`: more runs of the same battery on the same machine (callers check sharedFingerprint);
 * each speed's target is the median over all of them and its tolerance is learned from their spread.
 */
export function baselineFromRun(name: string, run: StoredRun, previous?: Baseline, acceptedFailing?: string, repeats: readonly StoredRun[] = []): Baseline {
  const m = gatedMetrics(run);
  const others = repeats.map(gatedMetrics);
  const learned = <T>(value: number, pick: (g: GatedMetrics) => T | undefined, number: (t: T) => number, old: PerfBand | undefined) => {
    const band = learnBand([value, ...others.flatMap((g) => { const t = pick(g); return t === undefined ? [] : [number(t)]; })]);
    // A tolerance set by hand in the baseline survives a plain --update; learning replaces it.
    const tolerance = band.learned_from < MIN_RUNS_TO_LEARN && old !== undefined ? old.tolerance : band.tolerance;
    return {
      target: band.target, tolerance, ...(old?.update_beyond === undefined ? {} : { update_beyond: old.update_beyond }),
      learned_from: band.learned_from, ...(band.spread === undefined ? {} : { spread: band.spread }),
    };
  };
  return {
    schema_version: 1,
    name,
    from_run: run.summary.run_id,
    ...(acceptedFailing === undefined ? {} : { accepted_failing: acceptedFailing }),
    parity: Object.fromEntries([...m.parity].map(([key, p]) => [key, { strict: p.strict, forward_divergent: p.forwardDivergent }])),
    needles: Object.fromEntries(m.needles),
    kernels: Object.fromEntries(m.kernels),
    kernel_ratios: Object.fromEntries([...m.kernelRatios].map(([key, ratio]) => [key, {
      worst_ratio: Number(ratio.toPrecision(3)), tolerance: previous?.kernel_ratios?.[key]?.tolerance ?? DEFAULT_KERNEL_RATIO_TOLERANCE,
    }])),
    machine: m.machine,
    ...(m.jobs === undefined ? {} : { jobs: m.jobs }),
    perf: Object.fromEntries([...m.perf].map(([key, { value, better }]) => {
      const band: PerfBand = { ...learned(value, (g) => g.perf.get(key), (p) => p.value, previous?.perf[key]), ...(better === "lower" ? { better } : {}) };
      return [key, band];
    })),
    speed_ratios: Object.fromEntries([...m.speedRatios].map(([key, { reference, ratio, better }]) => {
      const band: RatioBand = { reference, ...learned(ratio, (g) => g.speedRatios.get(key), (r) => r.ratio, previous?.speed_ratios?.[key]), ...(better === "lower" ? { better } : {}) };
      return [key, band];
    })),
    trace: Object.fromEntries([...m.trace].map(([key, bytes]) => [key, { demand_bytes: bytes, tolerance: previous?.trace[key]?.tolerance ?? 0 }])),
    memory: Object.fromEntries([...m.memory].map(([key, bytes]) => [key, { peak_bytes: bytes, tolerance: previous?.memory?.[key]?.tolerance ?? DEFAULT_MEMORY_TOLERANCE }])),
  };
}
