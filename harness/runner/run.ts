import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { BenchError } from "../errors.js";
import { resolveModel } from "../fixtures/registry.js";
import { goldensDir, promptTextsSha256, readGoldens } from "../goldens/goldens.js";
import { goldensModelDirName } from "../goldens/make.js";
import { assertGoldensMatchModel } from "../goldens/model-check.js";
import { sha256Bytes } from "../io/sha256.js";
import { openLlamaCppOracle } from "../oracle/llamacpp-oracle.js";
import { TeacherForcedCache } from "../oracle/teacher-forced-cache.js";
import { didYouMean } from "../registry/did-you-mean.js";
import type { RunDirectory } from "../results/run-directory.js";
import type { RunListener } from "../results/types.js";
import { loadParitySuite, type ParityArm, type ParitySuite } from "../suites/parity-suite.js";
import { LlamaCppSut, ORACLE_SETTINGS, type LlamaCppSettings } from "../sut/llamacpp.js";
import type { SystemUnderTest } from "../sut/types.js";
import { withCaseTimeout } from "../sut/with-timeout.js";
import { runParityArm } from "./parity-runner.js";

/** The battery `bench run` runs with no --suite. */
export const DEFAULT_BATTERY = ["parity16"] as const;

export const DEFAULT_CASE_TIMEOUT_S = 120;

export interface RunOptions {
  readonly suites?: readonly string[];
  /** Only these arm labels. */
  readonly arms?: readonly string[];
  /** Replace the suite's arms with one required arm on this model. */
  readonly model?: string;
  /** Only these prompt indices. */
  readonly prompts?: readonly number[];
  /** Overrides applied to every arm's llama.cpp settings. */
  readonly settings?: Partial<LlamaCppSettings>;
  readonly caseTimeoutS?: number;
  readonly signal?: AbortSignal;
  /** Opens a SUT for an arm; tests substitute fault-injecting wrappers here. */
  readonly openSut?: (arm: ParityArm, settings: LlamaCppSettings) => Promise<SystemUnderTest>;
}

/** A complete, read-only view of the options, resolved once. */
interface ResolvedRunOptions {
  readonly suites: readonly string[];
  readonly arms: readonly string[] | undefined;
  readonly model: string | undefined;
  readonly prompts: readonly number[] | undefined;
  readonly settings: Partial<LlamaCppSettings>;
  readonly caseTimeoutS: number;
  readonly signal: AbortSignal;
  readonly openSut: (arm: ParityArm, settings: LlamaCppSettings) => Promise<SystemUnderTest>;
}

function resolveOptions(options: RunOptions): ResolvedRunOptions {
  return {
    suites: options.suites !== undefined && options.suites.length > 0 ? options.suites : DEFAULT_BATTERY,
    arms: options.arms !== undefined && options.arms.length > 0 ? options.arms : undefined,
    model: options.model,
    prompts: options.prompts !== undefined && options.prompts.length > 0 ? options.prompts : undefined,
    settings: options.settings ?? {},
    caseTimeoutS: options.caseTimeoutS ?? DEFAULT_CASE_TIMEOUT_S,
    signal: options.signal ?? new AbortController().signal,
    openSut: options.openSut ?? (async (arm, settings) => LlamaCppSut.open((await resolveModel(arm.model)).path, settings, arm.label)),
  };
}

/** An arm's llama.cpp settings: the oracle recipe, then the suite's arm settings, then CLI overrides. */
export function armSettings(suite: ParitySuite, arm: ParityArm, overrides: Partial<LlamaCppSettings>, promptCount: number): LlamaCppSettings {
  const s = arm.settings ?? {};
  return {
    ...ORACLE_SETTINGS,
    sequences: Math.max(1, promptCount),
    ...(s.flash_attention === undefined ? {} : { flashAttention: s.flash_attention }),
    ...(s.kv_cache_type === undefined ? {} : { kvCacheType: s.kv_cache_type }),
    ...(s.threads === undefined ? {} : { threads: s.threads }),
    ...(s.batch_size === undefined ? {} : { batchSize: s.batch_size }),
    ...(s.context_size === undefined ? {} : { contextSize: s.context_size }),
    ...overrides,
  };
}

