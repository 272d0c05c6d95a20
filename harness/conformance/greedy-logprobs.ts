import { BenchError } from "../errors.js";

/**
 * What a greedy (temperature 0) token's reported log-probs must satisfy, as pure functions over
 * what a server answered: the conformance checks greedy_logprobs and greedy_logprobs_echo
 * (checks.ts) send the requests and hand the answers here.
 */

/** One alternative of a token's top list: its text and log-prob. */
export interface RankedAlternative {
  readonly token: string;
  readonly logprob: number;
}

/** A generated token as a server reported it: its text, its own log-prob and its top list (in the order sent). */
export interface ReportedToken {
  readonly token: string;
  readonly logprob: number;
  readonly top: readonly RankedAlternative[];
}

/** How far two reports of one log-prob may lie apart and still agree: `abs` nats + `rel` × the larger magnitude. */
export interface LogprobTolerance {
  readonly abs: number;
  readonly rel: number;
}

/**
 * How far two reports of the same log-prob may lie apart when they come from different batches
 * (streamed and not, decoded and teacher-forced), for float32 logits: they move in their last
 * digits with a batch's composition, and an F16 KV cache rounds what they attend to. Measured on
 * tiny-random, 3-4 prompts at once, 36-48 tokens a run (docs/servers.md, greedy log-probs): our
 * server with an F32 KV cache at most 4.4e-6 nats apart, with F16 2.7e-4 (decoded against echo);
 * llama-server (F16 KV, its prompt cache on) 8.5e-4 at a log-prob of -0.84 (streamed against not).
 * A log-prob read from another row or step is off by tenths of a nat and more. An arm whose
 * server computes in lower precision states its own (`logprob_tolerance`).
 */
export const DEFAULT_LOGPROB_TOLERANCE: LogprobTolerance = { abs: 2e-3, rel: 2e-3 };

/**
 * The widest tolerance an arm may state. The FAKE fault logprobs-other-row (each sequence's
 * log-probs read from another's row) moves a generated token's log-prob from what echo scores for
 * it by a median of 0.14 nats on tiny-random (scripts/logprob-tolerance-limit.ts): at this limit at
 * least half its positions still fall outside the tolerance, so the agreement test alone still
 * sees the fault where the own-top-1 test cannot (a misread row whose top-1 happens to match).
 * And at 0.1 nats two alternatives within 10% of each other's probability already count as a tie:
 * much wider, and the positions where greedy is worth judging are the ones it skips. The relative
 * part (5% of the magnitude: 0.05 nats more at a log-prob of -1) leaves room for a
 * low-probability token's larger spread without reaching the fault's median.
 */
export const MAX_LOGPROB_TOLERANCE: LogprobTolerance = { abs: 0.1, rel: 0.05 };

/** An arm's stated tolerance, refused when wider than MAX_LOGPROB_TOLERANCE (`field`: where the file states it). */
export function assertLogprobToleranceWithinLimit(tolerance: LogprobTolerance, file: string, field: string): void {
  for (const part of ["abs", "rel"] as const) {
    if (tolerance[part] > MAX_LOGPROB_TOLERANCE[part]) {
      throw new BenchError(`${tolerance[part]} is wider than the limit ${MAX_LOGPROB_TOLERANCE[part]}, up to which log-probs misread from another sequence's row still stand out (docs/servers.md)`, {
        file, field: `${field}.${part}`,
        fix: `measure the largest gap a known-good build shows (the check's detail prints it, run at the limit) and set about twice that, at most ${MAX_LOGPROB_TOLERANCE[part]}`,
      });
    }
  }
}

/** The tolerance as a check's detail names it. */
export function describeTolerance(tolerance: LogprobTolerance): string {
  return `tolerance ${tolerance.abs} nats + ${tolerance.rel} × |log-prob|`;
}

