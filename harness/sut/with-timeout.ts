import type { SystemUnderTest } from "./types.js";
import { SutGoneError } from "./sut-gone.js";

/** The per-case timeout a call is held to, and where it was set: what a message about it tells the user to raise. */
export interface CaseTimeout {
  readonly seconds: number;
  /** The suite file being run, where the caller knows it. */
  readonly suitePath?: string;
  /** The suite file sets it (`case_timeout_s`), which `--case-timeout` does not override. */
  readonly setBySuite?: boolean;
}

/** A suite's per-case timeout: its own `case_timeout_s`, else the run's (`--case-timeout`). */
export function caseTimeoutOf(suite: { readonly case_timeout_s?: number; readonly path: string }, runSeconds: number): CaseTimeout {
  return { seconds: suite.case_timeout_s ?? runSeconds, suitePath: suite.path, setBySuite: suite.case_timeout_s !== undefined };
}

/** How every message about a per-case timeout ends: that it was one, and both ways to raise it. */
export function perCaseTimeoutNote(timeout: CaseTimeout): string {
  const field = timeout.suitePath === undefined ? "the suite's case_timeout_s" : `case_timeout_s in ${timeout.suitePath}`;
  return timeout.setBySuite === true
    ? `(per-case timeout, set by ${field}: raise it there, it overrides --case-timeout SECONDS)`
    : `(per-case timeout: raise it with --case-timeout SECONDS or ${field})`;
}

export class SutTimeoutError extends Error {
  constructor(readonly label: string, readonly method: string, readonly timeout: CaseTimeout) {
    super(`${label}: ${method} did not answer within ${timeout.seconds} s ${perCaseTimeoutNote(timeout)}`);
    this.name = "SutTimeoutError";
  }
}

export class SutStoppedError extends Error {
  constructor(readonly label: string, readonly method: string, why = "the run was stopped") {
    super(`${label}: ${method} abandoned: ${why}`);
    this.name = "SutStoppedError";
  }
}

/** An error after which a check stops asking case by case: the SUT is gone, stopped answering, or its arm was stopped. */
export function endsTheSut(error: unknown): boolean {
  return error instanceof SutGoneError || error instanceof SutTimeoutError || error instanceof SutStoppedError;
}

function race<T>(work: Promise<T>, seconds: number, signal: AbortSignal | undefined, onTimeout: () => Error, onStop: () => Error, giveUp: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let stopListening: (() => void) | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      giveUp();
      reject(onTimeout());
    }, seconds * 1000);
    // A stop does not wait for the answer: the SUT is shut down by the ladder right after.
    stopListening = onStopped(signal, () => {
      giveUp();
      reject(onStop());
    });
  });
  return Promise.race([work, deadline]).finally(() => {
    clearTimeout(timer);
    stopListening?.();
  });
}

/** Calls `onStop` once `signal` aborts (at once if it already has); returns what stops listening. */
export function onStopped(signal: AbortSignal | undefined, onStop: () => void): () => void {
  if (signal === undefined) return () => undefined;
  if (signal.aborted) {
    onStop();
    return () => undefined;
  }
  signal.addEventListener("abort", onStop, { once: true });
  return () => signal.removeEventListener("abort", onStop);
}

/** The reason an arm's signal carries when the arm alone is stopped (its leg timed out), not the whole run. */
export class ArmStopped extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ArmStopped";
  }
}

/** Why the signal stopped the arm: its own reason (a leg timeout), else the run was stopped. */
export function stopReason(signal: AbortSignal | undefined): string | undefined {
  return signal?.reason instanceof ArmStopped ? signal.reason.message : undefined;
}

/**
 * One call of a SUT made outside its SystemUnderTest (a server's timed greedy, its /apply-template)
 * under the same per-case timeout and stop as the SUT's own methods: SutTimeoutError after
 * `timeout.seconds`, SutStoppedError as soon as `signal` aborts, so a server that never answers cannot hang the run.
 */
export function timedCall<A extends unknown[], R>(label: string, method: string, fn: (...args: A) => Promise<R>, timeout: CaseTimeout, signal?: AbortSignal, giveUp: () => void = () => {}): (...args: A) => Promise<R> {
  return (...args: A) => race(fn(...args), timeout.seconds, signal, () => new SutTimeoutError(label, method, timeout), () => new SutStoppedError(label, method, stopReason(signal)), giveUp);
}

/**
 * Wraps any SUT so every batch call fails with SutTimeoutError after `timeout.seconds`, or with
 * SutStoppedError as soon as `signal` aborts, instead of hanging the run; either way the SUT is
 * told to abandon the call (SystemUnderTest.abandon). Capabilities are
 * preserved exactly: an absent method stays absent.
 */
export function withCaseTimeout(sut: SystemUnderTest, timeout: CaseTimeout, signal?: AbortSignal): SystemUnderTest {
  const wrap = <A extends unknown[], R>(method: string, fn: ((...args: A) => Promise<R>) | undefined): ((...args: A) => Promise<R>) | undefined =>
    fn === undefined ? undefined : timedCall(sut.label, method, fn.bind(sut), timeout, signal, () => sut.abandon?.());
  return {
    label: sut.label,
    provenance: sut.provenance,
    unsupported: sut.unsupported,
    tokenize: wrap("tokenize", sut.tokenize),
    detokenize: wrap("detokenize", sut.detokenize),
    tokenizeSpecial: wrap("tokenizeSpecial", sut.tokenizeSpecial),
    detokenizeSpecial: wrap("detokenizeSpecial", sut.detokenizeSpecial),
    inspectTokens: wrap("inspectTokens", sut.inspectTokens),
    greedy: wrap("greedy", sut.greedy),
    tracedGreedy: wrap("tracedGreedy", sut.tracedGreedy),
    batchedGreedy: wrap("batchedGreedy", sut.batchedGreedy),
    teacherForcedTopK: wrap("teacherForcedTopK", sut.teacherForcedTopK),
    cachedGreedy: wrap("cachedGreedy", sut.cachedGreedy),
    cachedChat: wrap("cachedChat", sut.cachedChat),
    slotAction: wrap("slotAction", sut.slotAction),
    traceDemand: wrap("traceDemand", sut.traceDemand),
    allocations: wrap("allocations", sut.allocations),
    promptCounters: wrap("promptCounters", sut.promptCounters),
    kernelPairs: sut.kernelPairs,
    kernel: wrap("kernel", sut.kernel),
    kernelTime: wrap("kernelTime", sut.kernelTime),
    close: () => sut.close(),
  };
}
