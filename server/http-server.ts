import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { LlamaModel, Token } from "node-llama-cpp";
import { cpuIdentity } from "../harness/cpu/cpu-identity.js";
import type { TopK } from "../harness/sut/types.js";
import type { BatchEngine } from "./engine.js";
import { EngineDrainingError, EngineFullError, type GenerationResult, type GeneratedToken } from "./generation.js";
import type { ServerMetrics } from "./metrics.js";
import { ChatPromptError, type ChatPrompter } from "./chat-prompt.js";
import { BadRequest, parseChat, parseCompletion, type ChatParams, type CommonParams, type PromptInput } from "./requests.js";
import { tokenPieces, tokenTextInContext } from "./token-text.js";
import type { PromptCacheSettings } from "./prompt-cache.js";
import type { SpeculationSettings } from "./speculation.js";
import type { StepTracer } from "./step-trace.js";

export interface ServerOptions {
  readonly host: string;
  readonly port: number;
  readonly modelId: string;
  readonly apiKey?: string;
  readonly maxPromptTokens: number;
  readonly maxTokensCap: number;
  /** Whether a passing validation run exists for this exact artifact; shown in /v1/models. */
  readonly validation: { readonly validated: boolean; readonly run?: string; readonly note: string };
  /** What the engine computes with, shown in /v1/models so a client records what it measured rather than what it asked for. */
  readonly numerics: ServerNumerics;
  /** The prompt cache's settings, shown in /v1/models beside the numerics so a run records what it ran. */
  readonly cache: PromptCacheSettings;
  /** The draft model and its draft length when the server speculates, shown in /v1/models too. */
  readonly speculation?: SpeculationSettings;
}

/** The settings that change the engine's numerics, in the suite files' spelling. */
export interface ServedArtifact {
  readonly file: string;
  readonly sha256: string;
}

export interface ServerNumerics {
  readonly flash_attention: boolean;
  readonly kv_cache_type: "F32" | "F16";
  readonly threads: number;
  readonly batch_size: number;
  /** Tokens per slot. */
  readonly context_size: number;
  readonly slots: number;
}

const MAX_BODY_BYTES = 4 * 1024 * 1024;

class HttpError extends Error {
  constructor(readonly status: number, message: string, readonly type: string, readonly param: string | null = null, readonly headers: Record<string, string> = {}) {
    super(message);
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

function sendError(res: ServerResponse, error: HttpError): void {
  sendJson(res, error.status, { error: { message: error.message, type: error.type, param: error.param, code: error.status } }, error.headers);
}

/**
 * The request's body, read with the stream's own events: an async iterator over the request took
 * about 0.05 ms more per request on the 2-core box (0.18 against 0.13 ms from the headers to a
 * parsed body, median, under load), on every request's time to first token. Past the size cap the
 * rest is read and dropped, so that the 413 answer reaches the client.
 */
function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (error: Error) => { req.removeAllListeners("data"); req.resume(); reject(error); };
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) return fail(new HttpError(413, "request body too large", "invalid_request_error"));
      chunks.push(chunk);
    });
    req.once("end", () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    req.once("error", reject);
    // A connection closed before the body's end (after it, the promise is already settled).
    req.once("close", () => reject(new HttpError(400, "the connection closed before the request body ended", "invalid_request_error")));
  });
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const body = await readBody(req);
  try {
    return JSON.parse(body.toString("utf8"));
  } catch {
    throw new HttpError(400, "the request body is not valid JSON", "invalid_request_error");
  }
}

/** The llama.cpp-style extensions take a JSON object too; anything else is a 400, not a TypeError. */
async function readJsonObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const body = await readJson(req);
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new HttpError(400, "the request body must be a JSON object", "invalid_request_error");
  return body as Record<string, unknown>;
}

interface LogprobEntry {
  readonly id: number;
  /** The piece of the choice's text this token is (the pieces concatenate to the text). */
  readonly piece: string;
  readonly logprob: number | null;
  readonly top: TopK | undefined;
}

