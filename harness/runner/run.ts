import { existsSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { BenchError } from "../errors.js";
import { resolveModel } from "../fixtures/registry.js";
import { goldensDir, promptTextsSha256, readGoldens } from "../goldens/goldens.js";
import { goldensModelDirName } from "../goldens/make.js";
import { assertGoldensMatchModel } from "../goldens/model-check.js";
import { sha256Bytes } from "../io/sha256.js";
import { readGguf } from "../gguf/read.js";
import { validateLlamaMetadata } from "../gguf/llama-metadata.js";
import { openLlamaCppOracle } from "../oracle/llamacpp-oracle.js";
import { TeacherForcedCache } from "../oracle/teacher-forced-cache.js";
import { didYouMean } from "../registry/did-you-mean.js";
import type { RunDirectory } from "../results/run-directory.js";
import type { RunListener } from "../results/types.js";
import { armOracle, goldensSuiteName, type GateLevel, type SuiteArm, type ParitySuite } from "../suites/parity-suite.js";
import { loadSuite, suiteArgument, type Suite } from "../suites/load.js";
import { LlamaCppSut, ORACLE_SETTINGS, type LlamaCppSettings } from "../sut/llamacpp.js";
import type { SystemUnderTest, TraceCapture } from "../sut/types.js";
import { runCheck } from "./check.js";
import { withCaseTimeout } from "../sut/with-timeout.js";
import { DEFAULT_RUNNER_RESTARTS, RestartingRunner } from "../sut/restarting-runner.js";
import { openHttpSut, startManagedServer, stopManagedServer } from "../sut/http.js";
import { startServerCommand } from "../sut/server-command.js";
import { builtLlamaServer, LLAMA_SERVER_PLACEHOLDER, llamaServerPath, needsLlamaServer } from "../sut/llama-server-binary.js";
import { openStdioSut } from "../sut/stdio.js";
import { DEFAULT_SHUTDOWN_GRACE_S } from "../sut/child-process.js";
import { openPluginSut } from "../sut/plugin.js";
import { DEFAULT_TIMING_PLAN, runKernelArm } from "./kernel-runner.js";
import { assertKernelSelection } from "./kernel-selection.js";
import type { KernelArm, KernelSuite } from "../suites/kernel-suite.js";
import { PACKAGE_ROOT } from "../paths.js";
import { sha256File } from "../io/sha256.js";
import { runParityArm } from "./parity-runner.js";
import type { ExpectedModel } from "./identity.js";
import { needleCases, runNiahArm } from "./niah-runner.js";
import { runConformanceArm } from "./conformance-runner.js";
import type { ConformanceArm, ConformanceSuite } from "../suites/conformance-suite.js";
import { resolveNiahSuite, type NiahSuite } from "../suites/niah-suite.js";
import { DEFAULT_BATTERY } from "../suites/default-battery.js";
import { boxProvenance, resolveBoxSettings, type BoxSettings } from "../box/config.js";
import { BoxSession } from "../box/leg.js";
import type { ChildProcess } from "node:child_process";
import { armKey, armsOfShard, type Shard } from "./shard.js";

export const DEFAULT_CASE_TIMEOUT_S = 120;

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
}

/** What opening an arm's SUT needs besides the arm: where its log lines go (progress), and its shutdown grace. */
export interface SutContext {
  readonly onLog?: (line: string) => void;
  readonly onWarning?: (message: string) => void;
  readonly shutdownGraceS: number;
  /** Seconds a runner or server may take to come up (bench.config.json `boot_timeout_s`). */
  readonly bootTimeoutS: number;
  /** Told of each process the SUT starts, so its arm keeps its stderr tail, exit status and evidence. */
  readonly onProcess?: (child: ChildProcess, commandLine: string) => void;
  /** Added to runners' environment (bench.config.json `env`). */
  readonly env?: Readonly<Record<string, string>>;
}

export type OpenSut = (arm: SuiteArm, settings: LlamaCppSettings, context: SutContext) => Promise<SystemUnderTest>;

/**
 * The SUT an arm names: the embedded llama.cpp SUT, our server started on loopback and driven over
 * HTTP, or a runner command speaking the runner protocol over stdio.
 */
