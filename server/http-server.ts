import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { LlamaModel } from "node-llama-cpp";
import type { BatchEngine } from "./engine.js";
import type { ServerMetrics } from "./metrics.js";
import type { ChatPrompter } from "./chat-prompt.js";
import { HttpError, sendError, sendJson } from "./http-io.js";
import type { ServedArtifact, ServerOptions } from "./server-options.js";
import type { StepTracer } from "./step-trace.js";
import { applyTemplate, chatCompletions } from "./routes/chat.js";
import { completions } from "./routes/completions.js";
import type { Ready, RouteContext } from "./routes/route-context.js";
import { allocations, models, props } from "./routes/server-info.js";
import { detokenize, tokenize, tokenKinds } from "./routes/tokens.js";

type Handler = (ctx: RouteContext, req: IncomingMessage, res: ServerResponse) => Promise<void> | void;

/** Every route past the API key: its method and its handler (routes/). */
const ROUTES: Readonly<Record<string, readonly [method: string, handler: Handler]>> = {
  "/v1/models": ["GET", (ctx, _req, res) => models(ctx, res)],
  "/v1/completions": ["POST", completions],
  "/v1/chat/completions": ["POST", chatCompletions],
  "/tokenize": ["POST", tokenize],
  "/detokenize": ["POST", detokenize],
  "/token_kinds": ["POST", tokenKinds],
  "/apply-template": ["POST", applyTemplate],
  "/props": ["GET", (ctx, _req, res) => props(ctx, res)],
  "/allocations": ["GET", (ctx, _req, res) => allocations(ctx, res)],
};

/**
 * The OpenAI-compatible HTTP face of the batching engine: /v1/completions, /v1/chat/completions,
 * /v1/models, /health, /metrics, plus /tokenize, /detokenize and /token_kinds (llama.cpp-server
 * style extensions the harness uses to feed ids and build haystacks) and /allocations (what it allocated). Listens before the model is
 * loaded so /health can answer 503 with the boot stage. This file routes and refuses (auth, boot,
 * draining, unknown paths and methods); each route's handler and its response shapes are in
 * routes/ and responses/.
 */
export class CompletionServer {
  private readonly http: Server;
  private booted: Ready | undefined;
  private stage = "starting";
  private draining = false;
  private artifact: ServedArtifact | undefined;
  private readonly context: RouteContext;

  constructor(private readonly options: ServerOptions, private readonly metrics: ServerMetrics, trace?: StepTracer) {
    this.context = { options, trace, ready: () => this.ready(), served: () => this.artifact };
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

  attach(engine: BatchEngine, model: LlamaModel, vocabSize: number, artifact: ServedArtifact, chat: ChatPrompter, allocations: Ready["allocations"]): void {
    this.artifact = artifact;
    this.booted = { engine, model, chat, vocabSize, allocations };
    this.metrics.slots.set(engine.slotCount);
    this.stage = "ready";
  }

  /** SIGTERM: refuse new work (503), let in-flight requests finish, then close. */
  async shutdown(): Promise<void> {
    this.draining = true;
    this.stage = "draining";
    await this.booted?.engine.drain();
    await new Promise<void>((resolve) => { this.http.close(() => resolve()); this.http.closeIdleConnections(); });
    await this.booted?.engine.close();
  }

  private ready(): Ready {
    if (this.draining) throw new HttpError(503, "the server is draining", "service_unavailable", null, { "retry-after": "5" });
    if (this.booted === undefined) throw new HttpError(503, `the server is booting (${this.stage})`, "service_unavailable", null, { "retry-after": "2" });
    return this.booted;
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0];
    const method = req.method ?? "GET";
    const engine = this.booted?.engine;
    if (path === "/health") {
      const ok = engine !== undefined && !this.draining;
      return sendJson(res, ok ? 200 : 503, ok ? { status: "ok" } : { status: this.draining ? "draining" : "booting", stage: this.stage });
    }
    if (path === "/metrics") {
      if (engine !== undefined) this.metrics.refresh(engine);
      const text = await this.metrics.registry.metrics();
      res.writeHead(200, { "content-type": this.metrics.registry.contentType });
      res.end(text);
      return;
    }
    if (this.options.apiKey !== undefined && req.headers.authorization !== `Bearer ${this.options.apiKey}`) {
      throw new HttpError(401, "missing or wrong API key", "authentication_error");
    }
    const route = Object.hasOwn(ROUTES, path) ? ROUTES[path] : undefined;
    if (route === undefined) throw new HttpError(404, `no route ${path}`, "invalid_request_error");
    if (route[0] !== method) throw new HttpError(405, `${path} takes ${route[0]}`, "invalid_request_error");
    await route[1](this.context, req, res);
  }
}