/**
 * OpenAI's legacy completions logprobs, plus token-id columns so a client can compare ids, not
 * strings. `tokens` are the pieces of the text and `text_offset` where each starts in it;
 * `top_logprobs` keys are each candidate's own text.
 */
function completionLogprobs(model: LlamaModel, entries: readonly LogprobEntry[], startOffset: number) {
  let offset = startOffset;
  const text = (id: number) => tokenTextInContext(model, id);
  return {
    tokens: entries.map((e) => e.piece),
    token_logprobs: entries.map((e) => e.logprob),
    top_logprobs: entries.map((e) => (e.top === undefined ? null : Object.fromEntries(e.top.ids.map((id, i) => [text(id), e.top!.logprobs[i]])))),
    text_offset: entries.map((e) => { const at = offset; offset += e.piece.length; return at; }),
    token_ids: entries.map((e) => e.id),
    top_token_ids: entries.map((e) => (e.top === undefined ? null : e.top.ids)),
    top_token_logprobs: entries.map((e) => (e.top === undefined ? null : e.top.logprobs)),
  };
}

/**
 * llama-server's `timings` of one generation (tools/server: server_slot_stats), the fields a client
 * of both reads: prompt tokens cached and evaluated, tokens generated and the milliseconds from the
 * first to the last, and, when a draft model proposed any, the drafted and kept counts. Ours adds
 * `draft_accepted_positions`: the output positions whose token is a kept draft.
 */
function generationTimings(promptTokens: number, result: GenerationResult) {
  return {
    cache_n: result.cachedTokens, prompt_n: promptTokens - result.cachedTokens,
    predicted_n: result.tokens.length, predicted_ms: result.generatingMs,
    ...(result.drafted === 0 ? {} : { draft_n: result.drafted, draft_n_accepted: result.accepted, draft_accepted_positions: result.acceptedDraftPositions }),
  };
}

/** The chat API's logprobs: one entry per generated token, each with its top alternatives. */
function chatLogprobs(model: LlamaModel, tokens: readonly GeneratedToken[], pieces: readonly string[]) {
  const bytes = (text: string) => [...Buffer.from(text, "utf8")];
  return {
    content: tokens.map((t, i) => ({
      token: pieces[i], logprob: t.logprob ?? null, bytes: bytes(pieces[i]),
      top_logprobs: (t.top?.ids ?? []).map((id, j) => { const text = tokenTextInContext(model, id); return { token: text, logprob: t.top!.logprobs[j], bytes: bytes(text) }; }),
    })),
    refusal: null,
  };
}

const sse = (res: ServerResponse, body: unknown): void => { if (!res.writableEnded) res.write(`data: ${JSON.stringify(body)}\n\n`); };

/**
 * The OpenAI-compatible HTTP face of the batching engine: /v1/completions, /v1/chat/completions,
 * /v1/models, /health, /metrics, plus /tokenize, /detokenize and /token_kinds (llama.cpp-server
 * style extensions the harness uses to feed ids and build haystacks). Listens before the model is
 * loaded so /health can answer 503 with the boot stage.
 */
export class CompletionServer {
  private readonly http: Server;
  private engine: BatchEngine | undefined;
  private model: LlamaModel | undefined;
  private stage = "starting";
  private vocabSize = 0;
  private draining = false;
  /** The model file served, hashed while booting: /v1/models reports it so a client can tell which artifact answers it. */
  private artifact: ServedArtifact | undefined;
  private chatPrompter: ChatPrompter | undefined;