async function openArmSut(arm: SuiteArm, settings: LlamaCppSettings, context: SutContext): Promise<SystemUnderTest> {
  const model = await resolveModel(arm.model);
  if (arm.sut === "stdio") {
    return openStdioSut((arm.command ?? []).map((part) => fillPlaceholders(part, model.path)), { label: arm.label, modelPath: model.path, modelSha256: await sha256File(model.path), ...context });
  }
  if (arm.sut !== "http") return LlamaCppSut.open(model.path, settings, arm.label);
  // The arm's model is the GGUF that server serves (its goldens, its token kinds when no dialect has them); it was not started here, so not hashed as served.
  if (arm.url !== undefined) return openHttpSut(arm.url, { label: arm.label, apiKey: apiKeyOf(arm), modelPath: model.path, ...context });
  if (arm.command !== undefined) {
    const server = await startServerCommand(arm.command.map((part) => fillPlaceholders(part, model.path, settings)), { label: arm.label, bootTimeoutS: context.bootTimeoutS, onProgress: context.onLog, onProcess: context.onProcess });
    try {
      return await openHttpSut(server.baseUrl, { label: arm.label, managed: server, command: server.argv, modelPath: model.path, modelSha256: await sha256File(model.path), apiKey: apiKeyOf(arm), ...context });
    } catch (error) {
      await stopManagedServer(server, context.shutdownGraceS, context.onWarning);
      throw error;
    }
  }
  if (settings.promptOverflow !== "error") {
    throw new BenchError(`arm "${arm.label}": our server refuses prompts that do not fit, it cannot ${settings.promptOverflow}`, { field: "settings.prompt_overflow", fix: "drop prompt_overflow from the server arm, or run that arm on the embedded SUT" });
  }
  const managed = await startManagedServer({
    modelPath: model.path, slots: settings.sequences, queue: settings.sequences, contextSize: settings.contextSize,
    threads: settings.threads, flashAttention: settings.flashAttention, kvCacheType: settings.kvCacheType, batchSize: settings.batchSize,
    bootTimeoutS: context.bootTimeoutS, onProcess: context.onProcess,
  });
  try {
    const sut = await openHttpSut(managed.baseUrl, { label: arm.label, managed, modelPath: model.path, modelSha256: await sha256File(model.path), ...context });
    assertServerHonours(arm, settings, sut.provenance.settings);
    return sut;
  } catch (error) {
    await stopManagedServer(managed, context.shutdownGraceS, context.onWarning);
    throw error;
  }
}

/** The server's own report of its numerics must equal what the arm asked for: a setting it dropped would make its results another configuration's. */
function assertServerHonours(arm: SuiteArm, requested: LlamaCppSettings, reported: Readonly<Record<string, string | number | boolean>>): void {
  const keys = ["flashAttention", "kvCacheType", "threads", "batchSize", "contextSize", "sequences"] as const;
  for (const key of keys) {
    if (reported[key] !== requested[key]) {
      throw new BenchError(`arm "${arm.label}": the server reports ${key} ${String(reported[key])} in /v1/models, the arm asked for ${String(requested[key])}`, { field: "settings", fix: "use a server that honours every numerics setting, or drop the setting from the arm" });
    }
  }
}

/** A complete, read-only view of the options, resolved once. */
interface ResolvedRunOptions {
  readonly suites: readonly string[];
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
  /** Whether this run's shard has the arm (always, unsharded); set once the battery's arms are known. */
  readonly inShard: (suite: string, arm: string) => boolean;
}

function resolveOptions(options: RunOptions, recorder: RunDirectory, emit: RunListener): ResolvedRunOptions {
  const signal = options.signal ?? new AbortController().signal;
  return {
    suites: options.suites !== undefined && options.suites.length > 0 ? options.suites : DEFAULT_BATTERY,
    arms: options.arms !== undefined && options.arms.length > 0 ? options.arms : undefined,
    model: options.model,
    runner: options.runner !== undefined && options.runner.length > 0 ? options.runner : undefined,
    plugin: options.plugin,
    kernelCases: options.kernelCases !== undefined && options.kernelCases.length > 0 ? options.kernelCases : undefined,
    kernelOps: options.kernelOps !== undefined && options.kernelOps.length > 0 ? options.kernelOps : undefined,
    time: options.time ?? false,
    prompts: options.prompts !== undefined && options.prompts.length > 0 ? options.prompts : undefined,
    niahCases: options.niahCases !== undefined && options.niahCases.length > 0 ? options.niahCases : undefined,
    settings: options.settings ?? {},
    caseTimeoutS: options.caseTimeoutS ?? DEFAULT_CASE_TIMEOUT_S,
    runnerRestarts: options.runnerRestarts ?? DEFAULT_RUNNER_RESTARTS,
    shutdownGraceS: options.shutdownGraceS ?? DEFAULT_SHUTDOWN_GRACE_S,
    signal,
    openSut: options.openSut ?? openArmSut,
    box: new BoxSession(options.box ?? resolveBoxSettings(), recorder, emit, signal),
    llamaServerBuilt: builtLlamaServer() !== undefined,
    shard: options.shard,
    inShard: () => true,
  };
}

