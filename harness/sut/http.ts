import { setTimeout as sleep } from "node:timers/promises";
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { request } from "undici";
import { BenchError } from "../errors.js";
import { DEFAULT_SHUTDOWN_GRACE_S, hasExited, stopChild, trackChild } from "./child-process.js";
import { PACKAGE_ROOT } from "../paths.js";
import { join } from "node:path";
import type { ServerNumerics } from "../../server/http-server.js";
import type { LlamaCppSettings } from "./llamacpp.js";
import type { GreedyRequest, SutProvenance, SystemUnderTest, TeacherForcedRequest, TokenId, TokenKind, TopK } from "./types.js";

/** What an OpenAI-compatible server says it can do (our server advertises it in /v1/models). */
export interface HttpCapabilities {
  readonly tokenIds: boolean;
  readonly promptLogprobs: boolean;
  readonly tokenize: boolean;
}

export interface HttpResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
}

/** One HTTP call with undici (never Node 20's global fetch: it is an order of magnitude slower). */
export async function httpCall(url: string, options: { method?: string; body?: unknown; rawBody?: string; apiKey?: string; signal?: AbortSignal } = {}): Promise<HttpResponse> {
  const response = await request(url, {
    method: (options.method ?? (options.body === undefined && options.rawBody === undefined ? "GET" : "POST")) as "GET" | "POST",
    headers: { "content-type": "application/json", ...(options.apiKey === undefined ? {} : { authorization: `Bearer ${options.apiKey}` }) },
    body: options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
    signal: options.signal,
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
  readonly bootTimeoutS: number;
  readonly simulateBootSeconds?: number;
  readonly onProgress?: (message: string) => void;
}

/** Starts `bench serve` on a free loopback port and waits for /health (boot can take minutes on real hardware). */
export async function startManagedServer(options: ManagedServerOptions): Promise<ManagedServer> {
  const args = [join(PACKAGE_ROOT, "bin", "bench.js"), "serve", "--model", options.modelPath, "--port", "0", "--unvalidated",
    "--slots", String(options.slots), "--queue", String(options.queue), "--context-size", String(options.contextSize), "--threads", String(options.threads),
    "--kv-cache-type", options.kvCacheType ?? "F16", "--batch-size", String(options.batchSize ?? 512),
    "--simulate-boot", String(options.simulateBootSeconds ?? 0), ...(options.flashAttention ? ["--flash-attention"] : []), "--exit-with-stdin"];
  // stdin is the server's lifeline: we never write to it, and when we die, however, it closes and the server drains and exits.
  const child = trackChild(spawn(process.execPath, args, { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, CI: "1", NO_COLOR: "1" } }));
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => { stderr += chunk.toString(); });
  const baseUrl = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      const match = /^listening on (http:\/\/\S+)$/.exec(line);
      if (match !== null) resolve(match[1]);
    });
    child.once("exit", (code) => reject(new BenchError(`the server exited (code ${code}) before listening: ${stderr.trim().split("\n").pop() ?? ""}`, { fix: "run `bench serve` by hand to see why" })));
  });
  const bootObservations: { status: number; stage: string | undefined }[] = [];
  const deadline = Date.now() + options.bootTimeoutS * 1000;
  for (;;) {
    const health = await httpCall(`${baseUrl}/health`).catch(() => ({ status: 0, text: "{}", headers: {} }));
    const stage = (JSON.parse(health.text || "{}") as { stage?: string }).stage;
    const last = bootObservations[bootObservations.length - 1];
    if (last === undefined || last.status !== health.status || last.stage !== stage) bootObservations.push({ status: health.status, stage });
    if (health.status === 200) break;
    if (hasExited(child)) throw new BenchError(`the server exited (${child.signalCode ?? `code ${child.exitCode}`}) while booting: ${stderr.trim().split("\n").pop() ?? ""}`, { fix: "run `bench serve` by hand to see why" });
    options.onProgress?.(`waiting for the server to boot: ${stage ?? health.status}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new BenchError(`the server did not become healthy within ${options.bootTimeoutS} s (last stage: ${stage ?? "none"})`, { field: "boot_timeout_s", fix: "raise the boot timeout, or check the server's log" });
    }
    await sleep(50);
  }
  return { child, baseUrl, bootObservations };
}

/**
 * SIGTERM (the server drains), then the shutdown ladder. A server that already died (kill -9 leaves
 * exitCode null and signalCode set) is simply gone: waiting for its 'exit' again would wait forever.
 */
export async function stopManagedServer(server: ManagedServer, graceS = DEFAULT_SHUTDOWN_GRACE_S, onWarning?: (message: string) => void): Promise<void> {
  await stopChild(server.child, { ask: () => server.child.kill("SIGTERM"), graceS, what: "the server", onWarning });
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
  return out;
}

interface CompletionChoice {
  readonly token_ids?: number[];
  readonly logprobs?: { top_token_ids?: (number[] | null)[]; top_token_logprobs?: (number[] | null)[] } | null;
}

/**
 * A system under test behind an OpenAI-compatible HTTP API. Capabilities come from what the server
 * advertises: ids-level greedy needs token ids in responses, teacher forcing needs prompt
 * log-probs through `echo`, and tokenization needs /tokenize. What it lacks stays absent, so the
 * suites skip those checks with the reason.
 */
export async function openHttpSut(baseUrl: string, options: { label: string; apiKey?: string; managed?: ManagedServer; modelSha256?: string; modelPath?: string; shutdownGraceS?: number; onWarning?: (message: string) => void }): Promise<SystemUnderTest & { readonly baseUrl: string; readonly managed?: ManagedServer }> {
  const call = (path: string, body?: unknown) => httpCall(`${baseUrl}${path}`, { body, apiKey: options.apiKey });
  const json = async <T>(path: string, body?: unknown): Promise<T> => {
    const response = await call(path, body);
    if (response.status !== 200) throw new Error(`${path} answered ${response.status}: ${response.text.slice(0, 200)}`);
    return JSON.parse(response.text) as T;
  };
  const models = await json<{ data: { id: string; owned_by?: string; capabilities?: { token_ids?: boolean; prompt_logprobs?: boolean; tokenize?: boolean }; settings?: Record<string, unknown> }[] }>("/v1/models");
  const model = models.data[0];
  if (model === undefined) throw new BenchError("the server lists no model", { field: "/v1/models", fix: "check the server" });
  const capabilities: HttpCapabilities = {
    tokenIds: model.capabilities?.token_ids === true,
    promptLogprobs: model.capabilities?.prompt_logprobs === true,
    tokenize: model.capabilities?.tokenize === true,
  };
  const completion = async (body: Record<string, unknown>): Promise<CompletionChoice> =>
    (await json<{ choices: CompletionChoice[] }>("/v1/completions", { model: model.id, ...body })).choices[0];
  const greedyOne = async (r: GreedyRequest): Promise<TokenId[]> => {
    const choice = await completion({ prompt: r.promptIds, max_tokens: r.maxTokens, temperature: 0, ignore_eos: true });
    // Absent ids are a broken answer, not an empty one (an empty list would read as "generated nothing").
    if (!Array.isArray(choice.token_ids)) throw new Error(`/v1/completions answered without token_ids: ${JSON.stringify(choice).slice(0, 120)}`);
    return choice.token_ids;
  };
  const provenance: SutProvenance = {
    kind: "http",
    engine: `${model.owned_by ?? "unknown"} at ${baseUrl} (model ${model.id})`,
    // The numerics as the server reports them, not as the harness asked: a server that ignored a setting shows it here.
    settings: { baseUrl, model: model.id, managed: options.managed !== undefined, ...capabilities, ...numericsProvenance(model.settings) },
    ...(options.modelPath === undefined ? {} : { modelPath: options.modelPath }),
    ...(options.modelSha256 === undefined ? {} : { modelSha256: options.modelSha256 }),
  };
  return {
    label: options.label,
    provenance,
    baseUrl,
    managed: options.managed,
    ...(capabilities.tokenize ? {
      tokenize: async (texts: readonly string[]) => Promise.all(texts.map(async (content) => (await json<{ tokens: number[] }>("/tokenize", { content })).tokens)),
      detokenize: async (sequences: readonly (readonly TokenId[])[]) => Promise.all(sequences.map(async (tokens) => (await json<{ content: string }>("/detokenize", { tokens })).content)),
      inspectTokens: async (ids: readonly TokenId[]) => (await json<{ kinds: TokenKind[] }>("/token_kinds", { tokens: ids })).kinds,
    } : {}),
    ...(capabilities.tokenIds ? {
      greedy: async (requests: readonly GreedyRequest[]) => {
        const out: TokenId[][] = [];
        for (const r of requests) out.push(await greedyOne(r));
        return out;
      },
      // All at once: the server batches them into its slots (B = slots), the continuous-batching path.
      batchedGreedy: async (requests: readonly GreedyRequest[]) => Promise.all(requests.map(greedyOne)),
    } : {}),
    ...(capabilities.promptLogprobs ? {
      teacherForcedTopK: async (requests: readonly TeacherForcedRequest[]) => {
        const out: TopK[][] = [];
        for (const r of requests) {
          const ids = [...r.promptIds, ...r.continuationIds];
          const choice = await completion({ prompt: ids, max_tokens: 0, echo: true, logprobs: r.k, temperature: 0 });
          const topIds = choice.logprobs?.top_token_ids ?? [];
          const topLogprobs = choice.logprobs?.top_token_logprobs ?? [];
          // Entry i holds the distribution that predicted token i; the continuation starts at promptIds.length.
          out.push(r.continuationIds.map((_, j) => {
            const at = r.promptIds.length + j;
            return { ids: topIds[at] ?? [], logprobs: topLogprobs[at] ?? [] };
          }));
        }
        return out;
      },
    } : {}),
    close: async () => {
      if (options.managed !== undefined) await stopManagedServer(options.managed, options.shutdownGraceS, options.onWarning);
    },
  };
}
