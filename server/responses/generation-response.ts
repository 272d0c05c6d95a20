import type { ServerResponse } from "node:http";
import type { BatchEngine } from "../engine.js";
import { EngineDrainingError, EngineFullError, type GeneratedToken, type GenerationResult } from "../generation.js";
import { HttpError, sendJson, sse } from "../http-io.js";
import type { CommonParams } from "../requests.js";
import type { ServerOptions } from "../server-options.js";

/**
 * A generation route's answer, shared by /v1/completions and /v1/chat/completions: its prompts
 * submitted to the engine, then either one JSON body or a stream of server-sent events, with the
 * usage both carry. The route supplies only its shapes (GenerationShapes).
 */

/** What a generation route's request asks of the engine beyond CommonParams. */
export interface GenerationExtras {
  readonly tokenLogprobs: boolean;
  readonly logprobs: number;
  readonly promptLogprobs: number;
  readonly traceRequest: number | undefined;
}

/** A route's response shapes. */
export interface GenerationShapes {
  /** A streamed chunk for prompt `index`'s token (undefined: nothing to send). */
  readonly chunk: (index: number, token: GeneratedToken) => unknown;
  /** The last streamed chunk of prompt `index` (its finish_reason). */
  readonly finalChunk: (index: number, result: GenerationResult) => unknown;
  /** The whole response body, not streaming. */
  readonly body: (results: readonly GenerationResult[]) => object;
  /** The head of every streamed chunk (for the usage chunk). */
  readonly head: object;
}

/** A prompt longer than the server's cap or than a slot holds is a 400 before anything is queued. */
function checkPromptLengths(options: ServerOptions, prompts: readonly number[][]): void {
  for (const promptIds of prompts) {
    if (promptIds.length > options.maxPromptTokens) {
      throw new HttpError(400, `the prompt has ${promptIds.length} tokens, the cap is ${options.maxPromptTokens}`, "invalid_request_error", "prompt");
    }
    if (promptIds.length > options.numerics.context_size) {
      throw new HttpError(400, `the prompt has ${promptIds.length} tokens, a slot holds ${options.numerics.context_size}`, "invalid_request_error", "prompt");
    }
  }
}

/**
 * Every prompt submitted, or none: a 429 for the third prompt cancels the first two. The abort
 * signal also fires when the client goes away before the response ends.
 */
async function submitAll(engine: BatchEngine, res: ServerResponse, params: CommonParams, prompts: readonly number[][], extra: GenerationExtras, out: GenerationShapes, abort: AbortController): Promise<Promise<GenerationResult>[]> {
  const pending: Promise<GenerationResult>[] = [];
  try {
    for (const [index, promptIds] of prompts.entries()) {
      pending.push(engine.submit({
        promptIds, maxTokens: params.maxTokens, sampling: { temperature: params.temperature, topP: params.topP, topK: params.topK, minP: params.minP }, seed: params.seed,
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
  return pending;
}

/** Runs one generation per prompt (a batched completions request holds several), streaming or not, and answers. */
export async function respondWithGenerations(
  engine: BatchEngine, options: ServerOptions, res: ServerResponse, params: CommonParams, prompts: readonly number[][], extra: GenerationExtras, out: GenerationShapes,
): Promise<void> {
  checkPromptLengths(options, prompts);
  const abort = new AbortController();
  res.on("close", () => { if (!res.writableEnded) abort.abort(); });
  const pending = await submitAll(engine, res, params, prompts, extra, out, abort);
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
  const usage = usageOf(prompts, results);
  if (!params.stream) return sendJson(res, 200, { ...out.body(results), usage });
  if (params.includeUsage) sse(res, { ...out.head, choices: [], usage });
  res.end("data: [DONE]\n\n");
}

/** OpenAI's usage, with llama-server's cached-token count. */
function usageOf(prompts: readonly number[][], results: readonly GenerationResult[]) {
  const promptTokens = prompts.reduce((sum, p) => sum + p.length, 0);
  const completionTokens = results.reduce((sum, r) => sum + r.tokens.length, 0);
  const cachedTokens = results.reduce((sum, r) => sum + r.cachedTokens, 0);
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens, prompt_tokens_details: { cached_tokens: cachedTokens } };
}
