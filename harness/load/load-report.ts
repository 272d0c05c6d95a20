import { EXIT, type ExitCode } from "../results/exit-code.js";
import type { Distribution } from "../stats/distribution.js";
import type { LoadPointSummary, PromptCacheSummary } from "./aggregate.js";
import type { PointMeasurement } from "./measure-point.js";
import type { PointOutcome } from "./point-outcome.js";
import type { ClientLoad } from "./run-load.js";
import type { RequestSample, RequestStatus } from "./sse-request.js";

/** The perf table a load run ends with, one row per point (tableRow). */
export const LOAD_TABLE_HEADER: readonly string[] = [
  "| model | slots | load | output tok/s | tok/s/user | TTFT p50 (ms) | TTFT p99 (ms) | TPOT p50 (ms) | TPOT p99 (ms) | errors | SLO p99 |",
  "|---|---|---|---|---|---|---|---|---|---|---|",
];

const fmt = (v: number | undefined, digits = 1) => (v === undefined || !Number.isFinite(v) ? "–" : v.toFixed(digits));

export function tableRow(model: string, slots: string, point: LoadPointSummary): string {
  const errors = Object.values(point.errors).reduce((a, b) => a + (b ?? 0), 0);
  return `| ${model} | ${slots} | ${point.label} | ${fmt(point.outputTokensPerSecond)} | ${fmt(point.tokensPerSecondPerUser)} | ${fmt(point.ttftMs?.median)} | ${fmt(point.ttftMs?.p99)} | ${fmt(point.tpotMs?.median, 2)} | ${fmt(point.tpotMs?.p99, 2)} | ${errors} | ${point.validity === undefined ? "–" : point.validity.valid ? "VALID" : "INVALID"} |`;
}

/** One line per kind of failure in a point: how many, and the first one (request index in samples.arrow, its message). */
function failureLines(label: string, samples: readonly RequestSample[]): string[] {
  const byStatus = new Map<RequestStatus, { first: RequestSample; count: number }>();
  for (const sample of samples) {
    if (sample.status === "ok") continue;
    const seen = byStatus.get(sample.status);
    if (seen === undefined) byStatus.set(sample.status, { first: sample, count: 1 });
    else seen.count++;
  }
  return [...byStatus].map(([status, { first, count }]) =>
    `${label}: ${count} × ${status}; first: request ${first.index}${first.httpStatus !== null && first.httpStatus !== 200 ? `, HTTP ${first.httpStatus}` : ""}: ${first.error ?? ""}`);
}

/** The line a point's verdict gets when it did not pass (undefined: it passed). */
export function verdictLine(label: string, { verdict }: PointOutcome): string | undefined {
  if (verdict.status === "pass") return undefined;
  return `${label}: ${verdict.status === "skip" ? `SKIPPED — NOT A PASS: ${verdict.reason}` : `FAIL: ${"summary" in verdict ? verdict.summary : verdict.reason}`}`;
}

/** What a point prints once it is recorded: its table row, then its failures and notes. */
export function pointLines(row: string, measurement: PointMeasurement, outcome: PointOutcome): string[] {
  const { label, result } = measurement;
  const { summary } = outcome;
  return [
    row,
    ...failureLines(label, result.samples),
    ...(summary.retriedOnFreshConnection > 0 ? [`${label}: ${summary.retriedOnFreshConnection} request(s) sent again on a fresh connection (the server closed a kept-alive connection as they went out; docs/load-client.md); each counted once`] : []),
    ...(summary.validity?.valid === false ? [`${label}: INVALID under --slo: ${summary.validity.reasons.join("; ")}`] : []),
    ...(summary.promptCache === undefined ? [] : [promptCacheLine(label, summary.promptCache)]),
    ...(outcome.parityLine === undefined ? [] : [outcome.parityLine]),
  ];
}

const latency = (d: Distribution | undefined) => (d === undefined ? "none" : `p50 ${fmt(d.median)} / p99 ${fmt(d.p99)} ms (${d.n})`);

/** What the server's prompt cache held over a point: tokens computed against reused, and TTFT on hits against misses. */
export function promptCacheLine(label: string, cache: PromptCacheSummary): string {
  const share = cache.promptTokens === 0 ? "–" : `${fmt((100 * cache.cachedTokens) / cache.promptTokens)}%`;
  return `${label}: prompt cache: ${cache.promptTokens} prompt tokens, ${cache.cachedTokens} cached (${share}), ${cache.evaluatedTokens} evaluated; `
    + `${cache.hits} of ${cache.hits + cache.misses} requests reused some; TTFT on hits ${latency(cache.ttftHitsMs)}, on misses ${latency(cache.ttftMissesMs)}`
    + (cache.unreported > 0 ? `; ${cache.unreported} request(s) without cached_tokens in their usage` : "");
}

/** Event-loop utilization above which a load point's latencies may be the client's own. */
const CLIENT_BUSY = 0.8;

/** A warning when the client was busy enough to be what the point measured. */
export function clientBusyWarning(label: string, client: ClientLoad): { readonly message: string; readonly hint: string } | undefined {
  if (client.eventLoopUtilization <= CLIENT_BUSY) return undefined;
  return {
    message: `${label}: the client was busy ${(100 * client.eventLoopUtilization).toFixed(0)}% of the time (event-loop delay p99 ${client.eventLoopDelayP99Ms.toFixed(1)} ms): these numbers may measure the client, not the server`,
    hint: "`npm run bench:client` shows what one client core sustains; lower the load (with --model, --no-parity also moves the oracle's work out of the client process)",
  };
}

/** The run's last line, before its exit code and directory. */
export function loadEnding(failedHard: boolean, code: ExitCode): string {
  if (failedHard) return "FAIL: a load point stopped on its error rate, or parity failed under load";
  return code === EXIT.pass ? "done" : code === EXIT.requiredSkipped ? "SKIPPED — NOT A PASS: a load point measured nothing" : "FAIL: a load point's numbers cannot pass (see its line above)";
}
