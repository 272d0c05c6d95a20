import type { SystemUnderTest } from "./types.js";

export class SutTimeoutError extends Error {
  constructor(readonly label: string, readonly method: string, readonly seconds: number) {
    super(`${label}: ${method} did not answer within ${seconds} s (per-case timeout)`);
    this.name = "SutTimeoutError";
  }
}

function race<T>(work: Promise<T>, seconds: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), seconds * 1000);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

/**
 * Wraps any SUT so every batch call fails with SutTimeoutError after `seconds` instead of hanging
 * the run. Capabilities are preserved exactly: an absent method stays absent.
 */
export function withCaseTimeout(sut: SystemUnderTest, seconds: number): SystemUnderTest {
  const wrap = <A extends unknown[], R>(method: string, fn: ((...args: A) => Promise<R>) | undefined): ((...args: A) => Promise<R>) | undefined =>
    fn === undefined ? undefined : (...args: A) => race(fn.apply(sut, args), seconds, () => new SutTimeoutError(sut.label, method, seconds));
  return {
    label: sut.label,
    provenance: sut.provenance,
    tokenize: wrap("tokenize", sut.tokenize),
    detokenize: wrap("detokenize", sut.detokenize),
    inspectTokens: wrap("inspectTokens", sut.inspectTokens),
    greedy: wrap("greedy", sut.greedy),
    batchedGreedy: wrap("batchedGreedy", sut.batchedGreedy),
    teacherForcedTopK: wrap("teacherForcedTopK", sut.teacherForcedTopK),
    traceDemand: wrap("traceDemand", sut.traceDemand),
    kernelPairs: sut.kernelPairs,
    kernel: wrap("kernel", sut.kernel),
    kernelTime: wrap("kernelTime", sut.kernelTime),
    close: () => sut.close(),
  };
}
