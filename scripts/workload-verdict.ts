import { summarizeLoadPoint, type Slo } from "../harness/load/aggregate.js";
import { requestMetrics } from "../harness/load/request-metrics.js";
import type { RequestSample } from "../harness/load/sse-request.js";
import { EXIT } from "../harness/results/exit-code.js";
import type { Distribution } from "../harness/stats/distribution.js";

/*
 * bench:workload's figures and verdict, pure: one side's figures at one load point from its
 * requests, ours judged against llama-server's at the same point of the same run, and the run's
 * verdict line and exit code. The script (bench-workload.ts) does the I/O.
 */

/** Issue #45's targets, ours against llama-server at every point. */
export const TARGETS = { tokensPerSecondRatio: 1.0, ttftP99Ratio: 1.0, itlP99Ratio: 1.1, peakRssAboveMiB: 200 } as const;

/** What llama-server answers when its generated text is not valid UTF-8 (docs/servers.md): its lost request, for a reason of its own. */
export const UTF8_REFUSAL = "invalid UTF-8 in its generated text (llama-server's output parser: \"does not match the expected Content-only format\")";

export interface SideFigures {
  readonly sent: number;
  readonly completed: number;
  /** Every token the server streamed (a lost request's included: that work was done) over the point's wall time. */
  readonly outputTokensPerSecond: number;
  readonly ttftMs: Distribution | undefined;
  /** Gaps between content events of completed requests, pooled. */
  readonly itlMs: Distribution | undefined;
  /** Completed requests meeting the SLO, and those per second. */
  readonly good: number;
  readonly goodputPerSecond: number;
  readonly peakRssBytes: number | undefined;
  /** The server process's CPU time per streamed token (ms). */
  readonly cpuMsPerToken: number;
  /** Lost requests by reason. */
  readonly losses: Readonly<Record<string, number>>;
}

/** Why a request was lost, in one short line: the server's own error message where it sent one. */
export function lossReason(sample: RequestSample): string {
  const text = sample.error ?? "";
  if (/Content-only format/i.test(text)) return UTF8_REFUSAL;
  let message = text;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string };
    const inner = typeof parsed.error === "string" ? parsed.error : parsed.error?.message;
    if (typeof inner === "string") message = inner;
  } catch {
    // Not JSON (a truncated body, a connection error's text): the text as it came.
  }
  const what = sample.httpStatus !== null && sample.httpStatus !== 200 ? `HTTP ${sample.httpStatus}` : sample.status;
  return `${what}: ${message.replace(/\s+/g, " ").trim().slice(0, 120)}`;
}

export function sideFigures(samples: readonly RequestSample[], durationS: number, slo: Slo, server: { readonly peakRssBytes: number | undefined; readonly cpuSeconds: number }): SideFigures {
  const summary = summarizeLoadPoint("", samples, samples.map(requestMetrics), durationS, slo);
  const streamed = samples.reduce((sum, sample) => sum + (sample.usage?.completionTokens ?? sample.clientTokens), 0);
  const losses: Record<string, number> = {};
  for (const sample of samples) if (sample.status !== "ok") losses[lossReason(sample)] = (losses[lossReason(sample)] ?? 0) + 1;
  const goodputPerSecond = summary.goodputRequestsPerSecond ?? 0;
  return {
    sent: samples.length,
    completed: summary.completed,
    outputTokensPerSecond: streamed / durationS,
    ttftMs: summary.ttftMs,
    itlMs: summary.interChunkMs,
    good: Math.round(goodputPerSecond * durationS),
    goodputPerSecond,
    peakRssBytes: server.peakRssBytes,
    cpuMsPerToken: (server.cpuSeconds * 1000) / Math.max(1, streamed),
    losses,
  };
}

export const lostCount = (figures: SideFigures): number => figures.sent - figures.completed;

export interface PointJudgement {
  readonly tokensPerSecondRatio: number;
  readonly ttftP99Ratio: number;
  readonly itlP99Ratio: number;
  readonly goodputRatio: number;
  readonly throughputJudged: boolean;
  /** Our peak RSS above llama-server's, MiB (NaN where either was not measured). */
  readonly peakRssAboveMiB: number;
  /** Each target missed, in words; a figure that could not be measured misses its target. */
  readonly misses: readonly string[];
}

const MIB = 2 ** 20;

/** "0.93×"; with a third digit where two would round onto the bound it is judged by ("0.996×", not a "1.00×" that missed). */
export function describeRatio(value: number, bound?: number): string {
  if (value === Infinity) return "∞"; // llama-server's figure was 0: any of ours is more
  if (!Number.isFinite(value)) return "n/a";
  const digits = bound !== undefined && value.toFixed(2) === bound.toFixed(2) && value !== bound ? 3 : 2;
  return `${value.toFixed(digits)}×`;
}