/**
 * An arm's llama.cpp settings: the oracle recipe, then what the suite's shape needs (`fitted`),
 * then the suite's arm settings, then CLI overrides.
 */
export function armSettings(arm: SuiteArm, overrides: Partial<LlamaCppSettings>, sequences: number, fitted: Partial<LlamaCppSettings> = {}): LlamaCppSettings {
  const s = arm.settings ?? {};
  // The runner protocol carries no settings: a runner reports its own in its hello, so asking it for others would record a lie.
  if (arm.sut === "stdio" && Object.keys(s).length + Object.keys(overrides).length > 0) {
    const named = [...Object.keys(s), ...Object.keys(overrides)].join(", ");
    throw new BenchError(`arm "${arm.label}" is a runner: settings (${named}) cannot reach it`, { field: "settings", fix: "set them in the runner itself (it reports them in its hello), and drop them from the arm and the command line" });
  }
  return {
    ...ORACLE_SETTINGS,
    sequences: Math.max(1, sequences),
    ...fitted,
    ...(s.flash_attention === undefined ? {} : { flashAttention: s.flash_attention }),
    ...(s.kv_cache_type === undefined ? {} : { kvCacheType: s.kv_cache_type }),
    ...(s.threads === undefined ? {} : { threads: s.threads }),
    ...(s.batch_size === undefined ? {} : { batchSize: s.batch_size }),
    ...(s.context_size === undefined ? {} : { contextSize: s.context_size }),
    ...(s.prompt_overflow === undefined ? {} : { promptOverflow: s.prompt_overflow }),
    ...overrides,
  };
}

function selectArms<Arm extends { readonly label: string; readonly command?: readonly string[] }>(suite: { readonly name: string; readonly kind: Suite["kind"]; readonly arms: readonly Arm[] }, options: ResolvedRunOptions): Arm[] {
  return armsBeforeSharding(suite, options).filter((arm) => options.inShard(suite.name, arm.label));
}

function armsBeforeSharding<Arm extends { readonly label: string; readonly command?: readonly string[] }>(suite: { readonly kind: Suite["kind"]; readonly arms: readonly Arm[] }, options: ResolvedRunOptions): Arm[] {
  // Arms on llama-server run where it is built; unnamed and unbuilt, they are left out with a note (runBattery), named, they fail loudly.
  const byLabel = () => (options.arms === undefined ? suite.arms.filter((arm) => options.llamaServerBuilt || !needsLlamaServer(arm)) : suite.arms.filter((arm) => options.arms!.includes(arm.label)));
  // --model and --runner name model SUTs: kernel suites keep their arms (--plugin swaps those), and a runner is no HTTP server.
  if (suite.kind === "kernels") return byLabel();
  if (options.runner !== undefined && suite.kind === "conformance") return [];
  // --runner and --model keep an arm's settings (a needle suite's context size, say) and swap what runs: the arm
  // --arm names, else the first. The template carries its oracle too (a family's goldens in a suite spanning families).
  const template = (byLabel()[0] ?? suite.arms[0]) as Arm & { readonly model?: string };
  // A runner takes no settings (armSettings): it reports its own in its hello.
  if (options.runner !== undefined) {
    return [{ ...template, label: "runner", model: options.model ?? template.model, sut: "stdio", command: options.runner, gate: "required", why: undefined, settings: undefined }];
  }
  // With --arm, --model swaps the model of the arms named and keeps their SUT (a server arm serves the new model) and oracle.
  if (options.model !== undefined) {
    const model = options.model;
    if (options.arms === undefined) return [{ ...template, label: model, model, gate: "required", why: undefined }];
    return byLabel().map((arm) => ({ ...arm, label: modelOverrideLabel(arm.label, model), model, gate: "required", why: undefined }));
  }
  return byLabel();
}

/** An arm run on another model (--arm with --model) says both. */
function modelOverrideLabel(armLabel: string, model: string): string {
  return `${armLabel} on ${model}`;
}

