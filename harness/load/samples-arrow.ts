import { Float64, Int32, Table, Utf8, tableToIPC, vectorFromArray } from "apache-arrow";
import type { RequestMetrics } from "./request-metrics.js";
import type { RequestSample } from "./sse-request.js";

export interface SampleRow {
  readonly point: string;
  readonly sample: RequestSample;
  readonly metrics: RequestMetrics | undefined;
}

/** samples.arrow: one row per measured request; times in milliseconds from the request's scheduled send. */
export function encodeSamplesArrow(rows: readonly SampleRow[]): Uint8Array {
  const float = (pick: (row: SampleRow) => number | undefined | null) => vectorFromArray(rows.map((r) => pick(r) ?? null), new Float64());
  const int = (pick: (row: SampleRow) => number | undefined | null) => vectorFromArray(rows.map((r) => pick(r) ?? null), new Int32());
  const text = (pick: (row: SampleRow) => string | null) => vectorFromArray(rows.map(pick), new Utf8());
  return tableToIPC(new Table({
    point: text((r) => r.point),
    index: int((r) => r.sample.index),
    status: text((r) => r.sample.status),
    http_status: int((r) => r.sample.httpStatus),
    error: text((r) => r.sample.error),
    attempts: int((r) => r.sample.attempts),
    client_lag_ms: float((r) => Number(r.sample.sentNs - r.sample.scheduledNs) / 1e6),
    ttft_ms: float((r) => r.metrics?.ttftMs),
    tpot_ms: float((r) => r.metrics?.tpotMs),
    e2e_ms: float((r) => r.metrics?.e2eMs),
    output_tokens: int((r) => r.metrics?.outputTokens),
    prompt_tokens: int((r) => r.metrics?.promptTokens),
    cached_prompt_tokens: int((r) => r.metrics?.cachedPromptTokens),
    client_tokens: int((r) => r.sample.clientTokens),
    content_events: int((r) => r.sample.contentEventsNs.length),
  }), "file");
}