  constructor(private readonly options: ServerOptions, private readonly metrics: ServerMetrics, private readonly trace?: StepTracer) {
    this.http = createServer((req, res) => {
      this.route(req, res).catch((error: unknown) => {
        if (res.headersSent) { res.end(); return; }
        sendError(res, error instanceof HttpError ? error : new HttpError(500, error instanceof Error ? error.message : String(error), "server_error"));
      });
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.http.listen(this.options.port, this.options.host, resolve));
    return (this.http.address() as AddressInfo).port;
  }

  setStage(stage: string): void {
    this.stage = stage;
  }

  attach(engine: BatchEngine, model: LlamaModel, vocabSize: number, artifact: ServedArtifact, chat: ChatPrompter): void {
    this.artifact = artifact;
    this.chatPrompter = chat;
    this.engine = engine;
    this.model = model;
    this.vocabSize = vocabSize;
    this.metrics.slots.set(engine.slotCount);
    this.stage = "ready";
  }

  /** SIGTERM: refuse new work (503), let in-flight requests finish, then close. */
  async shutdown(): Promise<void> {
    this.draining = true;
    this.stage = "draining";
    await this.engine?.drain();
    await new Promise<void>((resolve) => { this.http.close(() => resolve()); this.http.closeIdleConnections(); });
    await this.engine?.close();
  }

  private ready(): { engine: BatchEngine; model: LlamaModel; chat: ChatPrompter } {
    if (this.draining) throw new HttpError(503, "the server is draining", "service_unavailable", null, { "retry-after": "5" });
    if (this.engine === undefined || this.model === undefined || this.chatPrompter === undefined) throw new HttpError(503, `the server is booting (${this.stage})`, "service_unavailable", null, { "retry-after": "2" });
    return { engine: this.engine, model: this.model, chat: this.chatPrompter };
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0];
    const method = req.method ?? "GET";
    if (path === "/health") {
      const ok = this.engine !== undefined && !this.draining;
      return sendJson(res, ok ? 200 : 503, ok ? { status: "ok" } : { status: this.draining ? "draining" : "booting", stage: this.stage });
    }
    if (path === "/metrics") {
      if (this.engine !== undefined) this.metrics.refresh(this.engine);
      const text = await this.metrics.registry.metrics();
      res.writeHead(200, { "content-type": this.metrics.registry.contentType });
      res.end(text);
      return;
    }
    if (this.options.apiKey !== undefined && req.headers.authorization !== `Bearer ${this.options.apiKey}`) {
      throw new HttpError(401, "missing or wrong API key", "authentication_error");
    }
    const routes: Record<string, [string, () => Promise<void>]> = {
      "/v1/models": ["GET", async () => this.models(res)],
      "/v1/completions": ["POST", async () => this.completions(req, res)],
      "/v1/chat/completions": ["POST", async () => this.chat(req, res)],
      "/tokenize": ["POST", async () => this.tokenize(req, res)],
      "/detokenize": ["POST", async () => this.detokenize(req, res)],
      "/token_kinds": ["POST", async () => this.tokenKinds(req, res)],
      "/apply-template": ["POST", async () => this.applyTemplate(req, res)],
      "/props": ["GET", async () => this.props(res)],
    };
    const route = routes[path];
    if (route === undefined) throw new HttpError(404, `no route ${path}`, "invalid_request_error");
    if (route[0] !== method) throw new HttpError(405, `${path} takes ${route[0]}`, "invalid_request_error");
    await route[1]();
  }

  /** Reads and validates a request body; a validation problem is a 400 naming the parameter. */
  private async parseBody<T>(req: IncomingMessage, parse: (body: unknown, limits: { maxTokensCap: number }) => T): Promise<T> {
    const body = await readJson(req);
    try {
      return parse(body, { maxTokensCap: this.options.maxTokensCap });
    } catch (error) {
      if (error instanceof BadRequest) throw new HttpError(400, error.message, "invalid_request_error", error.param);
      throw error;
    }
  }

  private models(res: ServerResponse): void {
    const { validation } = this.options;
    sendJson(res, 200, {
      object: "list",
      data: [{
        id: this.options.modelId, object: "model", created: 0, owned_by: "bringup-bench",
        validated: validation.validated, validation_run: validation.run ?? null, validation_note: validation.note,
        capabilities: { token_ids: true, prompt_logprobs: true, tokenize: true, max_logprobs: 20 },
        settings: { ...this.options.numerics, ...this.options.cache, ...this.options.speculation },
        model_file: this.artifact?.file ?? null, model_sha256: this.artifact?.sha256 ?? null,
        // Where the numbers are computed: ggml's CPU variants differ in their last digits (docs/findings-cpu.md).
        ggml_cpu: cpuIdentity(),
      }],
    });
  }