/** Every --arm must name an arm of some suite in the run. */
function assertArmsExist(suites: readonly Suite[], options: ResolvedRunOptions): void {
  const labels = suites.flatMap((suite) => suite.arms.map((arm) => arm.label));
  for (const label of options.arms ?? []) {
    if (!labels.includes(label)) {
      throw new BenchError(`no arm "${label}" in ${suites.map((s) => s.name).join(", ")}${didYouMean(label, labels)}`, {
        file: suites[0]?.path, field: "arms", fix: `use one of ${labels.map((l) => JSON.stringify(l)).join(", ")}`,
      });
    }
  }
}

/** The indices `--prompt` / `--case` asked for (all when none), each checked against the suite's count. */
function selectIndices(count: number, requested: readonly number[] | undefined, what: string, field: string, file?: string): number[] {
  if (requested === undefined) return Array.from({ length: count }, (_, i) => i);
  for (const i of requested) {
    if (!Number.isInteger(i) || i < 0 || i >= count) throw new BenchError(`${what} ${i} is out of range`, { file, field, fix: `use 0..${count - 1}` });
  }
  return [...requested];
}

/**
 * A suite's command word or library path with its placeholders filled: `{bench}` the harness's
 * directory, `{model}` the arm's model, `{llama-server}` the built llama-server, and for a server
 * command the arm's numerics (`{threads}`, `{context_size}`, `{batch_size}`, `{sequences}`), so the
 * argv and the recorded settings cannot disagree.
 */
function fillPlaceholders(text: string, modelPath = "", settings?: LlamaCppSettings): string {
  let filled = text.replaceAll("{model}", modelPath).replaceAll("{bench}", PACKAGE_ROOT);
  if (filled.includes(LLAMA_SERVER_PLACEHOLDER)) filled = filled.replaceAll(LLAMA_SERVER_PLACEHOLDER, requireLlamaServer());
  if (settings === undefined) return filled;
  return filled.replaceAll("{threads}", String(settings.threads)).replaceAll("{context_size}", String(settings.contextSize))
    .replaceAll("{batch_size}", String(settings.batchSize)).replaceAll("{sequences}", String(settings.sequences));
}

function requireLlamaServer(): string {
  const binary = builtLlamaServer();
  if (binary === undefined) throw new BenchError(`llama-server is not built (${llamaServerPath()} is missing)`, { field: "command", fix: "build it once: scripts/build-llama-server.sh (needs git, cmake, g++; a few minutes)" });
  return binary;
}

/** The API key an arm names by environment variable: read at run time, never written to results. */
function apiKeyOf(arm: { readonly label: string; readonly api_key_env?: string }): string | undefined {
  if (arm.api_key_env === undefined) return undefined;
  const key = process.env[arm.api_key_env];
  if (key === undefined || key === "") throw new BenchError(`arm "${arm.label}": the environment variable ${arm.api_key_env} is not set`, { field: "api_key_env", fix: `export ${arm.api_key_env}=<the server's API key>` });
  return key;
}

/** Loads a suite's goldens on one of its oracle models (default: the suite's) and proves they belong to that model and the prompts. */
export async function loadVerifiedGoldens(suite: ParitySuite, oracleReference = suite.oracle.model) {
  const oracleModel = await resolveModel(oracleReference);
  const filedUnder = goldensSuiteName(suite);
  const directory = goldensDir(goldensModelDirName(oracleModel), filedUnder);
  // Borrowed goldens are made by the suite that lends them; a suite's own, by the name or path that finds it again.
  const makeWith = suite.goldens_of !== undefined ? filedUnder : suiteArgument(suite);
  if (!existsSync(join(directory, "manifest.json"))) {
    throw new BenchError(`no goldens for suite ${filedUnder} on ${oracleModel.id}`, { file: directory, fix: `make them: bench goldens make --suite ${makeWith}` });
  }
  const goldens = readGoldens(directory);
  await assertGoldensMatchModel(goldens, oracleModel);
  if (goldens.manifest.prompts.texts_sha256 !== null && goldens.manifest.prompts.texts_sha256 !== promptTextsSha256(suite.prompts)) {
    throw new BenchError("the suite's prompts changed since its goldens were made", { file: join(directory, "manifest.json"), field: "prompts.texts_sha256", fix: `re-make them: bench goldens make --suite ${makeWith}` });
  }
  if (goldens.manifest.T !== suite.max_tokens) {
    throw new BenchError(`goldens hold T=${goldens.manifest.T}, the suite asks ${suite.max_tokens}`, { file: join(directory, "manifest.json"), field: "T", fix: `re-make them: bench goldens make --suite ${makeWith}` });
  }
  return { goldens, oracleModel };
}

