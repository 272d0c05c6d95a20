import { KLD_RESOLUTION_NATS } from "../accuracy/kld.js";
import { DEFAULT_PERF_TOLERANCE, type Better } from "../gates/baseline.js";
import { caseNameOfLine } from "../kernels/score.js";
import type { StoredRun } from "../results/read-run.js";
import { isKernelCheck } from "../results/kernel-checks.js";
import type { GateVerdict } from "../results/types.js";

/** Parity gaps are whole milli-nats (docs/metrics.md): a smaller one is no gap. */
const GAP_RESOLUTION_NATS = 1e-3;

/**
 * The kinds of quantity a history tracks, one trend chart each. `tolerance` is the relative band
 * around the first run on a machine when no baseline gives one (0: any change is a change — counts
 * and bytes are exact). `resolution`: a value smaller than this in magnitude is zero, and a band is
 * never narrower than it — below it a change is rounding, not a change (0: every digit counts).
 */
export const QUANTITY_KINDS = {
  batch1_tokens_per_second: { title: "Batch-1 speed per SUT arm", unit: "tok/s", better: "higher", tolerance: DEFAULT_PERF_TOLERANCE, resolution: 0 },
  load_output_tokens_per_second: { title: "Load points: output throughput", unit: "tok/s", better: "higher", tolerance: DEFAULT_PERF_TOLERANCE, resolution: 0 },
  load_ttft_p99_ms: { title: "Load points: TTFT p99", unit: "ms", better: "lower", tolerance: DEFAULT_PERF_TOLERANCE, resolution: 0 },
  load_tpot_p99_ms: { title: "Load points: TPOT p99", unit: "ms", better: "lower", tolerance: DEFAULT_PERF_TOLERANCE, resolution: 0 },
  parity_strict: { title: "Parity: STRICT prompts per arm", unit: "prompts", better: "higher", tolerance: 0, resolution: 0 },
  parity_max_gap_nats: { title: "Parity: max gap per arm", unit: "nats", better: "lower", tolerance: DEFAULT_PERF_TOLERANCE, resolution: GAP_RESOLUTION_NATS },
  teacher_forced_kld_mean: { title: "Teacher-forced KLD (oracle's top-K support, tail bounded), mean per position", unit: "nats", better: "lower", tolerance: DEFAULT_PERF_TOLERANCE, resolution: KLD_RESOLUTION_NATS },
  needle_y: { title: "Needle grid: Y cells", unit: "cells", better: "higher", tolerance: 0, resolution: 0 },
  kernel_worst_ratio: { title: "Kernels: worst error as a fraction of its bound, per op", unit: "ratio to bound", better: "lower", tolerance: DEFAULT_PERF_TOLERANCE, resolution: 0 },
  kernel_us_per_call: { title: "Kernels: median time per call", unit: "µs/call", better: "lower", tolerance: DEFAULT_PERF_TOLERANCE, resolution: 0 },
  trace_demand_bytes: { title: "Trace-region demand per capture", unit: "bytes", better: "lower", tolerance: 0, resolution: 0 },
  peak_memory_bytes: { title: "Peak memory per model (SUT arm) and device, every group together", unit: "bytes", better: "lower", tolerance: 0, resolution: 0 },
} as const satisfies Record<string, { title: string; unit: string; better: Better; tolerance: number; resolution: number }>;

export type QuantityKind = keyof typeof QUANTITY_KINDS;

/** A value as the report compares it: one below its kind's resolution is zero. */
export function resolvedValue(kind: QuantityKind, value: number): number {
  return Math.abs(value) < QUANTITY_KINDS[kind].resolution ? 0 : value;
}

/** One number a run offers to a trend. `subject` is what it is about (suite/arm, a load point, a kernel case, a capture). */
export interface TrackedQuantity {
  readonly kind: QuantityKind;
  readonly subject: string;
  readonly value: number;
}

