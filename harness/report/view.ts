import { bytesText } from "../budget/format.js";
import type { LoadPointRecord, MemoryRecord, StoredRun, TraceDemand } from "../results/read-run.js";
import { isKernelCheck } from "../results/kernel-checks.js";
import type { GateVerdict } from "../results/types.js";
import { describeMachine } from "../results/machine.js";
import { legLines } from "../results/legs.js";
import { conformanceMatrix, dialectRows, type ConformanceMatrix, type DialectRow } from "./servers.js";

/** What the report shows of one run, extracted once; the renderers only format it. */
export interface ParityRow {
  readonly suite: string;
  readonly arm: string;
  readonly model: string;
  readonly gate: string;
  readonly status: string;
  readonly summary: string;
  readonly strict: number | null;
  readonly nearTie: number | null;
  readonly forwardDivergent: number | null;
  readonly maxGapMnats: number | null;
  readonly msPerToken: number | null;
  readonly tokensPerSecond: number | null;
  readonly bandMnats: number | null;
  /** Gaps of every divergent cell, in milli-nats (the histogram's data). */
  readonly gapsMnats: readonly number[];
}

export interface NeedleRow {
  readonly suite: string;
  readonly arm: string;
  readonly gate: string;
  readonly status: string;
  readonly grid: readonly (readonly [number, number, string])[];
}

/** One bench load point as the report shows it. */
export interface LoadRow {
  readonly label: string;
  /** Concurrency (closed loop) or rate (open loop): the x of throughput-versus-load. */
  readonly x: number;
  readonly kind: "closed" | "open";
  readonly outputTokensPerSecond: number;
  readonly tokensPerSecondPerUser: number | null;
  readonly ttft: { readonly p50: number; readonly p90: number; readonly p99: number } | null;
  readonly tpot: { readonly p50: number; readonly p90: number; readonly p99: number } | null;
  readonly errors: number;
  /** The client's event-loop utilization during the point (near 1: the client may have been the limit). */
  readonly clientBusy: number | null;
  /** MLPerf-style validity under the run's --slo; null without one. */
  readonly slo: "VALID" | "INVALID" | null;
  /** Every measured request's TTFT, ascending (the CDF's data). */
  readonly ttftSortedMs: readonly number[];
}

export interface RunView {
  readonly runId: string;
  readonly machine: string;
  readonly started: string;
  readonly exitCode: number | null;
  readonly parity: readonly ParityRow[];
  readonly needles: readonly NeedleRow[];
  readonly trace: readonly TraceDemand[];
  /** What arms' memory checks measured, per device and group, beside their budgets. */
  readonly memory: readonly MemoryRecord[];
  readonly load: readonly LoadRow[];
  /** Kernel cases (kernel suites), one reproducible line each, with their ratio and timing. */
  readonly kernels: readonly KernelRow[];
  /** Copy bandwidth each timed kernel arm was measured against (GB/s): the roofline's memory roof. */
  readonly copyBandwidth: readonly { readonly arm: string; readonly gbps: number }[];
  /** Box resets and failure evidence, one line each (docs/quietbox.md, "Running on a QuietBox"). */
  readonly box: readonly string[];
  /** Conformance checks × server arms. */
  readonly conformance: ConformanceMatrix;
  /** HTTP arms and the dialect probing found for each capability. */
  readonly dialects: readonly DialectRow[];
}

export interface KernelRow {
  readonly arm: string;
  readonly status: string;
  readonly line: string;
  readonly ratio: number | null;
  readonly usMedian: number | null;
  readonly usP10: number | null;
  readonly usP90: number | null;
  readonly inPluginUsMedian: number | null;
  readonly gbps: number | null;
  readonly gflops: number | null;
  readonly bandwidthFraction: number | null;
}

const number = (v: GateVerdict, key: string): number | null => {
  if (v.status !== "pass" && v.status !== "fail") return null;
  const value = v.metrics[key];
  return typeof value === "number" ? value : null;
};