/**
 * The trace-region demand a SUT reports, if it reports any. A malformed answer (or an error) is
 * the SUT's protocol error: it lands in the results as an error verdict of the arm, never a crash.
 */
async function askTraceDemand(suite: Suite, arm: { readonly label: string; readonly gate: GateLevel }, sut: SystemUnderTest, reproduce: string, emit: RunListener): Promise<TraceCapture[]> {
  if (sut.traceDemand === undefined) return [];
  let captures: TraceCapture[] = [];
  await runCheck({ suiteName: suite.name, arm, sut, emit, signal: new AbortController().signal, reproduce }, "trace_demand", "required", ["traceDemand"], async () => {
    captures = await sut.traceDemand!();
    const over = captures.filter(exceedsFixedRegion);
    const overflowing = over.map((c) => `${c.capture} demands ${c.demandBytes} B, its ${c.regionSemantics} region holds ${c.regionBytes} B`).join("; ");
    return {
      status: over.length === 0 ? "pass" : "fail",
      summary: `${arm.label} trace demand: ${captures.length} captured graphs reported${over.length === 0 ? "" : `; FAIL: ${overflowing}: the capture does not fit its trace region`}`,
      metrics: { captures: captures.length, over_region: over.length },
    };
  });
  return captures;
}

/** A capture that needs more than a fixed trace region holds cannot replay on the device (a dynamic region has no fixed size). */
function exceedsFixedRegion(capture: TraceCapture): boolean {
  return capture.regionSemantics !== "dynamic" && capture.demandBytes > capture.regionBytes;
}

/**
 * Opens each arm's SUT in turn (with the per-case timeout), hands it to `runArm`, and always closes
 * it. Around each arm, the box (harness/box/leg.ts): the device lock and a reset before a device
 * arm, the leg timeout once the SUT is up, and after it the reset a killed process calls for and
 * the arm's stderr tail and failure evidence.
 */
async function forEachArm<Arm extends { readonly label: string; readonly gate: GateLevel }, Sut extends SystemUnderTest>(
  suite: Suite,
  arms: readonly Arm[],
  open: (arm: Arm, context: SutContext) => Promise<Sut>,
  options: ResolvedRunOptions,
  recorder: RunDirectory,
  emit: RunListener,
  runArm: (arm: Arm, sut: SystemUnderTest, opened: Sut, signal: AbortSignal) => Promise<{ summaryLine: string | undefined }>,
): Promise<void> {
  for (const arm of arms) {
    if (options.signal.aborted) return;
    const leg = await options.box.beginLeg(suite.name, arm);
    let summaryLine: string | undefined;
    try {
      // A board whose reset failed is in an unknown state: the arm does not run on it (leg.end() says why).
      if (leg.failedReset === undefined) {
        const context = { ...sutContext(arm, options, emit), ...leg.sutHooks };
        const opened = await open(arm, context);
        leg.startClock();
        const caseTimeoutS = suite.case_timeout_s ?? options.caseTimeoutS;
        // A runner that stops answering is replaced (restarting-runner.ts); an in-process SUT cannot be, and a server arm's timeout ends its checks.
        const sut = opened.provenance.kind === "stdio"
          ? new RestartingRunner(opened, { caseTimeoutS, limit: options.runnerRestarts, signal: leg.signal, open: () => open(arm, context), beforeRestart: (restart, why) => leg.restartRunner(restart, why) }).sut
          : withCaseTimeout(opened, caseTimeoutS, leg.signal);
        recorder.provenance.suts.push({ suite: suite.name, arm: arm.label, provenance: { ...sut.provenance } });
        await emit({ kind: "arm-start", suite: suite.name, arm: arm.label, sut: { ...sut.provenance } });
        try {
          ({ summaryLine } = await runArm(arm, sut, opened, leg.signal));
          // Asked after the checks, so every graph the SUT captured while serving them is counted (not after a stop: the SUT is being shut down).
          for (const capture of leg.signal.aborted ? [] : await askTraceDemand(suite, arm, sut, armCommand(suite, arm, options), emit)) {
            recorder.provenance.trace.push({ suite: suite.name, arm: arm.label, capture: capture.capture, demand_bytes: capture.demandBytes, region_bytes: capture.regionBytes, region_semantics: capture.regionSemantics });
          }
        } finally {
          await sut.close();
        }
      }
    } finally {
      const verdict = await leg.end();
      if (verdict !== undefined) await emit({ kind: "verdict", verdict });
    }
    await emit({ kind: "arm-end", suite: suite.name, arm: arm.label, summaryLine });
  }
}

