import type { TimedGreedy } from "../../../sut/dialects/dialect.js";
import type { GreedyRequest } from "../../../sut/types.js";
import type { GateLevel } from "../../../suites/parity-suite.js";
import type { ArmScope } from "../../check.js";
import type { CheckModule } from "../check-module.js";

/** One greedy request to a server, answered with its ids and its `timings` counts. */
export type ServerGreedy = (request: GreedyRequest) => Promise<TimedGreedy>;

/**
 * The leg's server as its dialect probe found it: speculating (answers with draft counts), or not,
 * and why. A speculating server's greedy is opened inside the check (it asks the server's model
 * list), so a server that stops answering there is that check's error, not the run's.
 */
export type SpeculatingServer = { readonly open: () => Promise<ServerGreedy> } | { readonly refusal: string };

export interface SpeculativeArmContext extends ArmScope {
  readonly gate: GateLevel;
  /** The prompts' texts by their index in the parity suite they come from (tokenized by the SUT). */
  readonly prompts: ReadonlyMap<number, string>;
  readonly maxTokens: readonly number[];
  readonly concurrency: number;
  /** The leg's server, started with speculation. */
  readonly speculating: SpeculatingServer;
  /** Starts the same server without speculation, runs `body` against it, and stops it. */
  withPlainServer<T>(body: (plain: ServerGreedy) => Promise<T>): Promise<T>;
}

/** What the check of one speculative arm shares with the runner: its context, and the arm's summary line as the check wrote it. */
export interface SpeculativeArmState {
  readonly context: SpeculativeArmContext;
  summaryLine?: string;
}

/** A check of a speculative arm (one module under checks/speculative/, listed in checks/registry.ts). */
export type SpeculativeCheck<Name extends string = string> = CheckModule<Name, SpeculativeArmState, "speculative">;