  private async tokenize(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { model } = this.ready();
    const body = await readJsonObject(req);
    if (typeof body.content !== "string") throw new HttpError(400, "content must be a string", "invalid_request_error", "content");
    const ids = model.tokenize(body.content) as number[];
    // The file's add_bos_token decides, as in llama.cpp: a vocabulary can name a BOS it never adds (Qwen3's).
    const bos = model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
    sendJson(res, 200, { tokens: body.add_special === false || bos === null ? ids : [bos, ...ids] });
  }

  private async detokenize(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { model } = this.ready();
    const body = await readJsonObject(req);
    sendJson(res, 200, { content: model.detokenize(this.vocabularyIds(body.tokens)) });
  }

  private async tokenKinds(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { model } = this.ready();
    const body = await readJsonObject(req);
    sendJson(res, 200, { kinds: this.vocabularyIds(body.tokens).map((id) => {
      const a = model.getTokenAttributes(id);
      return a.byte ? "byte" : a.unknown ? "unknown" : a.control ? "control" : "text";
    }) });
  }

  /** Ids checked against the vocabulary: llama.cpp aborts the whole process on one outside it. */
  private vocabularyIds(tokens: unknown): Token[] {
    if (!Array.isArray(tokens) || !tokens.every((id) => Number.isInteger(id) && id >= 0 && id < this.vocabSize)) {
      throw new HttpError(400, `tokens must be an array of ids from 0 to ${this.vocabSize - 1}`, "invalid_request_error", "tokens");
    }
    return tokens as Token[];
  }

  /**
   * A chat request's prompt: the text the chat template renders, and its ids as llama-server
   * tokenizes a chat prompt (special-token text parsed, BOS added where the file says so).
   */
  private chatPrompt(model: LlamaModel, chat: ChatPrompter, parsed: ChatParams): { text: string; ids: number[] } {
    let text: string;
    try {
      text = chat.render(parsed);
    } catch (error) {
      if (error instanceof ChatPromptError) throw new HttpError(error.status, error.message, error.status === 400 ? "invalid_request_error" : "server_error", error.status === 400 ? "messages" : null);
      throw error;
    }
    return { text, ids: this.promptIds(model, { text }, true) };
  }

  /** llama-server's /apply-template: the chat prompt without generating, plus the ids the chat path feeds (our extension). */
  private async applyTemplate(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { model, chat } = this.ready();
    const prompt = this.chatPrompt(model, chat, await this.parseBody(req, parseChat));
    sendJson(res, 200, { prompt: prompt.text, prompt_token_ids: prompt.ids });
  }

  /** llama-server's /props, the fields about chat: the template in use and the special tokens' texts; `chat_template_origin` (ours) says whether it is the file's. */
  private props(res: ServerResponse): void {
    const { chat } = this.ready();
    sendJson(res, 200, {
      chat_template: chat.source, chat_template_origin: chat.origin, bos_token: chat.specials.bosToken, eos_token: chat.specials.eosToken,
      total_slots: this.options.numerics.slots, model_path: this.artifact?.file ?? null,
    });
  }

  private promptIds(model: LlamaModel, prompt: PromptInput, parseSpecial = false): number[] {
    const vocab = model.tokens;
    if ("ids" in prompt) {
      const bad = prompt.ids.find((id) => id >= this.vocabSize);
      if (bad !== undefined) throw new HttpError(400, `token id ${bad} is outside the vocabulary`, "invalid_request_error", "prompt");
      return prompt.ids;
    }
    const ids = model.tokenize(prompt.text, parseSpecial) as number[];
    return vocab.bos === null || !vocab.shouldPrependBosToken ? ids : [vocab.bos, ...ids];
  }

