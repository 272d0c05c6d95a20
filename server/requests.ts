import type { ChatToolCall, ChatTurn } from "../harness/chat/chat-template.js";
import { serverFaultFromEnvironment } from "./faults.js";
import { MAX_SEED } from "./sampling.js";

/**
 * Validation of OpenAI-style request bodies. Every problem becomes a 400 with an OpenAI error
 * object naming the parameter; unknown fields are ignored, as OpenAI-compatible servers do.
 */
export class BadRequest extends Error {
  constructor(message: string, readonly param: string | null) {
    super(message);
  }
}

export interface CommonParams {
  readonly maxTokens: number;
  readonly temperature: number;
  readonly topP: number;
  readonly topK: number;
  readonly minP: number;
  readonly seed: number | undefined;
  readonly stop: string[];
  readonly stream: boolean;
  readonly includeUsage: boolean;
  readonly ignoreEos: boolean;
  /** llama-server's `cache_prompt`: false asks for this request's prompt to be evaluated from scratch (a cold answer to compare a cached one with). */
  readonly cachePrompt: boolean;
}

export type PromptInput = { readonly text: string } | { readonly ids: number[] };

export interface CompletionParams extends CommonParams {
  /** One choice per prompt, in order (a batch: OpenAI's list of strings or list of token lists). */
  readonly prompts: readonly PromptInput[];
  readonly logprobs: number;
  readonly echo: boolean;
}

export interface ChatParams extends CommonParams {
  readonly messages: ChatTurn[];
  /** The OpenAI `tools` list, handed to the chat template as given (undefined: none). */
  readonly tools: readonly Record<string, unknown>[] | undefined;
  /** llama-server's `add_generation_prompt` (default true): false renders the turns alone, for /apply-template. */
  readonly addGenerationPrompt: boolean;
  /** Top log-probs per generated token when `logprobs: true` (0 with none; -1: no log-probs at all). */
  readonly topLogprobs: number;
}

/** Prompts one batched request may carry: each holds a slot or a queue place. */
const MAX_BATCH_PROMPTS = 64;

type Body = Record<string, unknown>;

function asObject(body: unknown): Body {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new BadRequest("the request body must be a JSON object", null);
  return body as Body;
}

function optionalNumber(body: Body, key: string, fallback: number, check: (n: number) => boolean, rule: string): number {
  const value = body[key];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || !check(value)) throw new BadRequest(`${key} must be ${rule}`, key);
  return value;
}

/**
 * Sampling parameters this server does not implement, each with the value that asks for nothing:
 * a request that sends another value is refused naming the parameter, never answered as if it had
 * not asked (a client relying on a penalty or a bias would get no error and no effect).
 */
const UNIMPLEMENTED: readonly (readonly [string, (value: unknown) => boolean])[] = [
  ["logit_bias", (value) => typeof value === "object" && value !== null && Object.keys(value).length === 0],
  ["frequency_penalty", (value) => value === 0],
  ["presence_penalty", (value) => value === 0],
  ["repeat_penalty", (value) => value === 1],
];

function refuseUnimplemented(body: Body): void {
  // FAULT sample-params-ignored: accepted, and nothing done with them.
  if (serverFaultFromEnvironment() === "sample-params-ignored") return;
  if (body.n !== undefined && body.n !== null && body.n !== 1) throw new BadRequest("only n = 1 is supported (send n requests, each with its own seed)", "n");
  for (const [key, neutral] of UNIMPLEMENTED) {
    const value = body[key];
    if (value !== undefined && value !== null && !neutral(value)) throw new BadRequest(`${key} is not supported by this server (omit it)`, key);
  }
}

