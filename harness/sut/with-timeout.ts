import type { SystemUnderTest } from "./types.js";

export class SutTimeoutError extends Error {
  constructor(readonly label: string, readonly method: string, readonly seconds: number) {
    super(`${label}: ${method} did not answer within ${seconds} s (per-case timeout)`);
    this.name = "SutTimeoutError";
  }
}

export class SutStoppedError extends Error {
  constructor(readonly label: string, readonly method: string) {
    super(`${label}: ${method} abandoned: the run was stopped`);
    this.name = "SutStoppedError";
  }
}

function race<T>(work: Promise<T>, seconds: number, signal: AbortSignal | undefined, onTimeout: () => Error, onStop: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), seconds * 1000);
    // A stop does not wait for the answer: the SUT is shut down by the ladder right after.
    onAbort = () => reject(onStop());
    if (signal?.aborted === true) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([work, deadline]).finally(() => {
    clearTimeout(timer);
    if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
  });
}

/**
 * Wraps any SUT so every batch call fails with SutTimeoutError after `seconds`, or with
 * SutStoppedError as soon as `signal` aborts, instead of hanging the run. Capabilities are
 * preserved exactly: an absent method stays absent.
 */
export function withCaseTimeout(sut: SystemUnderTest, seconds: number, signal?: AbortSignal): SystemUnderTest {
  const wrap = <A extends unknown[], R>(method: string, fn: ((...args: A) => Promise<R>) | undefined): ((...args: A) => Promise<R>) | undefined =>
    fn === undefined ? undefined : (...args: A) => race(fn.apply(sut, args), seconds, signal, () => new SutTimeoutError(sut.label, method, seconds), () => new SutStoppedError(sut.label, method));
  return {
    label: sut.label,
    provenance: sut.provenance,
    tokenize: wrap("tokenize", sut.tokenize),
    detokenize: wrap("detokenize", sut.detokenize),
    inspectTokens: wrap("inspectTokens", sut.inspectTokens),
    greedy: wrap("greedy", sut.greedy),
    tracedGreedy: wrap("tracedGreedy", sut.tracedGreedy),
    batchedGreedy: wrap("batchedGreedy", sut.batchedGreedy),
    teacherForcedTopK: wrap("teacherForcedTopK", sut.teacherForcedTopK),
    traceDemand: wrap("traceDemand", sut.traceDemand),
    kernelPairs: sut.kernelPairs,
    kernel: wrap("kernel", sut.kernel),
    kernelTime: wrap("kernelTime", sut.kernelTime),
    close: () => sut.close(),
  };
}