/**
 * Ours against llama-server at one point. `throughputJudged` false (an open loop): both servers
 * are sent the same requests at the same times, so below either's capacity their tok/s is the
 * arrival rate's, and the ratio is the last request's finish, not a throughput — a server that
 * falls behind shows in its TTFT instead. The ratio is still reported.
 */
export function judgePoint(ours: SideFigures, theirs: SideFigures, throughputJudged = true): PointJudgement {
  const tokensPerSecondRatio = ours.outputTokensPerSecond / theirs.outputTokensPerSecond;
  const ttftP99Ratio = (ours.ttftMs?.p99 ?? NaN) / (theirs.ttftMs?.p99 ?? NaN);
  const itlP99Ratio = (ours.itlMs?.p99 ?? NaN) / (theirs.itlMs?.p99 ?? NaN);
  const peakRssAboveMiB = ours.peakRssBytes === undefined || theirs.peakRssBytes === undefined ? NaN : (ours.peakRssBytes - theirs.peakRssBytes) / MIB;
  const misses: string[] = [];
  // Written as "not within" so that NaN (not measured) misses too.
  const miss = (within: boolean, what: string, value: number, text: string) => { if (!within) misses.push(Number.isFinite(value) ? text : `${what} not measured`); };
  if (throughputJudged) miss(tokensPerSecondRatio >= TARGETS.tokensPerSecondRatio, "tok/s", tokensPerSecondRatio, `tok/s ${describeRatio(tokensPerSecondRatio, TARGETS.tokensPerSecondRatio)}`);
  miss(ttftP99Ratio <= TARGETS.ttftP99Ratio, "TTFT p99", ttftP99Ratio, `TTFT p99 ${describeRatio(ttftP99Ratio, TARGETS.ttftP99Ratio)}`);
  miss(itlP99Ratio <= TARGETS.itlP99Ratio, "ITL p99", itlP99Ratio, `ITL p99 ${describeRatio(itlP99Ratio, TARGETS.itlP99Ratio)}`);
  miss(peakRssAboveMiB <= TARGETS.peakRssAboveMiB, "peak RSS", peakRssAboveMiB, `peak RSS +${peakRssAboveMiB.toFixed(0)} MiB`);
  if (lostCount(ours) > 0) misses.push(`ours lost ${lostCount(ours)}`);
  return { tokensPerSecondRatio, ttftP99Ratio, itlP99Ratio, goodputRatio: ours.goodputPerSecond / theirs.goodputPerSecond, throughputJudged, peakRssAboveMiB, misses };
}

export interface JudgedPoint {
  readonly label: string;
  readonly ours: SideFigures;
  readonly theirs: SideFigures;
  readonly judgement: PointJudgement;
}

/** Lost requests over the run, by reason (reason → count). */
function lossesOf(points: readonly JudgedPoint[], side: "ours" | "theirs"): Map<string, number> {
  const total = new Map<string, number>();
  for (const point of points) for (const [reason, count] of Object.entries(point[side].losses)) total.set(reason, (total.get(reason) ?? 0) + count);
  return total;
}

export function describeLosses(losses: ReadonlyMap<string, number> | Readonly<Record<string, number>>): string {
  const entries = losses instanceof Map ? [...losses] : Object.entries(losses);
  return entries.map(([reason, count]) => `${count}: ${reason}`).join("; ");
}

/**
 * The run's verdict: PASS only when every point met every target and ours lost nothing (llama-server's
 * losses are its own and said apart); a run that measured no point passes nothing.
 */
export function workloadVerdict(points: readonly JudgedPoint[], rounds: { readonly total: number; readonly repeated: number; readonly stillBusy: number }): { readonly line: string; readonly code: number } {
  const missed = points.filter((point) => point.judgement.misses.length > 0);
  const met = points.length > 0 && missed.length === 0;
  const sent = (side: "ours" | "theirs") => points.reduce((sum, point) => sum + point[side].sent, 0);
  const lost = (side: "ours" | "theirs") => points.reduce((sum, point) => sum + lostCount(point[side]), 0);
  const reasons = (side: "ours" | "theirs") => {
    const losses = lossesOf(points, side);
    return losses.size === 0 ? "" : ` (${describeLosses(losses)})`;
  };
  return {
    code: met ? EXIT.pass : EXIT.gateFailed,
    line: `bench:workload verdict: ${met ? "PASS" : "FAIL"} — `
      + (points.length === 0 ? "no point measured" : missed.length === 0 ? `every target met at ${points.map((p) => p.label).join(", ")}` : `missed at ${missed.map((p) => `${p.label} (${p.judgement.misses.join(", ")})`).join("; ")}`)
      + `; lost requests: ours ${lost("ours")} of ${sent("ours")}${reasons("ours")}, llama-server ${lost("theirs")} of ${sent("theirs")}${reasons("theirs")}`
      + `; ${rounds.repeated} of ${rounds.total} rounds measured again for a busy machine, ${rounds.stillBusy} still busy after every attempt`,
  };
}
