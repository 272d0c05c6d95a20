import { performance } from "node:perf_hooks";
import { distribution, type Distribution } from "../stats/distribution.js";
import { STEP_PHASES, type GcLine, type StepLine, type StepPhase, type StepTrace, type SubmitLine } from "../../server/step-trace.js";

/**
 * Pure: a client's streamed requests lined up with our server's step trace (`bench serve
 * --trace-steps`), so that each first token's wait splits into the time before the server's
 * handler ran, the handler's own work, the engine's, and the way back to the client. Every time is
 * epoch milliseconds: the client's monotonic clock converted once (epochClock), the server's as it
 * wrote them.
 */

/** One request as the client saw it: its prompt's key (promptKey) names it in the trace. */
export interface ClientRequest {
  readonly index: number;
  readonly key: string;
  readonly sentMs: number;
  /** Arrival of its first content event. */
  readonly firstReadMs: number;
}

export interface RequestAnatomy {
  readonly index: number;
  readonly job: number;
  readonly ttftMs: number;
  /** The client's send to the server's handler beginning (the network, and the server's event loop busy with a step). */
  readonly sendToHandlerMs: number;
  /** Reading and validating the body, tokenizing, queueing (the handler's own work). */
  readonly handlerToSubmitMs: number;
  /** In the engine: the wait for a step, the steps, and the first token's socket write. */
  readonly submitToFirstWrittenMs: number;
  /** Of that, the wait before the step that admitted it began. */
  readonly queuedMs: number;
  readonly firstWrittenToReadMs: number;
  /** Every step that ran between its submit and its first token, the admitting and the first token's included. */
  readonly steps: readonly StepLine[];
  /** Milliseconds of the server's garbage collector pauses between the client's send and its read. */
  readonly gcMs: number;
}

export interface AnatomyJoin {
  readonly requests: readonly RequestAnatomy[];
  /** Client requests whose key no submitted prompt of the trace carries, or one with no admission, first token or HTTP line. */
  readonly unmatched: number;
  /** Client requests whose key the trace carries more than once (the same prompt sent twice): left out, not guessed. */
  readonly ambiguous: number;
}

/** The client's monotonic clock (process.hrtime.bigint) read against the epoch clock the server writes, once. */
export interface EpochClock {
  readonly hrtimeNs: bigint;
  readonly epochMs: number;
}

/** The client's monotonic clock against the epoch clock the server's trace is written in, read once, back to back (the one impure function here). */
export function epochClock(): EpochClock {
  return { hrtimeNs: process.hrtime.bigint(), epochMs: performance.timeOrigin + performance.now() };
}

export function epochMsOf(ns: bigint, clock: EpochClock): number {
  return clock.epochMs + Number(ns - clock.hrtimeNs) / 1e6;
}

/** The steps whose span meets [fromMs, toMs], by binary search on `steps` (in the order the engine took them). */
export function stepsBetween(steps: readonly StepLine[], fromMs: number, toMs: number): StepLine[] {
  let low = 0;
  let high = steps.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (steps[mid].t + steps[mid].ms < fromMs) low = mid + 1;
    else high = mid;
  }
  const met: StepLine[] = [];
  for (let i = low; i < steps.length && steps[i].t <= toMs; i++) met.push(steps[i]);
  return met;
}

/** How much of [fromMs, toMs] the pauses cover. */
function pausedWithin(pauses: readonly GcLine[], fromMs: number, toMs: number): number {
  let paused = 0;
  for (const pause of pauses) paused += Math.max(0, Math.min(toMs, pause.t + pause.ms) - Math.max(fromMs, pause.t));
  return paused;
}

export function joinAnatomy(client: readonly ClientRequest[], trace: StepTrace): AnatomyJoin {
  const byKey = new Map<string, SubmitLine[]>();
  for (const submit of trace.submits) {
    const same = byKey.get(submit.key);
    if (same === undefined) byKey.set(submit.key, [submit]);
    else same.push(submit);
  }
  const http = new Map(trace.http.map((h) => [h.req, h]));
  const admits = new Map(trace.admits.map((a) => [a.job, a]));
  const firsts = new Map(trace.firsts.map((f) => [f.job, f]));
  const stepsByNumber = new Map(trace.steps.map((s) => [s.step, s]));
  const requests: RequestAnatomy[] = [];
  let unmatched = 0;
  let ambiguous = 0;
  for (const request of client) {
    const submitted = byKey.get(request.key) ?? [];
    if (submitted.length > 1) { ambiguous++; continue; }
    const submit = submitted[0];
    const admit = submit === undefined ? undefined : admits.get(submit.job);
    const first = submit === undefined ? undefined : firsts.get(submit.job);
    const handler = submit?.req === undefined ? undefined : http.get(submit.req);
    const admittingStep = admit === undefined ? undefined : stepsByNumber.get(admit.step);
    if (submit === undefined || first === undefined || handler === undefined || admittingStep === undefined) { unmatched++; continue; }
    requests.push({
      index: request.index, job: submit.job,
      ttftMs: request.firstReadMs - request.sentMs,
      sendToHandlerMs: handler.t - request.sentMs,
      handlerToSubmitMs: submit.t - handler.t,
      submitToFirstWrittenMs: first.written - submit.t,
      queuedMs: admittingStep.t - submit.t,
      firstWrittenToReadMs: request.firstReadMs - first.written,
      steps: stepsBetween(trace.steps, submit.t, first.t),
      gcMs: pausedWithin(trace.gcs, request.sentMs, request.firstReadMs),
    });
  }
  return { requests, unmatched, ambiguous };
}

const TTFT_PARTS = ["sendToHandlerMs", "handlerToSubmitMs", "submitToFirstWrittenMs", "queuedMs", "firstWrittenToReadMs"] as const;
export type TtftPart = (typeof TTFT_PARTS)[number];

/** Client TTFT and each of its parts over the joined requests (undefined when none joined). */
export function ttftPartDistributions(requests: readonly RequestAnatomy[]): { ttft: Distribution; parts: Record<TtftPart, Distribution> } | undefined {
  const ttft = distribution(requests.map((r) => r.ttftMs));
  if (ttft === undefined) return undefined;
  const parts = Object.fromEntries(TTFT_PARTS.map((part) => [part, distribution(requests.map((r) => r[part]))!])) as Record<TtftPart, Distribution>;
  return { ttft, parts };
}

export interface StepGroup {
  readonly admitted: number;
  readonly decoding: number;
  readonly ms: Distribution;
  readonly phases: Readonly<Record<StepPhase, Distribution>>;
}

/** Step durations and their parts, grouped by what the step held: (admitted, decoding), fewest admitted first. */
export function stepGroups(steps: readonly StepLine[]): StepGroup[] {
  const groups = new Map<string, StepLine[]>();
  for (const step of steps) {
    const key = `${step.admitted}/${step.decoding}`;
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [step]);
    else group.push(step);
  }
  return [...groups.values()].map((group) => ({
    admitted: group[0].admitted, decoding: group[0].decoding, ms: distribution(group.map((s) => s.ms))!,
    phases: Object.fromEntries(STEP_PHASES.map((phase) => [phase, distribution(group.map((s) => s.phases_ms[phase]))!])) as Record<StepPhase, Distribution>,
  })).sort((a, b) => a.admitted - b.admitted || a.decoding - b.decoding);
}

/** The `count` slowest first tokens, slowest first. */
export function slowestRequests(requests: readonly RequestAnatomy[], count: number): RequestAnatomy[] {
  return [...requests].sort((a, b) => b.ttftMs - a.ttftMs).slice(0, count);
}
