import { SutGoneError } from "./sut-gone.js";
import { perCaseTimeoutNote, SutStoppedError, SutTimeoutError, withCaseTimeout, type CaseTimeout } from "./with-timeout.js";
import type { Capability, SutProvenance, SystemUnderTest } from "./types.js";

/** Per arm, how many times a runner that stopped answering is replaced before the rest of the arm is not run. */
export const DEFAULT_RUNNER_RESTARTS = 2;

/**
 * A request the runner did not answer within the per-case timeout: that case is an error, the runner
 * was stopped, and the next request goes to a fresh one. Not an end of the SUT (with-timeout.ts,
 * endsTheSut): the cases after it still run.
 */
export class RunnerReplacedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RunnerReplacedError";
  }
}

export interface RestartPlan {
  readonly caseTimeout: CaseTimeout;
  /** Restarts allowed for the arm; after them, every later request fails as not run. */
  readonly limit: number;
  /** The arm's signal: no restart once it is stopped. */
  readonly signal: AbortSignal;
  /** Starts a fresh runner (its hello read, as for the first one). */
  readonly open: () => Promise<SystemUnderTest>;
  /** Between the stopped runner and the fresh one (the box reset, and the record of the restart). */
  readonly beforeRestart: (restart: number, why: string) => Promise<void>;
}

/** Why a fresh runner is not the one the arm's verdicts so far are about, if it is not: another model file, engine or set of methods. */
function differsFrom(first: SystemUnderTest, fresh: SystemUnderTest): string | undefined {
  const model = (p: SutProvenance) => p.loadedModel?.sha256 ?? "(unsaid)";
  if (model(fresh.provenance) !== model(first.provenance)) return `it says it runs model sha256 ${model(fresh.provenance)}, the first said ${model(first.provenance)}`;
  if (fresh.provenance.engine !== first.provenance.engine) return `its engine is ${fresh.provenance.engine}, the first's ${first.provenance.engine}`;
  const methods = (sut: SystemUnderTest) => Object.keys(sut).filter((key) => typeof (sut as unknown as Record<string, unknown>)[key] === "function").sort().join(",");
  if (methods(fresh) !== methods(first)) return `it offers ${methods(fresh)}, the first offered ${methods(first)}`;
  return undefined;
}

/** Every capability is a method of the same name; a `Record` makes the list complete at compile time. */
const METHODS = Object.keys({ tokenize: 0, detokenize: 0, tokenizeSpecial: 0, detokenizeSpecial: 0, inspectTokens: 0, greedy: 0, tracedGreedy: 0, batchedGreedy: 0, teacherForcedTopK: 0, cachedGreedy: 0, cachedChat: 0, slotAction: 0, traceDemand: 0, allocations: 0, kernel: 0, kernelTime: 0 } satisfies Record<Capability, 0>) as Capability[];

/**
 * A runner held to the per-case timeout that is replaced instead of given up on: a request it does
 * not answer in time is that case's error, the runner is stopped at once (the stop ladder: it may
 * hold a device), and the next request starts a fresh one — whose hello must name the same model,
 * engine and methods — up to `limit` times per arm. Then every later request fails with "not run".
 * The fresh runner is started lazily: a timeout on the arm's last case starts nothing.
 */
export class RestartingRunner {
  readonly sut: SystemUnderTest;
  private runner: SystemUnderTest;
  private current: SystemUnderTest;
  /** Why the current runner was stopped, while no fresh one has taken its place. */
  private stopped: string | undefined;
  /** Why no runner will answer again this arm. */
  private gone: string | undefined;
  private restartCount = 0;

  constructor(private readonly first: SystemUnderTest, private readonly plan: RestartPlan) {
    this.runner = first;
    this.current = withCaseTimeout(first, plan.caseTimeout, plan.signal);
    const wrapped: Partial<Record<Capability, (...args: never[]) => Promise<unknown>>> = {};
    for (const method of METHODS) {
      if (typeof first[method] === "function") wrapped[method] = (...args: never[]) => this.call(method, args);
    }
    // The wrapped methods keep the first runner's signatures; the record above is keyed by name, so the object is asserted whole.
    this.sut = { label: first.label, provenance: first.provenance, unsupported: first.unsupported, kernelPairs: first.kernelPairs, ...wrapped, close: () => this.runner.close() } as SystemUnderTest;
  }

  get restarts(): number {
    return this.restartCount;
  }

  private async call(method: Capability, args: never[]): Promise<unknown> {
    // Trace demand and allocations are about what the runner held while serving the arm's checks: a runner started only to be asked would report its own.
    if ((method === "traceDemand" || method === "allocations") && this.stopped !== undefined && this.gone === undefined) {
      throw new SutGoneError(`not asked: the runner was stopped after ${this.stopped}; ${method === "traceDemand" ? "the graphs it captured" : "what it allocated"} went with it`);
    }
    const runner = await this.live();
    try {
      return await (runner[method] as (...a: never[]) => Promise<unknown>)(...args);
    } catch (error) {
      if (!(error instanceof SutTimeoutError)) throw error;
      const timedOut = `${method} timed out after ${this.plan.caseTimeout.seconds} s`;
      this.stopped = `${timedOut} (per-case timeout)`;
      await this.runner.close();
      const next = this.restartCount < this.plan.limit ? "a fresh runner takes the next case" : `not replaced: restarted ${this.restartCount} times already (the limit)`;
      throw new RunnerReplacedError(`${this.first.label}: ${timedOut}; the runner was stopped, ${next} ${perCaseTimeoutNote(this.plan.caseTimeout)}`);
    }
  }

  /** The runner to ask: the current one, or a fresh one after a timeout (within the limit). */
  private async live(): Promise<SystemUnderTest> {
    if (this.gone !== undefined) throw new SutGoneError(this.gone);
    if (this.stopped === undefined) return this.current;
    if (this.plan.signal.aborted) throw new SutStoppedError(this.first.label, "restart");
    if (this.restartCount >= this.plan.limit) {
      this.gone = `not run: runner restarted ${this.restartCount} times (the limit per arm), and the last one's ${this.stopped}`;
      throw new SutGoneError(this.gone);
    }
    this.restartCount++;
    let fresh: SystemUnderTest;
    try {
      await this.plan.beforeRestart(this.restartCount, this.stopped);
      fresh = await this.plan.open();
    } catch (error) {
      this.gone = `not run: the runner could not be restarted (restart ${this.restartCount}): ${error instanceof Error ? error.message : String(error)}`;
      throw new SutGoneError(this.gone);
    }
    this.runner = fresh;
    const differs = differsFrom(this.first, fresh);
    if (differs !== undefined) {
      await fresh.close();
      this.gone = `not run: the restarted runner is not the one this arm's verdicts are about: ${differs}`;
      throw new SutGoneError(this.gone);
    }
    this.current = withCaseTimeout(fresh, this.plan.caseTimeout, this.plan.signal);
    this.stopped = undefined;
    return this.current;
  }
}