function common(body: Body, limits: { maxTokensCap: number }, defaultMaxTokens: number, maxTokensKey = "max_tokens"): CommonParams {
  refuseUnimplemented(body);
  const stop = body.stop === undefined || body.stop === null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop;
  // No count limit, as llama-server has none: OpenAI's 4 turns lm-eval's generate_until away (it sends
  // every `until` string plus the EOS text). The request body's size bounds the work per token.
  if (!Array.isArray(stop) || stop.some((s) => typeof s !== "string" || s === "")) throw new BadRequest("stop must be a string or an array of non-empty strings", "stop");
  const streamOptions = body.stream_options;
  if (streamOptions !== undefined && streamOptions !== null && (typeof streamOptions !== "object" || Array.isArray(streamOptions))) throw new BadRequest("stream_options must be an object", "stream_options");
  if (body.stream !== undefined && typeof body.stream !== "boolean") throw new BadRequest("stream must be a boolean", "stream");
  const maxTokens = optionalNumber(body, maxTokensKey, defaultMaxTokens, (n) => Number.isInteger(n) && n >= 0 && n <= limits.maxTokensCap, `an integer from 0 to ${limits.maxTokensCap}`);
  return {
    maxTokens,
    temperature: optionalNumber(body, "temperature", 1, (n) => n >= 0 && n <= 2, "a number from 0 to 2"),
    topP: optionalNumber(body, "top_p", 1, (n) => n > 0 && n <= 1, "a number in (0, 1]"),
    topK: optionalNumber(body, "top_k", 0, (n) => Number.isInteger(n) && n >= 0, "a non-negative integer"),
    minP: serverFaultFromEnvironment() === "sample-params-ignored" ? 0 : optionalNumber(body, "min_p", 0, (n) => n >= 0 && n <= 1, "a number from 0 to 1"),
    seed: body.seed === undefined || body.seed === null ? undefined : optionalNumber(body, "seed", 0, (n) => Number.isSafeInteger(n) && n >= 0, `an integer from 0 to ${MAX_SEED} (2^53 - 1)`),
    stop: stop as string[],
    stream: body.stream === true,
    includeUsage: (streamOptions as { include_usage?: unknown } | undefined)?.include_usage === true,
    ignoreEos: body.ignore_eos === true,
    cachePrompt: optionalBoolean(body, "cache_prompt", true),
  };
}

function optionalBoolean(body: Body, key: string, fallback: boolean): boolean {
  const value = body[key];
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "boolean") throw new BadRequest(`${key} must be a boolean`, key);
  return value;
}

const isTokenList = (value: unknown): value is number[] => Array.isArray(value) && value.length > 0 && value.every((id) => Number.isInteger(id) && id >= 0);

/** OpenAI's four prompt shapes: a string, a list of strings, a token list, a list of token lists. */
function parsePrompts(prompt: unknown): PromptInput[] {
  if (typeof prompt === "string") return [{ text: prompt }];
  if (isTokenList(prompt)) return [{ ids: prompt }];
  const rule = "prompt must be a string, a non-empty array of token ids, or a non-empty array of either";
  if (!Array.isArray(prompt) || prompt.length === 0) throw new BadRequest(rule, "prompt");
  if (prompt.length > MAX_BATCH_PROMPTS) throw new BadRequest(`a batch holds at most ${MAX_BATCH_PROMPTS} prompts`, "prompt");
  return prompt.map((item: unknown) => {
    if (typeof item === "string") return { text: item };
    if (isTokenList(item)) return { ids: item };
    throw new BadRequest(rule, "prompt");
  });
}

export function parseCompletion(raw: unknown, limits: { maxTokensCap: number }): CompletionParams {
  const body = asObject(raw);
  const prompts = parsePrompts(body.prompt);
  const logprobs = optionalNumber(body, "logprobs", 0, (n) => Number.isInteger(n) && n >= 0 && n <= 20, "an integer from 0 to 20");
  if (body.echo !== undefined && typeof body.echo !== "boolean") throw new BadRequest("echo must be a boolean", "echo");
  const params = { ...common(body, limits, 16), prompts, logprobs, echo: body.echo === true };
  if (params.maxTokens === 0 && !params.echo) throw new BadRequest("max_tokens must be at least 1 unless echo is set", "max_tokens");
  return params;
}

/** Message content: a string, or an array of text parts (the openai client's shape), joined by newlines. */
function messageText(content: unknown, param: string): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw new BadRequest(`${param} must be a string or an array of text parts`, param);
  return content.map((part: unknown, j) => {
    const p = part as { type?: unknown; text?: unknown };
    if (typeof p !== "object" || p === null || p.type !== "text" || typeof p.text !== "string") {
      throw new BadRequest(`${param}[${j}] must be {"type": "text", "text": "..."} (this model reads text only)`, `${param}[${j}]`);
    }
    return p.text;
  }).join("\n");
}

/** OpenAI's `developer` role is the newer name of `system` (instructions that outrank the user's). */
const ROLES: Readonly<Record<string, ChatTurn["role"]>> = { system: "system", developer: "system", user: "user", assistant: "assistant", tool: "tool" };

