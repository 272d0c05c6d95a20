import { setTimeout as sleep } from "node:timers/promises";
import type { CpuIdentity } from "../cpu/cpu-identity.js";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { request } from "undici";
import { BenchError } from "../errors.js";
import { DEFAULT_SHUTDOWN_GRACE_S, forceStop, hasExited, sendSignal, stopChild, trackChild } from "./child-process.js";
import { PACKAGE_ROOT } from "../paths.js";
import { basename, join, resolve } from "node:path";
import { existsSync } from "node:fs";
import { sha256File } from "../io/sha256.js";
import type { ServerNumerics } from "../../server/server-options.js";
import type { LlamaCppSettings } from "./llamacpp.js";
import type { Capability, GreedyRequest, LoadedModel, PromptCounters, SutProvenance, SystemUnderTest, TeacherForcedRequest, TokenId, TokenKind } from "./types.js";
import type { Dialect, DialectCapability, DialectOffer, HttpResponse } from "./dialects/dialect.js";
import { probeDialects, type ProbeResult } from "./dialects/probe.js";
import { LLAMA_CPP_DIALECT } from "./dialects/llama-cpp.js";
import { VLLM_DIALECT } from "./dialects/vllm.js";
import { OPENAI_DIALECT } from "./dialects/openai.js";
import { BRINGUP_BENCH_DIALECT } from "./dialects/bringup-bench.js";
import { tokenKindsFromGguf } from "../gguf/token-kinds.js";
import { onStopped, stopReason, SutStoppedError } from "./with-timeout.js";

/**
 * One HTTP call with undici (never Node 20's global fetch: it is an order of magnitude slower).
 * The call listens on a signal of its own, which AbortSignal.any links to the caller's without a
 * listener on it: undici adds an abort listener to the signal it is given for each request in
 * flight, and callers send batches at once under one signal (a SUT's 16 texts to tokenize, a
 * conformance burst), which would pass Node's limit of 10 and print MaxListenersExceededWarning.
 */
