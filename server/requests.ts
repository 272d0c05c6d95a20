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
  readonly seed: number | undefined;
  readonly stop: string[];
  readonly stream: boolean;
  readonly includeUsage: boolean;
  readonly ignoreEos: boolean;
}

export interface CompletionParams extends CommonParams {
  readonly prompt: { readonly text: string } | { readonly ids: number[] };
  readonly logprobs: number;
  readonly echo: boolean;
}

export interface ChatParams extends CommonParams {
  readonly messages: { role: string; content: string }[];
}

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

function common(body: Body, limits: { maxTokensCap: number }, defaultMaxTokens: number): CommonParams {
  if (body.n !== undefined && body.n !== 1) throw new BadRequest("only n = 1 is supported", "n");
  const stop = body.stop === undefined || body.stop === null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop;
  if (!Array.isArray(stop) || stop.some((s) => typeof s !== "string" || s === "") || stop.length > 4) throw new BadRequest("stop must be a string or up to 4 non-empty strings", "stop");
  const streamOptions = body.stream_options;
  if (streamOptions !== undefined && streamOptions !== null && (typeof streamOptions !== "object" || Array.isArray(streamOptions))) throw new BadRequest("stream_options must be an object", "stream_options");
  if (body.stream !== undefined && typeof body.stream !== "boolean") throw new BadRequest("stream must be a boolean", "stream");
  const maxTokens = optionalNumber(body, "max_tokens", defaultMaxTokens, (n) => Number.isInteger(n) && n >= 0 && n <= limits.maxTokensCap, `an integer from 0 to ${limits.maxTokensCap}`);
  return {
    maxTokens,
    temperature: optionalNumber(body, "temperature", 1, (n) => n >= 0 && n <= 2, "a number from 0 to 2"),
    topP: optionalNumber(body, "top_p", 1, (n) => n > 0 && n <= 1, "a number in (0, 1]"),
    topK: optionalNumber(body, "top_k", 0, (n) => Number.isInteger(n) && n >= 0, "a non-negative integer"),
    seed: body.seed === undefined || body.seed === null ? undefined : optionalNumber(body, "seed", 0, (n) => Number.isInteger(n) && n >= 0, "a non-negative integer"),
    stop: stop as string[],
    stream: body.stream === true,
    includeUsage: (streamOptions as { include_usage?: unknown } | undefined)?.include_usage === true,
    ignoreEos: body.ignore_eos === true,
  };
}

export function parseCompletion(raw: unknown, limits: { maxTokensCap: number }): CompletionParams {
  const body = asObject(raw);
  const prompt = body.prompt;
  let parsed: CompletionParams["prompt"];
  if (typeof prompt === "string") parsed = { text: prompt };
  else if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === "string") parsed = { text: prompt[0] };
  else if (Array.isArray(prompt) && prompt.length > 0 && prompt.every((id) => Number.isInteger(id) && id >= 0)) parsed = { ids: prompt as number[] };
  else throw new BadRequest("prompt must be a string or a non-empty array of token ids", "prompt");
  const logprobs = optionalNumber(body, "logprobs", 0, (n) => Number.isInteger(n) && n >= 0 && n <= 20, "an integer from 0 to 20");
  if (body.echo !== undefined && typeof body.echo !== "boolean") throw new BadRequest("echo must be a boolean", "echo");
  return { ...common(body, limits, 16), prompt: parsed, logprobs, echo: body.echo === true };
}

export function parseChat(raw: unknown, limits: { maxTokensCap: number }): ChatParams {
  const body = asObject(raw);
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) throw new BadRequest("messages must be a non-empty array", "messages");
  for (const [i, message] of messages.entries()) {
    const m = message as { role?: unknown; content?: unknown };
    if (typeof m !== "object" || m === null || !["system", "user", "assistant"].includes(String(m.role)) || typeof m.content !== "string") {
      throw new BadRequest(`messages[${i}] must have a role (system, user, assistant) and string content`, `messages[${i}]`);
    }
  }
  return { ...common(body, limits, limits.maxTokensCap), messages: messages as ChatParams["messages"] };
}

/**
 * A chat template the fixture vocabularies can spell (printable ASCII, spaces): each turn as
 * "Role: content", turns separated by " | ", ending with "Assistant:" for the model to continue.
 */
export function renderChat(messages: ChatParams["messages"]): string {
  const name = (role: string) => role[0].toUpperCase() + role.slice(1);
  return `${messages.map((m) => `${name(m.role)}: ${m.content}`).join(" | ")} | Assistant:`;
}
