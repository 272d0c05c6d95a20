import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { LlamaModel, Token } from "node-llama-cpp";
import type { TopK } from "../harness/sut/types.js";
import { EngineDrainingError, EngineFullError, type BatchEngine, type GenerationResult, type GeneratedToken } from "./engine.js";
import type { ServerMetrics } from "./metrics.js";
import { BadRequest, parseChat, parseCompletion, renderChat, type CommonParams } from "./requests.js";

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
}

/** The settings that change the engine's numerics, in the suite files' spelling. */
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

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, "request body too large", "invalid_request_error");
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
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

/** OpenAI's legacy completions logprobs, plus token-id columns so a client can compare ids, not strings. */
function logprobsObject(model: LlamaModel, entries: readonly { id: number; logprob: number | null; top: TopK | undefined }[]) {
  let offset = 0;
  const text = (id: number) => model.detokenize([id as Token], true);
  return {
    tokens: entries.map((e) => text(e.id)),
    token_logprobs: entries.map((e) => e.logprob),
    top_logprobs: entries.map((e) => (e.top === undefined ? null : Object.fromEntries(e.top.ids.map((id, i) => [text(id), e.top!.logprobs[i]])))),
    text_offset: entries.map((e) => { const at = offset; offset += text(e.id).length; return at; }),
    token_ids: entries.map((e) => e.id),
    top_token_ids: entries.map((e) => (e.top === undefined ? null : e.top.ids)),
    top_token_logprobs: entries.map((e) => (e.top === undefined ? null : e.top.logprobs)),
  };
}

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

  constructor(private readonly options: ServerOptions, private readonly metrics: ServerMetrics) {
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

  attach(engine: BatchEngine, model: LlamaModel, vocabSize: number): void {
    this.engine = engine;
    this.model = model;
    this.vocabSize = vocabSize;
    this.metrics.slotsTotal.set(engine.slotCount);
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

  private ready(): { engine: BatchEngine; model: LlamaModel } {
    if (this.draining) throw new HttpError(503, "the server is draining", "service_unavailable", null, { "retry-after": "5" });
    if (this.engine === undefined || this.model === undefined) throw new HttpError(503, `the server is booting (${this.stage})`, "service_unavailable", null, { "retry-after": "2" });
    return { engine: this.engine, model: this.model };
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
        settings: this.options.numerics,
      }],
    });
  }

  private async tokenize(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { model } = this.ready();
    const body = await readJsonObject(req);
    if (typeof body.content !== "string") throw new HttpError(400, "content must be a string", "invalid_request_error", "content");
    const ids = model.tokenize(body.content) as number[];
    const bos = model.tokens.bos;
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

  private promptIds(model: LlamaModel, prompt: { text: string } | { ids: number[] }): number[] {
    const vocab = model.tokens;
    if ("ids" in prompt) {
      const bad = prompt.ids.find((id) => id >= this.vocabSize);
      if (bad !== undefined) throw new HttpError(400, `token id ${bad} is outside the vocabulary`, "invalid_request_error", "prompt");
      return prompt.ids;
    }
    const ids = model.tokenize(prompt.text) as number[];
    return vocab.bos === null ? ids : [vocab.bos, ...ids];
  }

  private async generate(
    res: ServerResponse,
    params: CommonParams,
    promptIds: number[],
    extra: { logprobs: number; promptLogprobs: number },
    chunkOf: (token: GeneratedToken) => unknown,
    finalOf: (result: GenerationResult) => unknown,
    usageOf: (result: GenerationResult) => unknown,
  ): Promise<void> {
    const { engine } = this.ready();
    if (promptIds.length > this.options.maxPromptTokens) {
      throw new HttpError(400, `the prompt has ${promptIds.length} tokens, the cap is ${this.options.maxPromptTokens}`, "invalid_request_error", "prompt");
    }
    const abort = new AbortController();
    res.on("close", () => { if (!res.writableEnded) abort.abort(); });
    let pending: Promise<GenerationResult>;
    try {
      pending = engine.submit({
        promptIds, maxTokens: params.maxTokens, sampling: { temperature: params.temperature, topP: params.topP, topK: params.topK }, seed: params.seed,
        stop: params.stop, ignoreEos: params.ignoreEos, logprobs: extra.logprobs, promptLogprobs: extra.promptLogprobs, signal: abort.signal,
        onToken: params.stream ? (token) => { if (!res.writableEnded) res.write(`data: ${JSON.stringify(chunkOf(token))}\n\n`); } : undefined,
      });
    } catch (error) {
      if (error instanceof EngineFullError) throw new HttpError(429, error.message, "rate_limit_exceeded", null, { "retry-after": "1" });
      if (error instanceof EngineDrainingError) throw new HttpError(503, error.message, "service_unavailable");
      throw error;
    }
    if (params.stream) res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    let result: GenerationResult;
    try {
      result = await pending;
    } catch (error) {
      // An engine failure is reported as an error, never as finish_reason "stop".
      const body = { error: { message: error instanceof Error ? error.message : String(error), type: "server_error", param: null, code: 500 } };
      if (!params.stream) return sendJson(res, 500, body);
      res.write(`data: ${JSON.stringify(body)}\n\n`);
      res.end("data: [DONE]\n\n");
      return;
    }
    if (result.finishReason === "cancelled") return void res.end();
    if (!params.stream) return sendJson(res, 200, { ...(finalOf(result) as object), usage: usageOf(result) });
    res.write(`data: ${JSON.stringify(finalOf(result))}\n\n`);
    if (params.includeUsage) res.write(`data: ${JSON.stringify({ ...(finalOf(result) as object), choices: [], usage: usageOf(result) })}\n\n`);
    res.end("data: [DONE]\n\n");
  }

  private async completions(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { model } = this.ready();
    const parsed = await this.parseBody(req, parseCompletion);
    if (parsed.maxTokens === 0 && !parsed.echo) throw new HttpError(400, "max_tokens must be at least 1 unless echo is set", "invalid_request_error", "max_tokens");
    const promptIds = this.promptIds(model, parsed.prompt);
    const id = `cmpl-${randomUUID()}`;
    const created = Math.floor(Date.now() / 1000);
    const head = { id, object: "text_completion", created, model: this.options.modelId };
    const promptLogprobs = parsed.echo && parsed.logprobs > 0 ? parsed.logprobs : 0;
    const choiceLogprobs = (result: GenerationResult) => {
      if (parsed.logprobs === 0) return null;
      const generated = result.tokens.map((t) => ({ id: t.id, logprob: t.logprob as number | null, top: t.top }));
      if (!parsed.echo) return logprobsObject(model, generated);
      const prompt = promptIds.map((tokenId, i) => {
        const top = i === 0 ? undefined : result.promptTop?.[i - 1];
        const at = top?.ids.indexOf(tokenId) ?? -1;
        return { id: tokenId, logprob: i === 0 ? null : at >= 0 ? top!.logprobs[at] : null, top };
      });
      return logprobsObject(model, [...prompt, ...generated]);
    };
    const promptText = parsed.echo ? model.detokenize(promptIds as Token[]) : "";
    await this.generate(res, parsed, promptIds, { logprobs: parsed.logprobs, promptLogprobs },
      (token) => ({ ...head, choices: [{ index: 0, text: token.text, finish_reason: null, token_ids: [token.id], logprobs: parsed.logprobs > 0 ? logprobsObject(model, [{ id: token.id, logprob: token.logprob, top: token.top }]) : null }] }),
      (result) => ({ ...head, choices: [{
        index: 0, text: parsed.stream ? "" : promptText + result.text, finish_reason: result.finishReason,
        token_ids: parsed.stream ? [] : result.tokens.map((t) => t.id), ...(parsed.echo ? { prompt_token_ids: promptIds } : {}),
        logprobs: parsed.stream ? null : choiceLogprobs(result),
      }] }),
      (result) => ({ prompt_tokens: promptIds.length, completion_tokens: result.tokens.length, total_tokens: promptIds.length + result.tokens.length }),
    );
  }

  private async chat(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { model } = this.ready();
    const parsed = await this.parseBody(req, parseChat);
    const promptIds = this.promptIds(model, { text: renderChat(parsed.messages) });
    const head = { id: `chatcmpl-${randomUUID()}`, object: parsed.stream ? "chat.completion.chunk" : "chat.completion", created: Math.floor(Date.now() / 1000), model: this.options.modelId };
    // OpenAI sends the role first, in a chunk with no content: a client must not clock TTFT on it.
    let sentRole = false;
    await this.generate(res, parsed, promptIds, { logprobs: 0, promptLogprobs: 0 },
      (token) => {
        if (!sentRole) {
          sentRole = true;
          res.write(`data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta: { role: "assistant" }, finish_reason: null }] })}\n\n`);
        }
        return { ...head, choices: [{ index: 0, delta: { content: token.text }, finish_reason: null }] };
      },
      (result) => parsed.stream
        ? { ...head, choices: [{ index: 0, delta: {}, finish_reason: result.finishReason }] }
        : { ...head, choices: [{ index: 0, message: { role: "assistant", content: result.text }, finish_reason: result.finishReason }] },
      (result) => ({ prompt_tokens: promptIds.length, completion_tokens: result.tokens.length, total_tokens: promptIds.length + result.tokens.length }),
    );
  }
}