/** An assistant turn's tool calls: OpenAI's shape, `arguments` the JSON text the model wrote. */
function toolCalls(value: unknown, param: string): ChatToolCall[] {
  const rule = `${param} must be an array of {"type": "function", "function": {"name": "...", "arguments": "<JSON text>"}}`;
  if (!Array.isArray(value)) throw new BadRequest(rule, param);
  return value.map((call: unknown, j): ChatToolCall => {
    const c = call as { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } } | null;
    if (typeof c !== "object" || c === null || (c.type !== undefined && c.type !== "function") || typeof c.function?.name !== "string" || typeof c.function.arguments !== "string"
      || (c.id !== undefined && typeof c.id !== "string")) throw new BadRequest(rule, `${param}[${j}]`);
    return { ...(c.id === undefined ? {} : { id: c.id }), type: "function", function: { name: c.function.name, arguments: c.function.arguments } };
  });
}

function chatTurn(message: unknown, i: number): ChatTurn {
  const m = message as { role?: unknown; content?: unknown; tool_calls?: unknown; tool_call_id?: unknown; name?: unknown };
  // Own keys only: "constructor" or "toString" are no roles.
  const role = typeof m === "object" && m !== null && typeof m.role === "string" && Object.hasOwn(ROLES, m.role) ? ROLES[m.role] : undefined;
  if (role === undefined) throw new BadRequest(`messages[${i}] must have a role (developer, system, user, assistant, tool)`, `messages[${i}].role`);
  const calls = role === "assistant" && m.tool_calls !== undefined && m.tool_calls !== null ? toolCalls(m.tool_calls, `messages[${i}].tool_calls`) : undefined;
  // An assistant turn that only calls tools has null content (OpenAI); templates read it as "", as llama-server passes it.
  const content = calls !== undefined && (m.content === null || m.content === undefined) ? "" : messageText(m.content, `messages[${i}].content`);
  for (const key of ["tool_call_id", "name"] as const) {
    if (m[key] !== undefined && typeof m[key] !== "string") throw new BadRequest(`messages[${i}].${key} must be a string`, `messages[${i}].${key}`);
  }
  return {
    role, content, ...(calls === undefined ? {} : { tool_calls: calls }),
    ...(typeof m.tool_call_id === "string" ? { tool_call_id: m.tool_call_id } : {}), ...(typeof m.name === "string" ? { name: m.name } : {}),
  };
}

function chatTools(value: unknown): readonly Record<string, unknown>[] | undefined {
  if (value === undefined || value === null) return undefined;
  const isTool = (tool: unknown) => typeof tool === "object" && tool !== null && (tool as { type?: unknown }).type === "function"
    && typeof (tool as { function?: { name?: unknown } }).function?.name === "string";
  if (!Array.isArray(value) || !value.every(isTool)) throw new BadRequest(`tools must be an array of {"type": "function", "function": {"name": "...", ...}}`, "tools");
  return value as Record<string, unknown>[];
}

export function parseChat(raw: unknown, limits: { maxTokensCap: number }): ChatParams {
  const body = asObject(raw);
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) throw new BadRequest("messages must be a non-empty array", "messages");
  const parsed = messages.map(chatTurn);
  // max_completion_tokens is the chat API's current name; max_tokens its deprecated alias.
  const limitKey = body.max_completion_tokens !== undefined && body.max_completion_tokens !== null ? "max_completion_tokens" : "max_tokens";
  const params = common(body, limits, limits.maxTokensCap, limitKey);
  if (params.maxTokens === 0) throw new BadRequest(`${limitKey} must be at least 1`, limitKey);
  if (body.logprobs !== undefined && body.logprobs !== null && typeof body.logprobs !== "boolean") throw new BadRequest("logprobs must be a boolean in chat completions", "logprobs");
  const topLogprobs = optionalNumber(body, "top_logprobs", 0, (n) => Number.isInteger(n) && n >= 0 && n <= 20, "an integer from 0 to 20");
  if (body.top_logprobs !== undefined && body.top_logprobs !== null && body.logprobs !== true) throw new BadRequest("top_logprobs needs logprobs: true", "top_logprobs");
  return {
    ...params, messages: parsed, tools: chatTools(body.tools), addGenerationPrompt: optionalBoolean(body, "add_generation_prompt", true),
    topLogprobs: body.logprobs === true ? topLogprobs : -1,
  };
}