  /**
   * Runs one generation per prompt (a batched completions request holds several), streaming or
   * not. Every prompt is admitted or none is: a 429 for the third prompt cancels the first two.
   */
  private async generate(
    res: ServerResponse,
    params: CommonParams,
    prompts: readonly number[][],
    extra: { tokenLogprobs: boolean; logprobs: number; promptLogprobs: number; traceRequest: number | undefined },
    out: {
      /** A streamed chunk for prompt `index`'s token (undefined: nothing to send). */
      chunk: (index: number, token: GeneratedToken) => unknown;
      /** The last streamed chunk of prompt `index` (its finish_reason). */
      finalChunk: (index: number, result: GenerationResult) => unknown;
      /** The whole response body, not streaming. */
      body: (results: readonly GenerationResult[]) => object;
      /** The head of every streamed chunk (for the usage chunk). */
      head: object;
    },
  ): Promise<void> {
    const { engine } = this.ready();
    for (const promptIds of prompts) {
      if (promptIds.length > this.options.maxPromptTokens) {
        throw new HttpError(400, `the prompt has ${promptIds.length} tokens, the cap is ${this.options.maxPromptTokens}`, "invalid_request_error", "prompt");
      }
      if (promptIds.length > this.options.numerics.context_size) {
        throw new HttpError(400, `the prompt has ${promptIds.length} tokens, a slot holds ${this.options.numerics.context_size}`, "invalid_request_error", "prompt");
      }
    }
    const abort = new AbortController();
    res.on("close", () => { if (!res.writableEnded) abort.abort(); });
    const pending: Promise<GenerationResult>[] = [];
    try {
      for (const [index, promptIds] of prompts.entries()) {
        pending.push(engine.submit({
          promptIds, maxTokens: params.maxTokens, sampling: { temperature: params.temperature, topP: params.topP, topK: params.topK }, seed: params.seed,
          stop: params.stop, ignoreEos: params.ignoreEos, cachePrompt: params.cachePrompt, ...extra, signal: abort.signal,
          onToken: params.stream ? (token) => { const chunk = out.chunk(index, token); if (chunk !== undefined) sse(res, chunk); } : undefined,
        }));
      }
    } catch (error) {
      abort.abort();
      await Promise.allSettled(pending);
      if (error instanceof EngineFullError) throw new HttpError(429, error.message, "rate_limit_exceeded", null, { "retry-after": "1" });
      if (error instanceof EngineDrainingError) throw new HttpError(503, error.message, "service_unavailable");
      throw error;
    }
    if (params.stream) res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    const settled = await Promise.all(pending.map((p, index) => p.then(
      (result) => { if (params.stream && result.finishReason !== "cancelled") sse(res, out.finalChunk(index, result)); return result; },
      (error: unknown) => error instanceof Error ? error : new Error(String(error)),
    )));
    const failure = settled.find((r): r is Error => r instanceof Error);
    if (failure !== undefined) {
      abort.abort();
      // An engine failure is reported as an error, never as finish_reason "stop".
      const body = { error: { message: failure.message, type: "server_error", param: null, code: 500 } };
      if (!params.stream) return sendJson(res, 500, body);
      sse(res, body);
      res.end("data: [DONE]\n\n");
      return;
    }
    const results = settled as GenerationResult[];
    if (results.some((r) => r.finishReason === "cancelled")) return void res.end();
    const promptTokens = prompts.reduce((sum, p) => sum + p.length, 0);
    const completionTokens = results.reduce((sum, r) => sum + r.tokens.length, 0);
    const cachedTokens = results.reduce((sum, r) => sum + r.cachedTokens, 0);
    const usage = { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens, prompt_tokens_details: { cached_tokens: cachedTokens } };
    if (!params.stream) return sendJson(res, 200, { ...out.body(results), usage });
    if (params.includeUsage) sse(res, { ...out.head, choices: [], usage });
    res.end("data: [DONE]\n\n");
  }

