import { resolveBoxSettings, type BoxSettings } from "../box/config.js";
import { BoxSession } from "../box/leg.js";
import type { RunDirectory, RunSelection } from "../results/run-directory.js";
import type { RunListener } from "../results/types.js";
import { DEFAULT_BATTERY } from "../suites/default-battery.js";
import { DEFAULT_SHUTDOWN_GRACE_S } from "../sut/child-process.js";
import { builtLlamaServer } from "../sut/llama-server-binary.js";
import type { LlamaCppSettings } from "../sut/llamacpp.js";
import { DEFAULT_RUNNER_RESTARTS } from "../sut/restarting-runner.js";
import { openArmSut, type OpenSut } from "./open-sut.js";
import type { Shard } from "../suites/shard.js";

export const DEFAULT_CASE_TIMEOUT_S = 120;
/** Suites run at once, where they may share the machine: two cores' worth of single-threaded SUTs. */
export const DEFAULT_JOBS = 2;

export interface RunOptions {
  readonly suites?: readonly string[];
  /** Only these arm labels. */
  readonly arms?: readonly string[];
  /** Replace the suite's arms with one required arm on this model. */
  readonly model?: string;
  /** Replace the suite's arms with one required arm run by this runner command (argv). */
  readonly runner?: readonly string[];
  /** Kernel suites: replace the arms with one required arm on this plugin (shared library path). */
  readonly plugin?: string;
  /** Only these case indices (kernel suites). */
  readonly kernelCases?: readonly number[];
  /** Only the cases of these ops (kernel suites). */
  readonly kernelOps?: readonly string[];
  /** Kernel suites: time every passing case (µs/call, GB/s, GFLOP/s, fraction of the measured copy bandwidth). */
  readonly time?: boolean;
  /** Only these prompt indices (parity suites). */
  readonly prompts?: readonly number[];
  /** Only these needle cases, as `L:depth:trial` (needle suites). */
  readonly niahCases?: readonly string[];
  /** Overrides applied to every arm's llama.cpp settings. */
  readonly settings?: Partial<LlamaCppSettings>;
  readonly caseTimeoutS?: number;
  /** Per arm, how many times a runner that does not answer within the case timeout is replaced (default 2). */
  readonly runnerRestarts?: number;
  /** Seconds a runner or server gets to exit when its arm ends, before SIGTERM, then SIGKILL. */
  readonly shutdownGraceS?: number;
  readonly signal?: AbortSignal;
  /** Opens a SUT for an arm; tests substitute fault-injecting wrappers here. */
  readonly openSut?: OpenSut;
  /** How the run shares its box: device lock, resets, boot and leg timeouts, runner environment (default: bench.config.json in the working directory, if any). */
  readonly box?: BoxSettings;
  /** Only this box's share of the battery's arms (shard.ts). */
  readonly shard?: Shard;
  /** How many suites run at once where their kinds allow it (default DEFAULT_JOBS; 1: one at a time). */
  readonly jobs?: number;
}

/** What a run was asked to run, as its summary.json records it (what gate, report and serve read). */
export function runSelection(options: RunOptions): RunSelection {
  return {
    suites: options.suites ?? [], arms: options.arms ?? [], prompts: options.prompts ?? [], cases: options.kernelCases ?? [], niah_cases: options.niahCases ?? [],
    ...(options.kernelOps === undefined || options.kernelOps.length === 0 ? {} : { ops: options.kernelOps }),
    ...(options.shard === undefined ? {} : { shard: options.shard }),
    jobs: options.jobs ?? DEFAULT_JOBS,
  };
}

/** A complete, read-only view of the options, resolved once. */
export interface ResolvedRunOptions {
  readonly suites: readonly string[];
  /** The suites were named with --suite (not the default battery). */
  readonly suitesNamed: boolean;
  readonly arms: readonly string[] | undefined;
  readonly model: string | undefined;
  readonly runner: readonly string[] | undefined;
  readonly plugin: string | undefined;
  readonly kernelCases: readonly number[] | undefined;
  readonly kernelOps: readonly string[] | undefined;
  readonly time: boolean;
  readonly prompts: readonly number[] | undefined;
  readonly niahCases: readonly string[] | undefined;
  readonly settings: Partial<LlamaCppSettings>;
  readonly caseTimeoutS: number;
  readonly runnerRestarts: number;
  readonly shutdownGraceS: number;
  readonly signal: AbortSignal;
  readonly openSut: OpenSut;
  readonly box: BoxSession;
  readonly llamaServerBuilt: boolean;
  readonly shard: Shard | undefined;
  readonly jobs: number;
  /** Whether this run's shard has the arm (always, unsharded); set once the battery's arms are known. */
  readonly inShard: (suite: string, arm: string) => boolean;
}

const nonEmpty = <T>(list: readonly T[] | undefined): readonly T[] | undefined => (list !== undefined && list.length > 0 ? list : undefined);

export function resolveOptions(options: RunOptions, recorder: RunDirectory, emit: RunListener): ResolvedRunOptions {
  const signal = options.signal ?? new AbortController().signal;
  return {
    suites: nonEmpty(options.suites) ?? DEFAULT_BATTERY,
    suitesNamed: nonEmpty(options.suites) !== undefined,
    arms: nonEmpty(options.arms),
    model: options.model,
    runner: nonEmpty(options.runner),
    plugin: options.plugin,
    kernelCases: nonEmpty(options.kernelCases),
    kernelOps: nonEmpty(options.kernelOps),
    time: options.time ?? false,
    prompts: nonEmpty(options.prompts),
    niahCases: nonEmpty(options.niahCases),
    settings: options.settings ?? {},
    caseTimeoutS: options.caseTimeoutS ?? DEFAULT_CASE_TIMEOUT_S,
    runnerRestarts: options.runnerRestarts ?? DEFAULT_RUNNER_RESTARTS,
    shutdownGraceS: options.shutdownGraceS ?? DEFAULT_SHUTDOWN_GRACE_S,
    signal,
    openSut: options.openSut ?? openArmSut,
    box: new BoxSession(options.box ?? resolveBoxSettings(), recorder, emit, signal),
    llamaServerBuilt: builtLlamaServer() !== undefined,
    shard: options.shard,
    jobs: options.jobs ?? DEFAULT_JOBS,
    inShard: () => true,
  };
}