function selectArms(suite: ParitySuite, options: ResolvedRunOptions): ParityArm[] {
  if (options.model !== undefined) return [{ label: options.model, model: options.model, gate: "required" }];
  if (options.arms === undefined) return [...suite.arms];
  const labels = suite.arms.map((arm) => arm.label);
  return options.arms.map((label) => {
    const arm = suite.arms.find((a) => a.label === label);
    if (arm === undefined) throw new BenchError(`no arm "${label}" in suite ${suite.name}${didYouMean(label, labels)}`, { file: suite.path, field: "arms", fix: `use one of ${labels.map((l) => JSON.stringify(l)).join(", ")}` });
    return arm;
  });
}

function selectPrompts(suite: ParitySuite, options: ResolvedRunOptions): number[] {
  const all = suite.prompts.map((_, i) => i);
  if (options.prompts === undefined) return all;
  for (const p of options.prompts) {
    if (!Number.isInteger(p) || p < 0 || p >= all.length) throw new BenchError(`prompt index ${p} is out of range`, { field: "--prompt", fix: `use 0..${all.length - 1}` });
  }
  return [...options.prompts];
}

/** Loads a suite's goldens and proves they belong to its oracle model and prompts. */
async function loadVerifiedGoldens(suite: ParitySuite) {
  const oracleModel = await resolveModel(suite.oracle.model);
  const directory = goldensDir(goldensModelDirName(oracleModel), suite.name);
  if (!existsSync(join(directory, "manifest.json"))) {
    throw new BenchError(`no goldens for suite ${suite.name} on ${oracleModel.id}`, { file: directory, fix: `make them: bench goldens make --suite ${suite.name}` });
  }
  const goldens = readGoldens(directory);
  await assertGoldensMatchModel(goldens, oracleModel);
  if (goldens.manifest.prompts.texts_sha256 !== null && goldens.manifest.prompts.texts_sha256 !== promptTextsSha256(suite.prompts)) {
    throw new BenchError("the suite's prompts changed since its goldens were made", { file: join(directory, "manifest.json"), field: "prompts.texts_sha256", fix: `re-make them: bench goldens make --suite ${suite.name}` });
  }
  if (goldens.manifest.T !== suite.max_tokens) {
    throw new BenchError(`goldens hold T=${goldens.manifest.T}, the suite asks ${suite.max_tokens}`, { file: join(directory, "manifest.json"), field: "T", fix: `re-make them: bench goldens make --suite ${suite.name}` });
  }
  return { goldens, oracleModel };
}

/**
 * Runs suites arm by arm: resolve and verify the goldens, open the oracle, then for every arm open
 * the SUT, run its checks, and close it. Emits events; never prints.
 */
export async function runBattery(input: RunOptions, recorder: RunDirectory, emit: RunListener): Promise<void> {
  const options = resolveOptions(input);
  const plans = options.suites.map((name) => {
    const suite = loadParitySuite(name);
    return { suite, arms: selectArms(suite, options), prompts: selectPrompts(suite, options) };
  });
  for (const { suite, arms, prompts } of plans) {
    recorder.provenance.suites.push({ name: suite.name, path: suite.path, sha256: sha256Bytes(readFileSync(suite.path)) });
    const { goldens, oracleModel } = await loadVerifiedGoldens(suite);
    const oracle = await openLlamaCppOracle(oracleModel);
    recorder.provenance.oracles.push({ suite: suite.name, goldens: goldens.directory, model: { ...goldens.manifest.model }, oracle: { ...goldens.manifest.oracle } });
    try {
      const cache = new TeacherForcedCache(oracle);
      for (const arm of arms) {
        if (options.signal.aborted) return;
        const settings = armSettings(suite, arm, options.settings, prompts.length);
        const sut = withCaseTimeout(await options.openSut(arm, settings), suite.case_timeout_s ?? options.caseTimeoutS);
        recorder.provenance.suts.push({ suite: suite.name, arm: arm.label, provenance: { ...sut.provenance } });
        await emit({ kind: "arm-start", suite: suite.name, arm: arm.label, sut: { ...sut.provenance } });
        try {
          const { summaryLine } = await runParityArm({ suite, arm, sut, goldens, oracle: cache, prompts, emit, signal: options.signal });
          await emit({ kind: "arm-end", suite: suite.name, arm: arm.label, summaryLine });
        } finally {
          await sut.close();
        }
      }
    } finally {
      await oracle.close();
    }
  }
}