/** A runner's log lines and shutdown warnings, as progress (a device runner may take minutes to boot). */
function sutContext(arm: { readonly label: string }, options: ResolvedRunOptions, emit: RunListener): SutContext {
  const show = (line: string) => void emit({ kind: "progress", message: `${arm.label}: ${line}` });
  return { onLog: show, onWarning: show, shutdownGraceS: options.shutdownGraceS, bootTimeoutS: options.box.settings.bootTimeoutS };
}

function armCommand(suite: Suite, arm: { readonly label: string; readonly model?: string }, options: ResolvedRunOptions): string {
  const model = options.model === undefined ? "" : ` --model ${options.model}`;
  if (suite.kind === "kernels") return `bench run --suite ${suiteArgument(suite)} ${options.plugin !== undefined ? `--plugin ${JSON.stringify(options.plugin)}` : `--arm ${JSON.stringify(arm.label)}`}`;
  const overridden = options.model === undefined ? undefined : options.arms?.find((label) => modelOverrideLabel(label, options.model!) === arm.label);
  // A runner takes the place of the arm --arm names (its oracle, in a suite spanning families), so the line names it too.
  const template = options.arms === undefined ? undefined : suite.arms.find((candidate) => options.arms!.includes(candidate.label));
  const runnerArm = template === undefined ? "" : ` --arm ${JSON.stringify(template.label)}`;
  const target = options.runner !== undefined ? `--runner ${JSON.stringify(options.runner.join(" "))}${model}${runnerArm}`
    : overridden !== undefined ? `--arm ${JSON.stringify(overridden)} --model ${arm.model}`
    : options.model !== undefined ? `--model ${arm.model}` : `--arm ${JSON.stringify(arm.label)}`;
  return `bench run --suite ${suiteArgument(suite)} ${target}`;
}

async function runParitySuite(suite: ParitySuite, options: ResolvedRunOptions, recorder: RunDirectory, emit: RunListener): Promise<void> {
  const arms = selectArms(suite, options);
  const prompts = selectIndices(suite.prompts.length, options.prompts, "prompt index", "--prompt");
  // Arms are grouped by the oracle they answer to (one per model family in a zoo suite), in suite order.
  for (const oracleReference of [...new Set(arms.map((arm) => armOracle(suite, arm)))]) {
    const group = arms.filter((arm) => armOracle(suite, arm) === oracleReference);
    const { goldens, oracleModel } = await loadVerifiedGoldens(suite, oracleReference);
    const oracle = await openLlamaCppOracle(oracleModel);
    recorder.provenance.oracles.push({ suite: suite.name, goldens: goldens.directory, model: { ...goldens.manifest.model }, oracle: { ...goldens.manifest.oracle } });
    try {
      const cache = new TeacherForcedCache(oracle);
      const vocabSize = validateLlamaMetadata(readGguf(oracleModel.path), oracleModel.path).vocabSize;
      // A context sized to the prompts: one KV cell per token in flight is all greedy decoding needs,
      // and a 16-sequence context of 1,024 cells each costs more to set up than the checks themselves.
      const longest = Math.max(...prompts.map((p) => goldens.promptIds[p].length)) + goldens.manifest.T;
      const fitted = { contextSize: Math.ceil((longest + 1) / 64) * 64 };
      const open = (arm: SuiteArm, context: SutContext) => options.openSut(arm, armSettings(arm, options.settings, prompts.length, fitted), context);
      await forEachArm(suite, group, open, options, recorder, emit, (arm, sut, _opened, signal) => runParityArm({
        suiteName: suite.name, suite, arm, sut, goldens, oracle: cache, prompts, vocabSize, emit, signal, reproduce: armCommand(suite, arm, options),
      }));
    } finally {
      await oracle.close();
    }
  }
}

/** The model file an arm names, as its identity check expects it. */
async function armModel(arm: SuiteArm): Promise<ExpectedModel> {
  const model = await resolveModel(arm.model);
  return { file: basename(model.path), sha256: await sha256File(model.path), what: `the model the arm names (${arm.model})` };
}

