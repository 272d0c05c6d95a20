import { BenchError } from "../errors.js";
import { resolveModel } from "../fixtures/registry.js";
import { sha256File } from "../io/sha256.js";
import { PACKAGE_ROOT } from "../paths.js";
import type { SuiteArm } from "../suites/parity-suite.js";
import type { ChildProcess } from "node:child_process";
import { startManagedServer, stopManagedServer } from "../sut/managed-server.js";
import { openHttpSut } from "../sut/http.js";
import { builtLlamaServer, LLAMA_SERVER_PLACEHOLDER, llamaServerPath } from "../sut/llama-server-binary.js";
import { LlamaCppSut, ORACLE_SETTINGS, type LlamaCppSettings } from "../sut/llamacpp.js";
import { startServerCommand } from "../sut/server-command.js";
import { openStdioSut } from "../sut/stdio.js";
import type { SystemUnderTest } from "../sut/types.js";

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
  /** The arm's stop (the run's Ctrl-C, or its leg timeout): a boot or an opening probe in flight is given up on at once, SutStoppedError. */
  readonly signal?: AbortSignal;
}

export type OpenSut = (arm: SuiteArm, settings: LlamaCppSettings, context: SutContext) => Promise<SystemUnderTest>;

/**
 * The SUT an arm names: the embedded llama.cpp SUT, our server started on loopback and driven over
 * HTTP, or a runner command speaking the runner protocol over stdio.
 */
export async function openArmSut(arm: SuiteArm, settings: LlamaCppSettings, context: SutContext): Promise<SystemUnderTest> {
  const model = await resolveModel(arm.model);
  if (arm.sut === "stdio") {
    return openStdioSut((arm.command ?? []).map((part) => fillPlaceholders(part, model.path)), { label: arm.label, modelPath: model.path, modelSha256: await sha256File(model.path), ...context });
  }
  if (arm.sut !== "http") {
    if (settings.prefillChunk !== undefined) throw new BenchError(`arm "${arm.label}": prefill_chunk is a setting of our server, the embedded SUT prefills in batches of batch_size`, { field: "settings.prefill_chunk", fix: "run the arm through our server (\"sut\": \"http\"), or set batch_size instead" });
    return LlamaCppSut.open(model.path, settings, arm.label);
  }
  // The arm's model is the GGUF that server serves (its goldens, its token kinds when no dialect has them); it was not started here, so not hashed as served.
  if (arm.url !== undefined) return openHttpSut(arm.url, { label: arm.label, apiKey: apiKeyOf(arm), modelPath: model.path, ...context });
  if (arm.command !== undefined) {
    const server = await startServerCommand(arm.command.map((part) => fillPlaceholders(part, model.path, settings)), { label: arm.label, bootTimeoutS: context.bootTimeoutS, onProgress: context.onLog, onProcess: context.onProcess, signal: context.signal, shutdownGraceS: context.shutdownGraceS });
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
    threads: settings.threads, flashAttention: settings.flashAttention, kvCacheType: settings.kvCacheType, batchSize: settings.batchSize, prefillChunk: settings.prefillChunk,
    bootTimeoutS: context.bootTimeoutS, onProcess: context.onProcess, signal: context.signal, shutdownGraceS: context.shutdownGraceS,
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
  for (const key of [...keys, ...(requested.prefillChunk === undefined ? [] : ["prefillChunk" as const])]) {
    if (reported[key] !== requested[key]) {
      throw new BenchError(`arm "${arm.label}": the server reports ${key} ${String(reported[key])} in /v1/models, the arm asked for ${String(requested[key])}`, { field: "settings", fix: "use a server that honours every numerics setting, or drop the setting from the arm" });
    }
  }
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
    ...(s.prefill_chunk === undefined ? {} : { prefillChunk: s.prefill_chunk }),
    ...overrides,
  };
}

/**
 * A suite's command word or library path with its placeholders filled: `{bench}` the harness's
 * directory, `{model}` the arm's model, `{llama-server}` the built llama-server, and for a server
 * command the arm's numerics (`{threads}`, `{context_size}`, `{batch_size}`, `{sequences}`), so the
 * argv and the recorded settings cannot disagree.
 */
export function fillPlaceholders(text: string, modelPath = "", settings?: LlamaCppSettings): string {
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
export function apiKeyOf(arm: { readonly label: string; readonly api_key_env?: string }): string | undefined {
  if (arm.api_key_env === undefined) return undefined;
  const key = process.env[arm.api_key_env];
  if (key === undefined || key === "") throw new BenchError(`arm "${arm.label}": the environment variable ${arm.api_key_env} is not set`, { field: "api_key_env", fix: `export ${arm.api_key_env}=<the server's API key>` });
  return key;
}

