import type { RequestSample } from "./sse-request.js";

/**
 * Field-standard per-request metrics (docs/metrics.md, serving load), all from the scheduled time:
 * TTFT = first content event (never the role-only chunk); E2EL = last content event;
 * TPOT (= ITL in AIPerf/guidellm terms) = (E2EL − TTFT) / (output tokens − 1);
 * inter-chunk latencies = raw gaps between content events.
 */
export interface RequestMetrics {
  readonly ttftMs: number;
  readonly e2eMs: number;
  readonly tpotMs: number | undefined;
  readonly interChunkMs: readonly number[];
  readonly outputTokens: number;
  readonly promptTokens: number | undefined;
  /** The prompt tokens the server reused from its cache (undefined: it did not say). */
  readonly cachedPromptTokens: number | undefined;
  /** Client-counted minus server-reported output tokens. */
  readonly tokenCountDiscrepancy: number | undefined;
  /** How late the client sent it relative to its schedule. */
  readonly clientLagMs: number;
}

const ms = (ns: bigint): number => Number(ns) / 1e6;

export function requestMetrics(sample: RequestSample): RequestMetrics | undefined {
  if (sample.status !== "ok" || sample.contentEventsNs.length === 0) return undefined;
  const first = sample.contentEventsNs[0];
  const last = sample.contentEventsNs[sample.contentEventsNs.length - 1];
  const outputTokens = sample.usage?.completionTokens ?? sample.clientTokens;
  const ttftMs = ms(first - sample.scheduledNs);
  const e2eMs = ms(last - sample.scheduledNs);
  return {
    ttftMs,
    e2eMs,
    tpotMs: outputTokens > 1 ? (e2eMs - ttftMs) / (outputTokens - 1) : undefined,
    interChunkMs: sample.contentEventsNs.slice(1).map((t, i) => ms(t - sample.contentEventsNs[i])),
    outputTokens,
    promptTokens: sample.usage?.promptTokens,
    cachedPromptTokens: sample.usage?.cachedTokens,
    tokenCountDiscrepancy: sample.usage === null ? undefined : sample.clientTokens - sample.usage.completionTokens,
    clientLagMs: ms(sample.sentNs - sample.scheduledNs),
  };
}