  private async completions(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const traceRequest = this.trace?.httpStarted("/v1/completions");
    const { model } = this.ready();
    const parsed = await this.parseBody(req, parseCompletion);
    const prompts = parsed.prompts.map((p) => this.promptIds(model, p));
    const head = { id: `cmpl-${randomUUID()}`, object: "text_completion", created: Math.floor(Date.now() / 1000), model: this.options.modelId };
    const echoPieces = parsed.echo ? prompts.map((ids) => tokenPieces(model, ids)) : [];
    const echoText = (index: number) => (parsed.echo ? echoPieces[index].join("") : "");
    const choiceLogprobs = (index: number, result: GenerationResult) => {
      if (parsed.logprobs === 0) return null;
      const generated = result.tokens.map((t): LogprobEntry => ({ id: t.id, piece: t.piece, logprob: t.logprob ?? null, top: t.top }));
      if (!parsed.echo) return completionLogprobs(model, generated, 0);
      const echoed = prompts[index].map((id, i): LogprobEntry => {
        const at = i === 0 ? undefined : result.promptLogprobs?.[i - 1];
        return { id, piece: echoPieces[index][i], logprob: at?.logprob ?? null, top: at?.top };
      });
      return completionLogprobs(model, [...echoed, ...generated], 0);
    };
    const logprobs = parsed.logprobs;
    await this.generate(res, parsed, prompts, { tokenLogprobs: logprobs > 0, logprobs, promptLogprobs: parsed.echo && logprobs > 0 ? logprobs : 0, traceRequest }, {
      head,
      chunk: (index, token) => ({ ...head, choices: [{
        index, text: token.text, finish_reason: null, token_ids: [token.id],
        logprobs: logprobs > 0 ? completionLogprobs(model, [{ id: token.id, piece: token.piece, logprob: token.logprob ?? null, top: token.top }], 0) : null,
      }] }),
      // The final chunk carries what was held back as a possible stop string that never completed.
      finalChunk: (index, result) => ({ ...head, choices: [{ index, text: result.unstreamedText, finish_reason: result.finishReason, token_ids: [], logprobs: null }] }),
      body: (results) => ({ ...head, choices: results.map((result, index) => ({
        index, text: echoText(index) + result.text, finish_reason: result.finishReason,
        token_ids: result.tokens.map((t) => t.id), ...(parsed.echo ? { prompt_token_ids: prompts[index] } : {}),
        logprobs: choiceLogprobs(index, result),
      })), ...(results.length === 1 ? { timings: generationTimings(prompts[0].length, results[0]) } : {}) }),
    });
  }

  private async chat(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const traceRequest = this.trace?.httpStarted("/v1/chat/completions");
    const { model, chat } = this.ready();
    const parsed = await this.parseBody(req, parseChat);
    const promptIds = this.chatPrompt(model, chat, parsed).ids;
    // Which template rendered the prompt: the model file's own, or the built-in plain one for a file with none.
    res.setHeader("x-chat-template", chat.origin);
    const head = { id: `chatcmpl-${randomUUID()}`, object: parsed.stream ? "chat.completion.chunk" : "chat.completion", created: Math.floor(Date.now() / 1000), model: this.options.modelId };
    const withLogprobs = parsed.topLogprobs >= 0;
    // OpenAI sends the role first, in a chunk with no content: a client must not clock TTFT on it.
    let sentRole = false;
    const roleChunk = () => {
      if (sentRole) return;
      sentRole = true;
      sse(res, { ...head, choices: [{ index: 0, delta: { role: "assistant" }, logprobs: null, finish_reason: null }] });
    };
    await this.generate(res, parsed, [promptIds], { tokenLogprobs: withLogprobs, logprobs: Math.max(0, parsed.topLogprobs), promptLogprobs: 0, traceRequest }, {
      head,
      chunk: (_, token) => {
        roleChunk();
        return { ...head, choices: [{ index: 0, delta: { content: token.text }, logprobs: withLogprobs ? chatLogprobs(model, [token], [token.piece]) : null, finish_reason: null }] };
      },
      finalChunk: (_, result) => {
        roleChunk();
        return { ...head, choices: [{ index: 0, delta: result.unstreamedText === "" ? {} : { content: result.unstreamedText }, logprobs: null, finish_reason: result.finishReason }] };
      },
      body: ([result]) => ({ ...head, choices: [{
        index: 0, message: { role: "assistant", content: result.text },
        logprobs: withLogprobs ? chatLogprobs(model, result.tokens, result.tokens.map((t) => t.piece)) : null, finish_reason: result.finishReason,
      }] }),
    });
  }
}
