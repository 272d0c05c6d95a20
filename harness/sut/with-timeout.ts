import type { SystemUnderTest } from "./types.js";
import { SutGoneError } from "./sut-gone.js";

export class SutTimeoutError extends Error {
  constructor(readonly label: string, readonly method: string, readonly seconds: number) {
    super(`${label}: ${method} did not answer within ${seconds} s (per-case timeout)`);
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
  let onAbort: (() => void) | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      giveUp();
      reject(onTimeout());
    }, seconds * 1000);
    // A stop does not wait for the answer: the SUT is shut down by the ladder right after.
    onAbort = () => {
      giveUp();
      reject(onStop());
    };
    if (signal?.aborted === true) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([work, deadline]).finally(() => {
    clearTimeout(timer);
    if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
  });
}

/** The reason an arm's signal carries when the arm alone is stopped (its leg timed out), not the whole run. */
export class ArmStopped extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ArmStopped";
  }
}

/** Why the signal stopped the arm: its own reason (a leg timeout), else the run was stopped. */
function stopReason(signal: AbortSignal | undefined): string | undefined {
  return signal?.reason instanceof ArmStopped ? signal.reason.message : undefined;
}

/**
 * One call of a SUT made outside its SystemUnderTest (a server's timed greedy, its /apply-template)
 * under the same per-case timeout and stop as the SUT's own methods: SutTimeoutError after
 * `seconds`, SutStoppedError as soon as `signal` aborts, so a server that never answers cannot hang the run.
 */
export function timedCall<A extends unknown[], R>(label: string, method: string, fn: (...args: A) => Promise<R>, seconds: number, signal?: AbortSignal, giveUp: () => void = () => {}): (...args: A) => Promise<R> {
  return (...args: A) => race(fn(...args), seconds, signal, () => new SutTimeoutError(label, method, seconds), () => new SutStoppedError(label, method, stopReason(signal)), giveUp);
}

/**
 * Wraps any SUT so every batch call fails with SutTimeoutError after `seconds`, or with
 * SutStoppedError as soon as `signal` aborts, instead of hanging the run; either way the SUT is
 * told to abandon the call (SystemUnderTest.abandon). Capabilities are
 * preserved exactly: an absent method stays absent.
 */
export function withCaseTimeout(sut: SystemUnderTest, seconds: number, signal?: AbortSignal): SystemUnderTest {
  const wrap = <A extends unknown[], R>(method: string, fn: ((...args: A) => Promise<R>) | undefined): ((...args: A) => Promise<R>) | undefined =>
    fn === undefined ? undefined : timedCall(sut.label, method, fn.bind(sut), seconds, signal, () => sut.abandon?.());
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
    promptCounters: wrap("promptCounters", sut.promptCounters),
    kernelPairs: sut.kernelPairs,
    kernel: wrap("kernel", sut.kernel),
    kernelTime: wrap("kernelTime", sut.kernelTime),
    close: () => sut.close(),
  };
}