export function viewOfRun(run: StoredRun): RunView {
  const { summary } = run;
  const modelOf = (suite: string, arm: string): string => {
    const provenance = summary.suts.find((s) => s.suite === suite && s.arm === arm)?.provenance;
    const path = typeof provenance?.modelPath === "string" ? provenance.modelPath : "";
    return path.split("/").pop()?.replace(/\.gguf$/, "") ?? "";
  };
  const parity = summary.verdicts.filter((v) => v.check === "greedy_parity").map((v) => ({
    suite: v.suite,
    arm: v.arm,
    model: modelOf(v.suite, v.arm),
    gate: v.gate,
    status: v.status,
    summary: "summary" in v ? v.summary : v.reason,
    strict: number(v, "strict"),
    nearTie: number(v, "near_tie"),
    forwardDivergent: number(v, "forward_divergent"),
    maxGapMnats: number(v, "max_gap_mnats"),
    msPerToken: number(v, "ms_per_token"),
    tokensPerSecond: number(v, "tokens_per_second"),
    bandMnats: number(v, "band_mnats"),
    gapsMnats: run.cells.filter((c) => c.check === "greedy_parity" && c.suite === v.suite && c.arm === v.arm && (c.gap_mnats ?? 0) > 0).map((c) => c.gap_mnats!),
  }));
  const needles = summary.verdicts.filter((v) => v.check === "niah").map((v) => ({
    suite: v.suite,
    arm: v.arm,
    gate: v.gate,
    status: v.status,
    grid: v.status === "pass" || v.status === "fail" ? (JSON.parse(String(v.metrics.grid ?? "[]")) as [number, number, string][]) : [],
  }));
  return {
    runId: summary.run_id,
    machine: describeMachine(summary.machine),
    started: summary.started,
    exitCode: summary.exit_code,
    parity,
    needles,
    trace: summary.trace ?? [],
    memory: summary.memory ?? [],
    box: legLines(summary.legs ?? []),
    kernels: run.cells.filter((c) => isKernelCheck(c.check) && c.check !== "kernel_time").map((c) => ({
      arm: c.arm, status: c.status, line: c.detail, ratio: c.kernel_ratio ?? null,
      usMedian: c.kernel_us_median ?? null, usP10: c.kernel_us_p10 ?? null, usP90: c.kernel_us_p90 ?? null, inPluginUsMedian: c.kernel_in_plugin_us_median ?? null,
      gbps: c.kernel_gbps ?? null, gflops: c.kernel_gflops ?? null, bandwidthFraction: c.kernel_bandwidth_fraction ?? null,
    })),
    copyBandwidth: summary.verdicts.filter((v) => v.check === "kernel_time").flatMap((v) => {
      const gbps = number(v, "copy_bandwidth_gbps");
      return gbps === null ? [] : [{ arm: v.arm, gbps }];
    }),
    conformance: conformanceMatrix(run),
    dialects: dialectRows(run),
    load: (summary.load ?? []).map((point) => loadRow(point, run.samples.filter((s) => s.point === point.label && s.ttft_ms !== null).map((s) => s.ttft_ms!).sort((a, b) => a - b))),
  };
}

function loadRow(point: LoadPointRecord, ttftSortedMs: number[]): LoadRow {
  const percentiles = (d: { median: number; p90: number; p99: number } | undefined) => (d === undefined ? null : { p50: d.median, p90: d.p90, p99: d.p99 });
  return {
    label: point.label,
    x: point.mode.kind === "closed" ? point.mode.concurrency : point.mode.rate,
    kind: point.mode.kind,
    outputTokensPerSecond: point.summary.outputTokensPerSecond,
    tokensPerSecondPerUser: point.summary.tokensPerSecondPerUser ?? null,
    ttft: percentiles(point.summary.ttftMs),
    tpot: percentiles(point.summary.tpotMs),
    errors: Object.values(point.summary.errors).reduce((a, b) => a + b, 0),
    clientBusy: point.client?.eventLoopUtilization ?? null,
    slo: point.summary.validity == null ? null : point.summary.validity.valid ? "VALID" : "INVALID",
    ttftSortedMs,
  };
}

