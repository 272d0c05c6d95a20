import { splitNonFinite, type VerdictMetrics } from "../results/finite-metrics.js";
import type { GateVerdict } from "../results/types.js";
import type { LoadPointSummary } from "./aggregate.js";
import type { LoadPointResult } from "./run-load.js";

/** The numbers a load point must have measured to pass: its throughput and the TTFT the gate bands. */
const MEASURED: readonly string[] = ["output_tokens_per_second", "requests_per_second", "ttft_p50_ms", "ttft_p99_ms"];

/**
 * A load point's required verdict. It passes only on numbers it measured: a point that stopped on
 * its error rate, in which no request completed or no output token arrived, or whose throughput
 * or latency is missing or not finite (a zero-length measured phase divides by zero) fails with
 * the reason; a point that sent no measured request is SKIPPED. TPOT may be null (one-token
 * outputs have no inter-token time) but never NaN.
 */
export function loadPointVerdict(label: string, stoppedBy: LoadPointResult["stoppedBy"], summary: LoadPointSummary): GateVerdict {
  const base = { suite: "load", arm: label, check: "load", gate: "required" } as const;
  const failed = Object.values(summary.errors).reduce((a, b) => a + (b ?? 0), 0);
  if (stoppedBy === "error-rate") {
    return { ...base, status: "fail", summary: `stopped: ${failed}/${summary.requests} requests failed (${JSON.stringify(summary.errors)})`, metrics: {} };
  }
  if (summary.requests === 0) return { ...base, status: "skip", reason: "no measured request was sent (the point ended first): nothing to measure" };
  const measured: VerdictMetrics = {
    output_tokens_per_second: summary.outputTokensPerSecond, requests_per_second: summary.requestsPerSecond,
    ttft_p50_ms: summary.ttftMs?.median ?? null, ttft_p99_ms: summary.ttftMs?.p99 ?? null,
    tpot_p50_ms: summary.tpotMs?.median ?? null, tpot_p99_ms: summary.tpotMs?.p99 ?? null, token_count_discrepancy: summary.tokenCountDiscrepancy,
    retried_on_fresh_connection: summary.retriedOnFreshConnection,
  };
  const { nonFinite, metrics } = splitNonFinite(measured);
  const missing = MEASURED.filter((key) => metrics[key] === null && !nonFinite.some((line) => line.startsWith(`${key} = `)));
  const problems = [
    ...(summary.completed === 0 ? [`0/${summary.requests} requests completed${failed > 0 ? ` (${JSON.stringify(summary.errors)})` : ""}`] : []),
    ...(summary.completed > 0 && summary.outputTokensPerSecond === 0 ? ["0 output tokens arrived"] : []),
    ...(nonFinite.length > 0 ? [`non-finite ${nonFinite.join(", ")}`] : []),
    ...(missing.length > 0 && summary.completed > 0 ? [`no ${missing.join(", ")}`] : []),
  ];
  const shown = (v: number | null | string | undefined, digits = 1) => (typeof v === "number" ? v.toFixed(digits) : "–");
  const line = `${shown(metrics.output_tokens_per_second)} output tok/s, TTFT p50 ${shown(metrics.ttft_p50_ms)} ms`;
  if (problems.length > 0) return { ...base, status: "fail", summary: `${line}; FAIL: ${problems.join("; ")}`, metrics };
  return { ...base, status: "pass", summary: line, metrics };
}