/** Whether two reports of one log-prob agree within the tolerance (the larger magnitude scales the relative part). */
export function logprobsAgree(a: number, b: number, tolerance: LogprobTolerance): boolean {
  return Math.abs(a - b) <= tolerance.abs + tolerance.rel * Math.max(Math.abs(a), Math.abs(b));
}

/**
 * A position whose top-1 and top-2 lie within the tolerance is a tie: greedy may take either
 * (llama.cpp's argmax takes the lower id; its top list orders ties arbitrarily), so whether the
 * token is its own top-1 cannot be decided there.
 */
export function isTopTie(top: readonly RankedAlternative[], tolerance: LogprobTolerance): boolean {
  return top.length >= 2 && logprobsAgree(top[0].logprob, top[1].logprob, tolerance);
}

/** The probability mass a top list may exceed 1 by: float32 softmax rounding over a handful of entries. */
const MASS_SLACK = 1e-4;

/** The top list (any order) sorted by log-prob, descending: for reports whose top list is an object, whose key order JSON does not keep. */
export function rankedDescending(top: Readonly<Record<string, number>>): RankedAlternative[] {
  return Object.entries(top).map(([token, logprob]) => ({ token, logprob })).sort((a, b) => b.logprob - a.logprob);
}

export interface GreedyTokenVerdict {
  /** What is wrong with this report (empty: nothing). */
  readonly problems: readonly string[];
  /** Whether own-top-1 could be decided here (false at a tie). */
  readonly decided: boolean;
}

/**
 * A greedy token's report against itself: its log-prob finite and ≤ 0; its top list as long as
 * asked (undefined: a legacy top list is an object keyed by text, where alternatives that render
 * alike, such as partial UTF-8 bytes, collapse into one key), non-empty, sorted descending, with a mass ≤ 1; and, unless its top-1 is a tie, the token is its own top-1
 * and its log-prob is the top-1's. A server that ranks another sequence's row, or the previous
 * step's, names a top-1 that is not the token it emitted.
 */
export function judgeGreedyToken(report: ReportedToken, expectedTopCount: number | undefined, tolerance: LogprobTolerance): GreedyTokenVerdict {
  const problems: string[] = [];
  const { token, logprob, top } = report;
  if (!Number.isFinite(logprob) || logprob > 0) problems.push(`log-prob ${logprob} is not a finite value ≤ 0`);
  if (expectedTopCount !== undefined && top.length !== expectedTopCount) problems.push(`${top.length} alternatives, ${expectedTopCount} asked for`);
  if (top.length === 0) return { problems, decided: false };
  const unsorted = top.findIndex((alternative, i) => i > 0 && alternative.logprob > top[i - 1].logprob);
  if (unsorted > 0) problems.push(`top list not sorted descending at rank ${unsorted + 1} (${top[unsorted - 1].logprob} then ${top[unsorted].logprob})`);
  const mass = top.reduce((sum, alternative) => sum + Math.exp(alternative.logprob), 0);
  if (mass > 1 + MASS_SLACK) problems.push(`top list holds probability ${mass.toFixed(6)} > 1`);
  // Stable: among equal maxima the first as sent stays first.
  const ranked = [...top].sort((a, b) => b.logprob - a.logprob);
  const best = ranked[0];
  if (isTopTie(ranked, tolerance)) return { problems, decided: false };
  if (best.token !== token) problems.push(`token ${JSON.stringify(token)} is not its own top-1 (${JSON.stringify(best.token)} at ${best.logprob.toFixed(4)}, the token ${logprob.toFixed(4)})`);
  else if (!logprobsAgree(logprob, best.logprob, tolerance)) problems.push(`log-prob ${logprob} differs from its top-1's ${best.logprob}`);
  return { problems, decided: true };
}

/** The largest gap between two reports of the same log-prob, absolute, for a check's detail (the measured tolerance). */
export function largestGap(pairs: readonly (readonly [number, number])[]): number {
  return pairs.reduce((worst, [a, b]) => Math.max(worst, Math.abs(a - b)), 0);
}