/** The kernel cases table, the same in Markdown and HTML; timing columns when any case was timed (the roofline column last). */
export function kernelTable(kernels: RunView["kernels"]): { headers: string[]; rows: string[][] } {
  const timed = kernels.some((k) => k.usMedian !== null);
  const p = (x: number | null, digits = 3) => (x === null ? "–" : x.toPrecision(digits));
  const caseOf = (k: KernelRow) => (timed ? k.line.replace(/; [\d.e+]+ µs\/call .*$/, "") : k.line);
  return {
    headers: ["SUT arm", "verdict", "case", "ratio to bound", ...(timed ? ["µs/call median (p10–p90)", "in-plugin µs", "GB/s", "GFLOP/s", "of copy bandwidth"] : [])],
    rows: kernels.map((k) => [k.arm, k.status.toUpperCase(), caseOf(k), k.ratio === null ? (k.status === "pass" ? "bit-exact" : "–") : p(k.ratio),
      ...(timed ? [k.usMedian === null ? "–" : `${p(k.usMedian, 4)} (${p(k.usP10, 4)}–${p(k.usP90, 4)})`, p(k.inPluginUsMedian, 4), p(k.gbps), p(k.gflops), k.bandwidthFraction === null ? "–" : `${(100 * k.bandwidthFraction).toPrecision(3)}%`] : [])]),
  };
}

/** The aggregate load table, the same in Markdown and HTML. */
export function loadTable(load: readonly LoadRow[]): { headers: string[]; rows: string[][] } {
  const fixed = (value: number | null, digits: number) => (value === null ? "–" : value.toFixed(digits));
  const pair = (d: LoadRow["ttft"], digits: number) => (d === null ? "–" : `${d.p50.toFixed(digits)} / ${d.p99.toFixed(digits)}`);
  return {
    headers: ["load", "output tok/s", "scaling vs first point", "tok/s/user", "TTFT p50 / p99 (ms)", "TPOT p50 / p99 (ms)", "errors", "client busy", "SLO p99"],
    rows: load.map((l) => [
      l.label, fixed(l.outputTokensPerSecond, 1), `${(l.outputTokensPerSecond / load[0].outputTokensPerSecond).toFixed(2)}×`, fixed(l.tokensPerSecondPerUser, 1),
      pair(l.ttft, 1), pair(l.tpot, 2), String(l.errors), l.clientBusy === null ? "–" : `${(100 * l.clientBusy).toFixed(0)}%`, l.slo ?? "–",
    ]),
  };
}

/**
 * The memory table, the same in Markdown and HTML: per model (SUT arm), device and group, the peak
 * and steady bytes measured beside the budget's. Groups that are zero both measured and predicted
 * (no recurrent state on an attention-only model, no trace region on a CPU) are left out.
 */
export function memoryTable(memory: readonly MemoryRecord[]): { headers: string[]; rows: string[][] } {
  const held = (bytes: number | null) => (bytes === null ? "not reported" : bytesText(bytes));
  return {
    headers: ["model", "suite", "SUT arm", "device", "group", "peak", "steady", "predicted peak", "peak of predicted"],
    rows: memory.filter((m) => (m.peak_bytes ?? 0) > 0 || m.predicted_peak_bytes > 0).map((m) => [
      m.model.replace(/\.gguf$/, ""), m.suite, m.arm, m.device, m.group, held(m.peak_bytes), held(m.steady_bytes), bytesText(m.predicted_peak_bytes),
      m.peak_bytes === null || m.predicted_peak_bytes === 0 ? "–" : `${((100 * m.peak_bytes) / m.predicted_peak_bytes).toFixed(1)}%`,
    ]),
  };
}