async function runNiahSuite(suite: NiahSuite, options: ResolvedRunOptions, recorder: RunDirectory, emit: RunListener): Promise<void> {
  const spec = resolveNiahSuite(suite);
  const cases = needleCases(spec, options.niahCases);
  if (cases.length === 0) throw new BenchError(`no needle case matches ${options.niahCases?.join(", ")}`, { file: suite.path, field: "--niah-case", fix: "use L:depth:trial with values from the suite, e.g. 4000:0.5:0" });
  const open = (arm: SuiteArm, context: SutContext) => options.openSut(arm, armSettings(arm, options.settings, 1), context);
  await forEachArm(suite, selectArms(suite, options), open, options, recorder, emit, async (arm, sut, _opened, signal) => runNiahArm({
    suiteName: suite.name, spec, cases, arm, sut, emit, signal, reproduce: armCommand(suite, arm, options), expectedModel: await armModel(arm),
  }));
}

/** A conformance arm's server: a running one at `url`, one its command starts, or ours started on loopback for the arm. */
async function openConformanceServer(suite: ConformanceSuite, arm: ConformanceArm, context: SutContext, emit: RunListener) {
  if (arm.url !== undefined) return openHttpSut(arm.url, { label: arm.label, apiKey: apiKeyOf(arm) });
  if (arm.model === undefined) throw new BenchError(`arm "${arm.label}" names neither a model nor a url`, { file: suite.path, field: "arms", fix: "give it a model (our server, or its command's, is started on it) or the url of a running server" });
  const model = await resolveModel(arm.model);
  const onProgress = (message: string) => void emit({ kind: "progress", message });
  const started = arm.command === undefined ? undefined
    : await startServerCommand(arm.command.map((part) => fillPlaceholders(part, model.path)), { label: arm.label, bootTimeoutS: context.bootTimeoutS, onProgress, onProcess: context.onProcess });
  const managed = started ?? await startManagedServer({
    modelPath: model.path, slots: arm.server?.slots ?? 2, queue: arm.server?.queue ?? 1, contextSize: 1024, threads: 1, flashAttention: false,
    bootTimeoutS: context.bootTimeoutS, simulateBootSeconds: arm.server?.simulate_boot_s ?? 0, onProgress, onProcess: context.onProcess,
  });
  try {
    return await openHttpSut(managed.baseUrl, { label: arm.label, managed, modelPath: model.path, modelSha256: await sha256File(model.path), apiKey: apiKeyOf(arm), command: started?.argv, ...context });
  } catch (error) {
    await stopManagedServer(managed, context.shutdownGraceS, context.onWarning);
    throw error;
  }
}

/** The one arm `--plugin` gives a kernel suite. */
const PLUGIN_ARM = "plugin";

/** A kernel arm's plugin: the arm's shared library, or `--plugin`. */
async function runKernelSuite(suite: KernelSuite, options: ResolvedRunOptions, recorder: RunDirectory, emit: RunListener): Promise<void> {
  const cases = selectIndices(suite.cases.length, options.kernelCases, "kernel case", "--case", suite.path).map((index) => ({ index, spec: suite.cases[index] }))
    .filter(({ spec }) => options.kernelOps === undefined || options.kernelOps.includes(spec.op));
  const arms = options.plugin !== undefined ? [{ label: PLUGIN_ARM, plugin: options.plugin, gate: "required" as const }].filter((arm) => options.inShard(suite.name, arm.label)) : selectArms(suite, options);
  const open = (arm: KernelArm, context: SutContext) => arm.runner !== undefined
    ? openStdioSut(arm.runner.map((part) => fillPlaceholders(part)), { label: arm.label, ...context })
    : openPluginSut(fillPlaceholders(arm.plugin ?? ""), arm.label, context);
  await forEachArm(suite, arms, open, options, recorder, emit, (arm, sut, _opened, signal) => runKernelArm({
    suiteName: suite.name, arm, sut, cases, emit, signal, reproduce: armCommand(suite, arm, options),
    timing: options.time || suite.time === true ? DEFAULT_TIMING_PLAN : undefined,
  }));
}

async function runConformanceSuite(suite: ConformanceSuite, arms: readonly ConformanceArm[], options: ResolvedRunOptions, recorder: RunDirectory, emit: RunListener): Promise<void> {
  await forEachArm(suite, arms, (arm, context) => openConformanceServer(suite, arm, context, emit), options, recorder, emit, (arm, sut, server, signal) => runConformanceArm({
    suiteName: suite.name, arm, sut, emit, signal,
    reproduce: armCommand(suite, arm, options), checks: suite.checks,
    target: {
      baseUrl: server.baseUrl, model: arm.model_id ?? String(server.provenance.settings.model), apiKey: apiKeyOf(arm), managed: server.managed,
      ...(arm.server === undefined ? {} : { slots: arm.server.slots ?? 2, queue: arm.server.queue ?? 1 }), expectMetrics: arm.expect_metrics ?? [],
    },
  }));
}