/** Keyed the way `bench gate`'s baseline keys the same number, where it has one. */
export function quantityKey(q: Pick<TrackedQuantity, "kind" | "subject">): string {
  const suffix: Record<QuantityKind, string> = {
    batch1_tokens_per_second: "tokens_per_second", load_output_tokens_per_second: "output_tokens_per_second", load_ttft_p99_ms: "ttft_p99_ms", load_tpot_p99_ms: "tpot_p99_ms",
    parity_strict: "strict", parity_max_gap_nats: "max_gap_nats", teacher_forced_kld_mean: "kld_topk_mean", needle_y: "needle_y",
    kernel_worst_ratio: "worst_ratio", kernel_us_per_call: "us_per_call", trace_demand_bytes: "demand_bytes",
    peak_memory_bytes: "peak_bytes",
  };
  return `${q.subject}/${suffix[q.kind]}`;
}

/** A finite number from a verdict's metrics, or undefined: runs from other harness versions may lack a field or hold null. */
function metric(v: GateVerdict, name: string): number | undefined {
  if (v.status !== "pass" && v.status !== "fail") return undefined;
  const value = v.metrics[name];
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/**
 * Every tracked quantity of one run, read defensively from summary.json and cells.arrow: a field
 * that is absent, null or not a finite number is left out (the trend shows a gap), never zero; one
 * below its kind's resolution is zero.
 */
export function quantitiesOfRun(run: StoredRun): TrackedQuantity[] {
  const out: TrackedQuantity[] = [];
  const add = (kind: QuantityKind, subject: string, value: number | undefined) => {
    if (value !== undefined && Number.isFinite(value)) out.push({ kind, subject, value: resolvedValue(kind, value) });
  };
  for (const v of run.summary.verdicts) {
    const subject = `${v.suite}/${v.arm}`;
    if (v.check === "greedy_parity") {
      add("batch1_tokens_per_second", subject, metric(v, "tokens_per_second"));
      add("parity_strict", subject, metric(v, "strict"));
      const gap = metric(v, "max_gap_mnats");
      add("parity_max_gap_nats", subject, gap === undefined ? undefined : gap / 1000);
    } else if (v.check === "teacher_forced") {
      add("teacher_forced_kld_mean", subject, metric(v, "kld_topk_mean"));
    } else if (v.check === "niah") {
      add("needle_y", subject, metric(v, "y"));
    } else if (v.check === "load") {
      add("load_output_tokens_per_second", subject, metric(v, "output_tokens_per_second"));
      add("load_ttft_p99_ms", subject, metric(v, "ttft_p99_ms"));
      add("load_tpot_p99_ms", subject, metric(v, "tpot_p99_ms"));
    }
  }
  const worstRatio = new Map<string, number>();
  for (const c of run.cells) {
    if (!isKernelCheck(c.check) || c.check === "kernel_time") continue;
    const subject = `${c.suite}/${c.arm}/${c.check}`;
    if (typeof c.kernel_ratio === "number" && Number.isFinite(c.kernel_ratio)) worstRatio.set(subject, Math.max(worstRatio.get(subject) ?? 0, c.kernel_ratio));
    if (typeof c.kernel_us_median === "number") add("kernel_us_per_call", `${c.suite}/${c.arm}/${caseNameOfLine(c.detail)}`, c.kernel_us_median);
  }
  for (const [subject, ratio] of worstRatio) add("kernel_worst_ratio", subject, ratio);
  for (const t of run.summary.trace ?? []) add("trace_demand_bytes", `${t.suite}/${t.arm}/${t.capture}`, t.demand_bytes);
  for (const [subject, peak] of peakMemory(run)) add("peak_memory_bytes", subject, peak);
  return out;
}

/**
 * Each arm's peak memory per device (suite/arm/device), its reported groups added up; an arm that
 * reported no group's peak on a device has no value there (a gap, not a zero).
 */
export function peakMemory(run: Pick<StoredRun, "summary">): Map<string, number> {
  const peaks = new Map<string, number>();
  for (const m of run.summary.memory ?? []) {
    if (m.peak_bytes === null) continue;
    const subject = `${m.suite}/${m.arm}/${m.device}`;
    peaks.set(subject, (peaks.get(subject) ?? 0) + m.peak_bytes);
  }
  return peaks;
}
