import { distribution, type Distribution } from "../stats/distribution.js";
import type { RequestMetrics } from "./request-metrics.js";
import type { RequestSample, RequestStatus } from "./sse-request.js";

export interface Slo {
  readonly ttftMs?: number;
  readonly tpotMs?: number;
  /** A request meets it when the p99 of its own inter-chunk gaps is at most this: no stall a reader would see, which a mean (TPOT) hides. */
  readonly interChunkP99Ms?: number;
}

/** One load point's aggregate (a perf table row): throughput over the measured wall time, latency distributions. */
export interface LoadPointSummary {
  readonly label: string;
  readonly requests: number;
  readonly completed: number;
  readonly errors: Readonly<Partial<Record<RequestStatus, number>>>;
  /** Requests sent a second time on a fresh connection because a closing keep-alive connection lost the first (each still one request above). */
  readonly retriedOnFreshConnection: number;
  readonly durationS: number;
  readonly requestsPerSecond: number;
  readonly outputTokensPerSecond: number;
  readonly totalTokensPerSecond: number;
  /** Mean over requests of 1000 / TPOT: the decode speed one user sees. */
  readonly tokensPerSecondPerUser: number | undefined;
  readonly goodputRequestsPerSecond: number | undefined;
  readonly ttftMs: Distribution | undefined;
  readonly tpotMs: Distribution | undefined;
  readonly interChunkMs: Distribution | undefined;
  readonly e2eMs: Distribution | undefined;
  readonly clientLagMs: Distribution | undefined;
  /** Σ (client-counted − server usage) output tokens; 0 when the two agree. */
  readonly tokenCountDiscrepancy: number;
  /** MLPerf-style: with an SLO, the point is VALID when every request succeeded and TTFT p99 and TPOT p99 are within it. */
  readonly validity: { readonly valid: boolean; readonly reasons: readonly string[] } | undefined;
  /** What the server's prompt cache did, where it reported cached tokens for at least one completed request. */
  readonly promptCache: PromptCacheSummary | undefined;
}

/** A point's prompt cache as the server reported it per request (usage.prompt_tokens_details.cached_tokens). */
export interface PromptCacheSummary {
  /** Prompt tokens over the completed requests that reported cached tokens. */
  readonly promptTokens: number;
  readonly cachedTokens: number;
  /** Prompt tokens the server computed: prompt − cached. */
  readonly evaluatedTokens: number;
  /** Completed requests that reused at least one token (hits), and those that reused none (misses). */
  readonly hits: number;
  readonly misses: number;
  /** Completed requests whose usage said nothing of the cache (counted in neither). */
  readonly unreported: number;
  readonly ttftHitsMs: Distribution | undefined;
  readonly ttftMissesMs: Distribution | undefined;
}

/** Pure: the prompt cache's part of a point, from the completed requests' metrics; undefined where none reported it. */
export function summarizePromptCache(ok: readonly RequestMetrics[]): PromptCacheSummary | undefined {
  const reported = ok.filter((m) => m.cachedPromptTokens !== undefined && m.promptTokens !== undefined);
  if (reported.length === 0) return undefined;
  const promptTokens = reported.reduce((sum, m) => sum + m.promptTokens!, 0);
  const cachedTokens = reported.reduce((sum, m) => sum + m.cachedPromptTokens!, 0);
  const hits = reported.filter((m) => m.cachedPromptTokens! > 0);
  const misses = reported.filter((m) => m.cachedPromptTokens === 0);
  return {
    promptTokens, cachedTokens, evaluatedTokens: promptTokens - cachedTokens, hits: hits.length, misses: misses.length, unreported: ok.length - reported.length,
    ttftHitsMs: distribution(hits.map((m) => m.ttftMs)), ttftMissesMs: distribution(misses.map((m) => m.ttftMs)),
  };
}