/**
 * Arms on llama.cpp's own server need it built (scripts/build-llama-server.sh). Where it is not,
 * the run leaves them out and says so, so `bench run` on a fresh clone still runs everything else;
 * with BENCH_REQUIRE_LLAMA_SERVER=1 (CI, which builds it) their absence is an error instead.
 */
async function noteArmsWithoutLlamaServer(suites: readonly Suite[], options: ResolvedRunOptions, emit: RunListener): Promise<void> {
  if (options.llamaServerBuilt || options.arms !== undefined) return;
  const left = suites.flatMap((suite) => (suite.arms as readonly { label: string; command?: readonly string[] }[]).filter(needsLlamaServer).map((arm) => `${suite.name} / ${arm.label}`));
  if (left.length === 0) return;
  if (process.env.BENCH_REQUIRE_LLAMA_SERVER === "1") {
    throw new BenchError(`BENCH_REQUIRE_LLAMA_SERVER=1 but llama-server is not built (${llamaServerPath()}); ${left.length} arm(s) need it`, { field: "BENCH_REQUIRE_LLAMA_SERVER", fix: "run scripts/build-llama-server.sh first" });
  }
  await emit({ kind: "notice", message: `note: ${left.length} arm(s) on llama.cpp's llama-server left out, it is not built (${left.join(", ")}): scripts/build-llama-server.sh builds it once (a few minutes)` });
}

/**
 * Runs suites arm by arm: resolve and validate every suite first (bad input fails before any work),
 * then per suite verify its goldens and open its oracle where it has one, and per arm open the SUT,
 * run its checks and close it. Emits events; never prints.
 */
export async function runBattery(input: RunOptions, recorder: RunDirectory, emit: RunListener): Promise<BatteryDeal> {
  const unsharded = resolveOptions(input, recorder, emit);
  try {
    const suites = unsharded.suites.map((name) => loadSuite(name));
    assertArmsExist(suites, unsharded);
    assertKernelSelection(suites, { ...unsharded, suitesNamed: input.suites !== undefined && input.suites.length > 0 });
    await noteArmsWithoutLlamaServer(suites, unsharded, emit);
    const armsOf = (suite: Suite): string[] => suite.kind === "kernels" && unsharded.plugin !== undefined ? [PLUGIN_ARM] : armsBeforeSharding<{ readonly label: string; readonly command?: readonly string[] }>(suite, unsharded).map((arm) => arm.label);
    const runnable = suites.filter((s) => armsOf(s).length > 0);
    if (runnable.length === 0) {
      throw new BenchError(`no arm of ${suites.map((s) => s.name).join(", ")} can run with these options`, { field: "--runner", fix: "a runner is not an HTTP server: run conformance suites without --runner" });
    }
    recorder.provenance.box = boxProvenance(unsharded.box.settings);
    const battery = runnable.flatMap((suite) => armsOf(suite).map((arm) => ({ suite: suite.name, arm })));
    const options = shardOptions(unsharded, battery);
    const deal = { batteryArms: battery.length, arms: battery.filter((arm) => options.inShard(arm.suite, arm.arm)).map((arm) => `${arm.suite}/${arm.arm}`) };
    for (const suite of runnable) {
      // Every shard records every suite of the battery (bench merge checks they ran the same ones), whether or not it has arms of it.
      recorder.provenance.suites.push({ name: suite.name, path: suite.path, sha256: sha256Bytes(readFileSync(suite.path)) });
      if (options.signal.aborted) return deal;
      if (suite.kind === "parity") await runParitySuite(suite, options, recorder, emit);
      else if (suite.kind === "niah") await runNiahSuite(suite, options, recorder, emit);
      else if (suite.kind === "kernels") await runKernelSuite(suite, options, recorder, emit);
      else await runConformanceSuite(suite, selectArms(suite, options), options, recorder, emit);
    }
    return deal;
  } finally {
    await unsharded.box.close();
  }
}

/** The arms a run was dealt (`suite/arm`; all of them, unsharded) out of how many the battery has. */
export interface BatteryDeal {
  readonly arms: readonly string[];
  readonly batteryArms: number;
}

/** The options limited to the run's shard (an empty share runs nothing). */
function shardOptions(options: ResolvedRunOptions, battery: readonly { suite: string; arm: string }[]): ResolvedRunOptions {
  if (options.shard === undefined) return options;
  const mine = armsOfShard(battery, options.shard);
  return { ...options, inShard: (suite, arm) => mine.has(armKey({ suite, arm })) };
}