export async function httpCall(url: string, options: { method?: string; body?: unknown; rawBody?: string; apiKey?: string; signal?: AbortSignal } = {}): Promise<HttpResponse> {
  const signal = options.signal === undefined ? undefined : AbortSignal.any([options.signal]);
  const send = () => request(url, {
    method: (options.method ?? (options.body === undefined && options.rawBody === undefined ? "GET" : "POST")) as "GET" | "POST",
    headers: { "content-type": "application/json", ...(options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` }) },
    body: options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
    signal,
  });
  // A server may close an idle keep-alive connection just as the pool reuses it (llama-server does
  // after a few seconds): the request never reached it, so it is sent once more on a fresh socket.
  // A server that is gone fails the second attempt too.
  const response = await send().catch((error: unknown) => {
    if ((error as { code?: unknown }).code !== "UND_ERR_SOCKET" || options.signal?.aborted === true) throw error;
    return send();
  });
  return { status: response.statusCode, headers: response.headers, text: await response.body.text() };
}

/** A server the harness started itself, and what it saw while it booted. */
export interface ManagedServer {
  readonly child: ChildProcess;
  readonly baseUrl: string;
  /** /health answers in boot order, e.g. [503 "loading model", 200]. */
  readonly bootObservations: readonly { status: number; stage: string | undefined }[];
}

export interface ManagedServerOptions {
  readonly modelPath: string;
  readonly slots: number;
  readonly queue: number;
  readonly contextSize: number;
  readonly threads: number;
  readonly flashAttention: boolean;
  /** `bench serve`'s defaults (F16, 512) when absent: what a production server runs. */
  readonly kvCacheType?: "F32" | "F16";
  readonly batchSize?: number;
  /** On when absent, as `bench serve` runs it. */
  readonly promptCache?: boolean;
  /** Prompt tokens per llama_decode; the batch size when absent. */
  readonly prefillChunk?: number;
  /** Speculate greedy requests with this draft model (a path), drafting up to draftMax tokens a step. */
  readonly draftModel?: string;
  readonly draftMax?: number;
  /** `bench serve --trace-steps`: the file the server's step trace goes to (docs/step-trace.md). */
  readonly traceSteps?: string;
  readonly bootTimeoutS: number;
  readonly simulateBootSeconds?: number;
  readonly onProgress?: (message: string) => void;
  /** Told of the server process as soon as it is started (the box keeps its stderr tail per arm). */
  readonly onProcess?: (child: ChildProcess, commandLine: string) => void;
  /** The arm's stop: the boot is given up on at once, the server stopped by the shutdown ladder (`shutdownGraceS`), SutStoppedError. */
  readonly signal?: AbortSignal;
  readonly shutdownGraceS?: number;
}

/** Starts `bench serve` on a free loopback port and waits for /health (boot can take minutes on real hardware). */
export async function startManagedServer(options: ManagedServerOptions): Promise<ManagedServer> {
  const args = [join(PACKAGE_ROOT, "bin", "bench.js"), "serve", "--model", options.modelPath, "--port", "0", "--unvalidated",
    "--slots", String(options.slots), "--queue", String(options.queue), "--context-size", String(options.contextSize), "--threads", String(options.threads),
    "--kv-cache-type", options.kvCacheType ?? "F16", "--batch-size", String(options.batchSize ?? 512),
    "--simulate-boot", String(options.simulateBootSeconds ?? 0), ...(options.flashAttention ? ["--flash-attention"] : []),
    ...(options.promptCache === false ? ["--no-prompt-cache"] : []), ...(options.prefillChunk === undefined ? [] : ["--prefill-chunk", String(options.prefillChunk)]),
    ...(options.draftModel === undefined ? [] : ["--draft-model", options.draftModel, ...(options.draftMax === undefined ? [] : ["--draft-max", String(options.draftMax)])]),
    ...(options.traceSteps === undefined ? [] : ["--trace-steps", options.traceSteps]), "--exit-with-stdin"];
  // stdin is the server's lifeline: we never write to it, and when we die, however, it closes and the server drains and exits.
  const child = trackChild(spawn(process.execPath, args, { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, CI: "1", NO_COLOR: "1" } }));
  options.onProcess?.(child, "bench serve");
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => { stderr += chunk.toString(); });
  const baseUrl = await new Promise<string>((resolve, reject) => {
    // A server wedged before it listens (no line, no exit) is given up on at the boot timeout, not waited on forever:
    // killed, and the open fails once it has exited (nothing of it outlives the failure).
    let wedged = false;
    const timer = setTimeout(() => {
      wedged = true;
      forceStop(child, "SIGKILL");
    }, options.bootTimeoutS * 1000);
    // A stop (Ctrl-C) does not wait for the line either: the server is asked to stop, and the open fails once it has exited.
    let stopped = false;
    const stopListening = onStopped(options.signal, () => {
      stopped = true;
      clearTimeout(timer);
      void stopServerProcess(child, "the server (bench serve)", options.shutdownGraceS);
    });
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      const match = /^listening on (http:\/\/\S+)$/.exec(line);
      if (match === null || stopped) return;
      clearTimeout(timer);
      stopListening();
      resolve(match[1]);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      stopListening();
      reject(stopped
        ? new SutStoppedError("the server (bench serve)", "boot", stopReason(options.signal))
        : wedged
        ? new BenchError(`the server (bench serve) printed no "listening on" line within ${options.bootTimeoutS} s`, { field: "boot_timeout_s", fix: "raise --boot-timeout (boot_timeout_s in the box config), or run `bench serve` by hand to see why" })
        : new BenchError(`the server exited (code ${code}) before listening: ${stderr.trim().split("\n").pop() ?? ""}`, { fix: "run `bench serve` by hand to see why" }));
    });
  });
  const bootObservations = await waitHealthy(child, baseUrl, { label: "the server (bench serve)", bootTimeoutS: options.bootTimeoutS, onProgress: options.onProgress, signal: options.signal, shutdownGraceS: options.shutdownGraceS, stderrTail: () => stderr.trim().split("\n").pop() ?? "", fix: "run `bench serve` by hand to see why" });
  return { child, baseUrl, bootObservations };
}

/**
 * Polls /health until it answers 200, recording each distinct answer on the way (the boot stages a
 * conformance check reads). A child that dies, or a boot past the timeout, is a clear error; a stop
 * (`signal`) stops the server by the shutdown ladder and fails with SutStoppedError at once.
 */
export async function waitHealthy(child: ChildProcess, baseUrl: string, options: {
  label: string; bootTimeoutS: number; onProgress?: (message: string) => void; stderrTail: () => string; fix: string; signal?: AbortSignal; shutdownGraceS?: number;
}): Promise<ManagedServer["bootObservations"]> {
  const bootObservations: { status: number; stage: string | undefined }[] = [];
  const deadline = Date.now() + options.bootTimeoutS * 1000;
  for (;;) {
    // A server that accepts and never answers is given up on at the deadline, not waited on forever (its request aborted, no socket left); on a stop, at once.
    const timeout = AbortSignal.timeout(Math.max(1, deadline - Date.now()));
    const health = await httpCall(`${baseUrl}/health`, { signal: options.signal === undefined ? timeout : AbortSignal.any([timeout, options.signal]) }).catch(() => ({ status: 0, text: "{}", headers: {} }));
    // Before the exit check: a Ctrl-C at a terminal reaches the server too, and its death is then the stop's.
    if (options.signal?.aborted === true) {
      await stopServerProcess(child, options.label, options.shutdownGraceS);
      throw new SutStoppedError(options.label, "boot", stopReason(options.signal));
    }
    const stage = healthStage(health.text);
    const last = bootObservations[bootObservations.length - 1];
    if (last === undefined || last.status !== health.status || last.stage !== stage) bootObservations.push({ status: health.status, stage });
    if (health.status === 200) return bootObservations;
    if (hasExited(child)) throw new BenchError(`the server exited (${child.signalCode ?? `code ${child.exitCode}`}) while booting: ${options.stderrTail()}`, { fix: options.fix });
    options.onProgress?.(`waiting for the server to boot: ${stage ?? health.status}`);
    if (Date.now() > deadline) {
      forceStop(child, "SIGKILL");
      throw new BenchError(`the server did not become healthy within ${options.bootTimeoutS} s (last stage: ${stage ?? "none"})`, { field: "boot_timeout_s", fix: "raise the boot timeout, or check the server's log" });
    }
    await sleep(50, undefined, { signal: options.signal }).catch(() => undefined);
  }
}

/** The boot stage a /health body names: ours says `stage`, llama.cpp's server an error message while it loads. */
function healthStage(text: string): string | undefined {
  try {
    const body = JSON.parse(text || "{}") as { stage?: unknown; error?: { message?: unknown } };
    if (typeof body.stage === "string") return body.stage;
    return typeof body.error?.message === "string" ? body.error.message : undefined;
  } catch {
    return text.slice(0, 60);
  }
}

/** A server's shutdown ladder: SIGTERM (it drains), up to `graceS` seconds, then SIGTERM and SIGKILL (stopChild). */
function stopServerProcess(child: ChildProcess, what: string, graceS = DEFAULT_SHUTDOWN_GRACE_S, onWarning?: (message: string) => void): Promise<void> {
  return stopChild(child, { ask: () => sendSignal(child, "SIGTERM"), graceS, what, onWarning });
}

/**
 * SIGTERM (the server drains), then the shutdown ladder. A server that already died (kill -9 leaves
 * exitCode null and signalCode set) is simply gone: waiting for its 'exit' again would wait forever.
 */
export async function stopManagedServer(server: ManagedServer, graceS = DEFAULT_SHUTDOWN_GRACE_S, onWarning?: (message: string) => void): Promise<void> {
  await stopServerProcess(server.child, "the server", graceS, onWarning);
}

/** The numerics our server reports in /v1/models, in the spelling of the embedded SUT's provenance so arms compare key by key. */
function numericsProvenance(settings: Record<string, unknown> | undefined): Record<string, string | number | boolean> {
  if (settings === undefined) return {};
  const names: Readonly<Record<keyof ServerNumerics, keyof LlamaCppSettings>> = {
    flash_attention: "flashAttention", kv_cache_type: "kvCacheType", threads: "threads", batch_size: "batchSize", context_size: "contextSize", slots: "sequences",
  };
  const out: Record<string, string | number | boolean> = {};
  for (const [key, name] of Object.entries(names)) {
    const value = settings[key];
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") out[name] = value;
  }
  // Our server's prompt cache settings, under the names it reports them by.
  for (const name of ["promptCache", "prefillChunk"] as const) {
    const value = settings[name];
    if (typeof value === "number" || typeof value === "boolean") out[name] = value;
  }
  return out;
}

/** Preference order when several dialects answer a probe: the specific ones first, plain OpenAI last. */
const DIALECTS: readonly Dialect[] = [LLAMA_CPP_DIALECT, VLLM_DIALECT, OPENAI_DIALECT, BRINGUP_BENCH_DIALECT];

/** Where each SUT capability comes from in a dialect's offer. */
const SUT_CAPABILITIES: Readonly<Record<DialectCapability, readonly Capability[]>> = {
  tokenize: ["tokenize"], detokenize: ["detokenize"], inspectTokens: ["inspectTokens"], greedy: ["greedy", "batchedGreedy"], teacherForced: ["teacherForcedTopK"],
  cachedGreedy: ["cachedGreedy"], cachedChat: ["cachedChat"], slotAction: ["slotAction"],
  // The speculative suite asks it of the dialect that served it (openHttpSut's `dialects`), not through the SUT interface.
  speculativeGreedy: [],
};

export interface HttpSutOptions {
  readonly label: string;
  readonly apiKey?: string;
  readonly managed?: ManagedServer;
  readonly modelSha256?: string;
  /** The GGUF the server serves (it was started on it, or the arm names it): token kinds are read from it when no dialect serves them. */
  readonly modelPath?: string;
  /** Provenance of a server started by a command: its argv (what set its numerics). */
  readonly command?: readonly string[];
  readonly shutdownGraceS?: number;
  readonly onWarning?: (message: string) => void;
  /** Seconds the probes that open the SUT may take in all (the arm's boot timeout); absent: unbounded. */
  readonly bootTimeoutS?: number;
  /** The arm's stop: the probes in flight are aborted at once and the open fails with SutStoppedError. */
  readonly signal?: AbortSignal;
}

/**
 * Which file the server says it loaded: a sha256 it reports itself (ours, in /v1/models), else the
 * path llama-server reports in /props, hashed here when that file is on this machine (a server
 * started by the harness, or one on loopback). Only a well-formed digest or a readable path counts;
 * anything else leaves the identity unverified.
 */
async function loadedModelOf(model: { model_sha256?: unknown; model_file?: unknown }, json: <T>(path: string) => Promise<T>, known: { path?: string; sha256?: string }): Promise<{ loadedModel?: LoadedModel }> {
  if (typeof model.model_sha256 === "string" && /^[0-9a-f]{64}$/.test(model.model_sha256)) {
    return { loadedModel: { sha256: model.model_sha256, file: typeof model.model_file === "string" ? model.model_file : "(unnamed)", reportedBy: "the server's /v1/models" } };
  }
  const props = await json<{ model_path?: unknown }>("/props").catch(() => undefined);
  const path = props?.model_path;
  if (typeof path !== "string" || !existsSync(path)) return {};
  // The file the harness handed the server is hashed already (a multi-GB model is not read twice).
  const sha256 = known.sha256 !== undefined && known.path !== undefined && resolve(known.path) === resolve(path) ? known.sha256 : await sha256File(path);
  return { loadedModel: { sha256, file: basename(path), reportedBy: "the server's /props model_path (that file hashed by the harness)" } };
}

/** Where a server says it computes (ours: /v1/models' ggml_cpu), when it says so in the shape the embedded SUT records it. */
function reportedCpu(reported: unknown): { cpu?: CpuIdentity } {
  if (typeof reported !== "object" || reported === null) return {};
  const { model, variant, forced, features } = reported as Record<string, unknown>;
  if (typeof model !== "string" || typeof variant !== "string" || typeof forced !== "boolean" || !Array.isArray(features) || !features.every((f) => typeof f === "string")) return {};
  return { cpu: { model, variant, forced, features } };
}

/** Our server's prompt-token counters in a /metrics exposition (bench_prompt_tokens_{total,cached_total,evaluated_total}); undefined where any is absent. */
export function promptCountersOf(response: { readonly status: number; readonly text: string }): PromptCounters | undefined {
  if (response.status !== 200) return undefined;
  const counter = (name: string) => {
    const match = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(response.text);
    return match === null ? undefined : Number(match[1]);
  };
  const [total, cached, evaluated] = ["bench_prompt_tokens_total", "bench_prompt_tokens_cached_total", "bench_prompt_tokens_evaluated_total"].map(counter);
  return total === undefined || cached === undefined || evaluated === undefined ? undefined : { total, cached, evaluated };
}

/**
 * A system under test behind an HTTP API. Capabilities come from probing (dialects/probe.ts), not
 * from what the server advertises: each is served by the first dialect whose probe answered well,
 * and what none serves stays absent with every dialect's refusal, so suites skip it with the reason.
 */
export async function openHttpSut(baseUrl: string, options: HttpSutOptions): Promise<HttpSut> {
  // The probes ask the server directly, before any per-case timeout: a server that accepts and never
  // answers them is given up on after the boot timeout, their requests aborted.
  const bootTimeout = options.bootTimeoutS === undefined ? undefined : AbortSignal.timeout(options.bootTimeoutS * 1000);
  // A stop (Ctrl-C) aborts them at once too.
  const bounds = [bootTimeout, options.signal].filter((bound): bound is AbortSignal => bound !== undefined);
  const opening = bounds.length === 0 ? undefined : AbortSignal.any(bounds);
  // The SUT's own calls have no deadline here (the leg holds them to the per-case timeout); one given up on is aborted, its connection closed.
  let calls = new AbortController();
  let signal = opening ?? calls.signal;
  let sut: HttpSut | undefined;
  try {
    sut = await probeHttpSut(baseUrl, options, () => signal);
  } catch (error) {
    if (opening?.aborted !== true) throw error;
  }
  if (options.signal?.aborted === true) throw new SutStoppedError(options.label, "the probes that open it", stopReason(options.signal));
  // A probe that timed out reads as a capability refused: the open as a whole is what failed.
  if (sut === undefined || opening?.aborted === true) {
    throw new BenchError(`arm "${options.label}": the server at ${baseUrl} did not answer the probes that open it within ${options.bootTimeoutS} s`, { field: "boot_timeout_s", fix: "check that the server answers /v1/models, or raise --boot-timeout (boot_timeout_s in the box config)" });
  }
  signal = calls.signal;
  return {
    ...sut,
    abandon: () => {
      calls.abort();
      calls = new AbortController();
      signal = calls.signal;
    },
  };
}

type HttpSut = SystemUnderTest & { readonly baseUrl: string; readonly managed?: ManagedServer; readonly dialects: Pick<ProbeResult, "found" | "missing"> };

/** The SUT as its probes found it, each request carrying the signal `signal` gives at the time it is sent. */
async function probeHttpSut(baseUrl: string, options: HttpSutOptions, signal: () => AbortSignal | undefined): Promise<HttpSut> {
  const { call, json, model } = await connect(baseUrl, options.apiKey, signal);
  const probed = await probeDialects({ model: model.id, post: call, json }, DIALECTS);
  let kindsOf: ((ids: readonly TokenId[]) => TokenKind[]) | undefined;
  const offer: DialectOffer = probed.offer.inspectTokens === undefined && options.modelPath !== undefined
    ? { ...probed.offer, inspectTokens: async (ids) => (kindsOf ??= tokenKindsFromGguf(options.modelPath!))(ids) } : probed.offer;
  const found: Partial<Record<DialectCapability, string>> = { ...probed.found, ...(offer.inspectTokens !== probed.offer.inspectTokens ? { inspectTokens: "gguf" } : {}) };
  const missing = Object.fromEntries(Object.entries(probed.missing).filter(([capability]) => found[capability as DialectCapability] === undefined)) as Partial<Record<DialectCapability, string>>;
  const unsupported: Partial<Record<Capability, string>> = {};
  for (const [capability, reason] of Object.entries(missing)) {
    for (const sutCapability of SUT_CAPABILITIES[capability as DialectCapability]) unsupported[sutCapability] = `no dialect serves it (${reason})`;
  }
  const provenance: SutProvenance = {
    kind: "http",
    engine: `${model.owned_by ?? "unknown"} at ${baseUrl} (model ${model.id}; dialect ${dialectSummary(found)})`,
    // The numerics as the server reports them, not as the harness asked: a server that ignored a setting shows it here.
    settings: {
      baseUrl, model: model.id, managed: options.managed !== undefined, dialect: dialectSummary(found),
      ...Object.fromEntries(Object.entries(found).map(([capability, name]) => [`dialect_${capability}`, name])),
      ...(options.command === undefined ? {} : { command: options.command.join(" ") }),
      ...numericsProvenance(model.settings),
    },
    ...(options.modelPath === undefined ? {} : { modelPath: options.modelPath }),
    ...(options.modelSha256 === undefined ? {} : { modelSha256: options.modelSha256 }),
    ...await loadedModelOf(model, json, { path: options.modelPath, sha256: options.modelSha256 }),
    ...reportedCpu(model.ggml_cpu),
  };
  const { tokenize, detokenize, inspectTokens, greedy, teacherForced, cachedGreedy, cachedChat, slotAction } = offer;
  const inOrder = async <R, A>(requests: readonly R[], one: (request: R) => Promise<A>): Promise<A[]> => {
    const out: A[] = [];
    for (const r of requests) out.push(await one(r));
    return out;
  };
  return {
    label: options.label,
    provenance,
    baseUrl,
    managed: options.managed,
    unsupported,
    ...(tokenize === undefined ? {} : { tokenize: async (texts: readonly string[]) => Promise.all(texts.map(tokenize)) }),
    ...(detokenize === undefined ? {} : { detokenize: async (sequences: readonly (readonly TokenId[])[]) => Promise.all(sequences.map(detokenize)) }),
    ...(inspectTokens === undefined ? {} : { inspectTokens }),
    ...(greedy === undefined ? {} : {
      greedy: async (requests: readonly GreedyRequest[]) => inOrder(requests, greedy),
      // All at once: the server batches them into its slots (B = slots), the continuous-batching path.
      batchedGreedy: async (requests: readonly GreedyRequest[]) => Promise.all(requests.map(greedy)),
    }),
    ...(teacherForced === undefined ? {} : { teacherForcedTopK: async (requests: readonly TeacherForcedRequest[]) => inOrder(requests, teacherForced) }),
    ...(cachedGreedy === undefined ? {} : { cachedGreedy }),
    ...(cachedChat === undefined ? {} : { cachedChat }),
    ...(slotAction === undefined ? {} : { slotAction }),
    dialects: { found, missing },
    promptCounters: async () => promptCountersOf(await call("/metrics")),
    close: async () => {
      if (options.managed !== undefined) await stopManagedServer(options.managed, options.shutdownGraceS, options.onWarning);
    },
  };
}

interface ListedModel {
  readonly id: string;
  readonly owned_by?: string;
  readonly settings?: Record<string, unknown>;
  readonly model_sha256?: unknown;
  readonly model_file?: unknown;
  /** Ours: the CPU and ggml CPU variant it computes with. */
  readonly ggml_cpu?: unknown;
}

/** A server's POST and JSON calls, and the model its /v1/models lists first (the model id requests name). */
async function connect(baseUrl: string, apiKey: string | undefined, signal: () => AbortSignal | undefined) {
  const call = (path: string, body?: unknown) => httpCall(`${baseUrl}${path}`, { body, apiKey, signal: signal() });
  const json = async <T>(path: string, body?: unknown): Promise<T> => {
    const response = await call(path, body);
    if (response.status !== 200) throw new Error(`${path} answered ${response.status}: ${response.text.slice(0, 200)}`);
    return JSON.parse(response.text) as T;
  };
  const models = await json<{ data?: ListedModel[] }>("/v1/models");
  const model = models.data?.[0];
  if (model === undefined) throw new BenchError(`the server at ${baseUrl} lists no model`, { field: "/v1/models", fix: "check the server" });
  return { call, json, model };
}

/**
 * A named dialect's offer at a server, without probing: for a server known to speak it (the same
 * command another probe found it in), asked what a probe cannot show, e.g. a plain server's timings.
 */
export async function dialectOfferAt(baseUrl: string, dialect: string, signal?: AbortSignal): Promise<DialectOffer> {
  const known = DIALECTS.find((d) => d.name === dialect);
  if (known === undefined) throw new Error(`no dialect is named ${dialect}`);
  const { call, json, model } = await connect(baseUrl, undefined, () => signal);
  return known.offer({ model: model.id, post: call, json });
}

/** One word when one dialect serves everything, else which serves what (e.g. "llama.cpp+gguf"). */
function dialectSummary(found: Partial<Record<DialectCapability, string>>): string {
  const names = [...new Set(Object.values(found))];
  return names.length === 0 ? "none" : names.join("+");
}
