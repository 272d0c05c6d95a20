import type { CpuIdentity } from "../cpu/cpu-identity.js";
import { BenchError } from "../errors.js";
import { basename, resolve } from "node:path";
import { existsSync } from "node:fs";
import { sha256File } from "../io/sha256.js";
import type { ServerNumerics } from "../../server/server-options.js";
import type { LlamaCppSettings } from "./llamacpp.js";
import type { AllocationReport, Capability, GreedyRequest, LoadedModel, NotMeasured, PromptCounters, SutProvenance, SystemUnderTest, TeacherForcedRequest, TokenId, TokenKind } from "./types.js";
import type { Dialect, DialectCapability, DialectOffer } from "./dialects/dialect.js";
import { probeDialects, type ProbeResult } from "./dialects/probe.js";
import { LLAMA_CPP_DIALECT } from "./dialects/llama-cpp.js";
import { VLLM_DIALECT } from "./dialects/vllm.js";
import { OPENAI_DIALECT } from "./dialects/openai.js";
import { BRINGUP_BENCH_DIALECT } from "./dialects/bringup-bench.js";
import { tokenKindsFromGguf } from "../gguf/token-kinds.js";
import { allocationsFromWire } from "./allocations-wire.js";
import { httpCall } from "./http-call.js";
import { stopManagedServer, type ManagedServer } from "./managed-server.js";
import { stopReason, SutStoppedError } from "./with-timeout.js";

/*
 * A system under test behind an HTTP API: what its probes find it serves, as the SUT interface.
 * Calls go through ./http-call.ts; a server the harness started (./managed-server.ts) is stopped
 * when the SUT is closed.
 */


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
 * A server's allocations report (GET /allocations: ours; docs/servers.md), or why it is not
 * measured: a server that answers anything but 200 cannot be asked (llama-server has no such report).
 */
export function allocationsOf(response: { readonly status: number; readonly text: string }): AllocationReport | NotMeasured {
  if (response.status !== 200) return { notMeasured: `GET /allocations answered ${response.status}: the server cannot be asked for its allocations` };
  let body: unknown;
  try {
    body = JSON.parse(response.text);
  } catch {
    throw new Error(`GET /allocations: the answer is not JSON: ${JSON.stringify(response.text.slice(0, 80))}`);
  }
  return allocationsFromWire(body, "GET /allocations");
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
    allocations: async () => allocationsOf(await call("/allocations")),
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