/** Pure: the reasons a point misses the SLO's p99 bounds (MLPerf's server-scenario latency constraint); none: VALID. */
function sloValidity(slo: Slo, failed: number, ttft: Distribution | undefined, tpot: Distribution | undefined, interChunk: Distribution | undefined): LoadPointSummary["validity"] {
  if (!sloSet(slo)) return undefined;
  const reasons: string[] = [];
  if (failed > 0) reasons.push(`${failed} requests failed`);
  if (ttft === undefined) reasons.push("no request completed");
  if (slo.ttftMs !== undefined && ttft !== undefined && ttft.p99 > slo.ttftMs) reasons.push(`TTFT p99 ${ttft.p99.toFixed(1)} ms > ${slo.ttftMs} ms`);
  if (slo.tpotMs !== undefined && tpot !== undefined && tpot.p99 > slo.tpotMs) reasons.push(`TPOT p99 ${tpot.p99.toFixed(2)} ms > ${slo.tpotMs} ms`);
  if (slo.interChunkP99Ms !== undefined && interChunk !== undefined && interChunk.p99 > slo.interChunkP99Ms) reasons.push(`inter-chunk p99 ${interChunk.p99.toFixed(1)} ms > ${slo.interChunkP99Ms} ms`);
  return { valid: reasons.length === 0, reasons };
}

function sloSet(slo: Slo): boolean {
  return slo.ttftMs !== undefined || slo.tpotMs !== undefined || slo.interChunkP99Ms !== undefined;
}

/** Pure: whether one completed request meets every bound the SLO sets. */
export function meetsSlo(slo: Slo, metrics: RequestMetrics): boolean {
  return (slo.ttftMs === undefined || metrics.ttftMs <= slo.ttftMs)
    && (slo.tpotMs === undefined || (metrics.tpotMs ?? 0) <= slo.tpotMs)
    && (slo.interChunkP99Ms === undefined || (distribution(metrics.interChunkMs)?.p99 ?? 0) <= slo.interChunkP99Ms);
}

/** Pure: samples and their metrics → the aggregate. `durationS` is the measured phase's wall time. */
export function summarizeLoadPoint(label: string, samples: readonly RequestSample[], metrics: readonly (RequestMetrics | undefined)[], durationS: number, slo: Slo): LoadPointSummary {
  const ok = metrics.filter((m): m is RequestMetrics => m !== undefined);
  const errors: Partial<Record<RequestStatus, number>> = {};
  for (const sample of samples) if (sample.status !== "ok") errors[sample.status] = (errors[sample.status] ?? 0) + 1;
  const output = ok.reduce((sum, m) => sum + m.outputTokens, 0);
  const prompt = ok.reduce((sum, m) => sum + (m.promptTokens ?? 0), 0);
  const perUser = ok.filter((m) => m.tpotMs !== undefined && m.tpotMs > 0).map((m) => 1000 / m.tpotMs!);
  const ttftMs = distribution(ok.map((m) => m.ttftMs));
  const tpotMs = distribution(ok.flatMap((m) => (m.tpotMs === undefined ? [] : [m.tpotMs])));
  const good = ok.filter((m) => meetsSlo(slo, m)).length;
  const interChunkMs = distribution(ok.flatMap((m) => m.interChunkMs));
  return {
    label,
    requests: samples.length,
    completed: ok.length,
    errors,
    retriedOnFreshConnection: samples.filter((sample) => sample.attempts > 1).length,
    durationS,
    requestsPerSecond: ok.length / durationS,
    outputTokensPerSecond: output / durationS,
    totalTokensPerSecond: (output + prompt) / durationS,
    tokensPerSecondPerUser: perUser.length === 0 ? undefined : perUser.reduce((a, b) => a + b, 0) / perUser.length,
    goodputRequestsPerSecond: sloSet(slo) ? good / durationS : undefined,
    ttftMs,
    tpotMs,
    interChunkMs,
    e2eMs: distribution(ok.map((m) => m.e2eMs)),
    clientLagMs: distribution(samples.map((s) => Number(s.sentNs - s.scheduledNs) / 1e6)),
    tokenCountDiscrepancy: ok.reduce((sum, m) => sum + (m.tokenCountDiscrepancy ?? 0), 0),
    validity: sloValidity(slo, samples.length - ok.length, ttftMs, tpotMs, interChunkMs),
    promptCache: summarizePromptCache(ok),
  };
}
