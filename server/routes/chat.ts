import type { IncomingMessage, ServerResponse } from "node:http";
import { randomUUID } from "node:crypto";
import type { LlamaModel } from "node-llama-cpp";
import { ChatPromptError, type ChatPrompter } from "../chat-prompt.js";
import { HttpError, parseBody, sendJson, sse } from "../http-io.js";
import { parseChat, type ChatParams } from "../requests.js";
import { chatLogprobs } from "../responses/logprobs.js";
import { respondWithGenerations } from "../responses/generation-response.js";
import type { RouteContext } from "./route-context.js";
import { promptIds } from "./tokens.js";

/**
 * A chat request's prompt: the text the chat template renders, and its ids as llama-server
 * tokenizes a chat prompt (special-token text parsed, BOS added where the file says so).
 */
function chatPrompt(model: LlamaModel, vocabSize: number, chat: ChatPrompter, parsed: ChatParams): { text: string; ids: number[] } {
  let text: string;
  try {
    text = chat.render(parsed);
  } catch (error) {
    if (error instanceof ChatPromptError) throw new HttpError(error.status, error.message, error.status === 400 ? "invalid_request_error" : "server_error", error.status === 400 ? "messages" : null);
    throw error;
  }
  return { text, ids: promptIds(model, vocabSize, { text }) };
}

/** llama-server's /apply-template: the chat prompt without generating, plus the ids the chat path feeds (our extension). */
export async function applyTemplate(ctx: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { model, vocabSize, chat } = ctx.ready();
  const prompt = chatPrompt(model, vocabSize, chat, await parseBody(req, parseChat, { maxTokensCap: ctx.options.maxTokensCap }));
  sendJson(res, 200, { prompt: prompt.text, prompt_token_ids: prompt.ids });
}

/** /v1/chat/completions: one conversation through the chat template, streamed (role chunk first) or whole. */
export async function chatCompletions(ctx: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const traceRequest = ctx.trace?.httpStarted("/v1/chat/completions");
  const { model, vocabSize, chat } = ctx.ready();
  const parsed = await parseBody(req, parseChat, { maxTokensCap: ctx.options.maxTokensCap });
  const ids = chatPrompt(model, vocabSize, chat, parsed).ids;
  // Which template rendered the prompt: the model file's own, or the built-in plain one for a file with none.
  res.setHeader("x-chat-template", chat.origin);
  const head = { id: `chatcmpl-${randomUUID()}`, object: parsed.stream ? "chat.completion.chunk" : "chat.completion", created: Math.floor(Date.now() / 1000), model: ctx.options.modelId };
  const withLogprobs = parsed.topLogprobs >= 0;
  // OpenAI sends the role first, in a chunk with no content: a client must not clock TTFT on it.
  let sentRole = false;
  const roleChunk = () => {
    if (sentRole) return;
    sentRole = true;
    sse(res, { ...head, choices: [{ index: 0, delta: { role: "assistant" }, logprobs: null, finish_reason: null }] });
  };
  await respondWithGenerations(ctx.ready().engine, ctx.options, res, parsed, [ids], { tokenLogprobs: withLogprobs, logprobs: Math.max(0, parsed.topLogprobs), promptLogprobs: 0, traceRequest }, {
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
