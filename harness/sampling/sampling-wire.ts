import { httpCall } from "../sut/http-call.js";
import { perCaseTimeoutNote, type CaseTimeout } from "../sut/with-timeout.js";
import type { TokenId } from "../sut/types.js";
import type { SamplingWire } from "../suites/sampling-suite.js";
import type { SamplingSetting } from "./convention.js";

/**
 * A sampled generation asked of a server in its wire format: OpenAI's /v1/completions (the
 * token ids from `token_ids`, which our server adds to each choice and each streamed chunk) or
 * llama.cpp's /completion (`return_tokens`). A batch of prompts is one request with one choice
 * per prompt, in order. llama.cpp's samplers this suite does not model are sent at their neutral
 * values, so that its chain is top_k, top_p, min_p and the temperature alone.
 */
export interface SampledRequest {
  readonly prompts: readonly (readonly TokenId[])[];
  readonly maxTokens: number;
  readonly setting: SamplingSetting;
  readonly seed?: number;
  readonly stream: boolean;
  /** Parameters sent as they are (logit_bias, penalties, n), in the wire's own names. */
  readonly extra?: Readonly<Record<string, unknown>>;
}

/** A server's answer: the ids of each choice, or its refusal (status and body) when it did not answer 200. */
export type SampledAnswer = { readonly ok: true; readonly choices: TokenId[][] } | { readonly ok: false; readonly status: number; readonly body: string };

const LLAMA_NEUTRAL = { repeat_penalty: 1, presence_penalty: 0, frequency_penalty: 0, typical_p: 1, xtc_probability: 0, dry_multiplier: 0, top_n_sigma: -1, mirostat: 0 };

function requestBody(wire: SamplingWire, r: SampledRequest): { path: string; body: Record<string, unknown> } {
  const { temperature, top_k, top_p, min_p } = r.setting;
  const prompt = r.prompts.length === 1 ? r.prompts[0] : r.prompts;
  const common = { prompt, temperature, top_k, top_p, min_p, stream: r.stream, ignore_eos: true, ...(r.seed === undefined ? {} : { seed: r.seed }) };
  if (wire === "openai") return { path: "/v1/completions", body: { ...common, max_tokens: r.maxTokens, ...r.extra } };
  return { path: "/completion", body: { ...LLAMA_NEUTRAL, ...common, n_predict: r.maxTokens, return_tokens: true, ...r.extra } };
}

function idsOf(value: unknown, what: string): TokenId[] {
  if (!Array.isArray(value) || !value.every((id) => Number.isInteger(id) && id >= 0)) throw new Error(`${what} is not a list of token ids: ${JSON.stringify(value)?.slice(0, 120)}`);
  return value as TokenId[];
}

/** One answer object's choices: OpenAI's `choices` (by index), or llama.cpp's object (or array of them, one per prompt). */
function choicesOf(wire: SamplingWire, parsed: unknown, into: TokenId[][]): void {
  if (wire === "openai") {
    for (const choice of (parsed as { choices?: { index?: unknown; token_ids?: unknown }[] }).choices ?? []) {
      const index = typeof choice.index === "number" ? choice.index : 0;
      (into[index] ??= []).push(...idsOf(choice.token_ids, `choices[${index}].token_ids`));
    }
    return;
  }
  const answers = Array.isArray(parsed) ? parsed : [parsed];
  answers.forEach((answer: { index?: unknown; tokens?: unknown }, i) => {
    const index = typeof answer.index === "number" ? answer.index : i;
    (into[index] ??= []).push(...idsOf(answer.tokens, `tokens of answer ${index}`));
  });
}

/** Where a request goes and how long it may take: the leg's signal and the per-case timeout, which bounds each request. */
export interface SamplingServer {
  readonly baseUrl: string;
  readonly wire: SamplingWire;
  readonly signal: AbortSignal;
  readonly timeout: CaseTimeout;
}

/** Asks the server for one sampled generation per prompt of `r`. */
export async function sampled(server: SamplingServer, r: SampledRequest): Promise<SampledAnswer> {
  const { baseUrl, wire, timeout } = server;
  const { path, body } = requestBody(wire, r);
  const timer = AbortSignal.timeout(timeout.seconds * 1000);
  const response = await httpCall(`${baseUrl}${path}`, { body, signal: AbortSignal.any([server.signal, timer]) }).catch((error: unknown) => {
    if (timer.aborted && !server.signal.aborted) throw new Error(`${baseUrl}${path} did not answer within ${timeout.seconds} s ${perCaseTimeoutNote(timeout)}`, { cause: error });
    throw error;
  });
  if (response.status !== 200) return { ok: false, status: response.status, body: response.text.slice(0, 300) };
  const choices: TokenId[][] = [];
  if (r.stream) {
    for (const line of response.text.split("\n")) {
      const data = line.startsWith("data:") ? line.slice(5).trim() : "";
      // llama-server's stream of a batch of prompts puts a `data: null` event before each prompt's chunks.
      if (data === "" || data === "[DONE]" || data === "null") continue;
      choicesOf(wire, JSON.parse(data), choices);
    }
  } else {
    choicesOf(wire, JSON.parse(response.text), choices);
  }
  const expected = wire === "openai" && typeof r.extra?.n === "number" ? r.extra.n * r.prompts.length : r.prompts.length;
  if (choices.length !== expected || choices.some((ids) => ids === undefined)) throw new Error(`${path} answered ${choices.filter((ids) => ids !== undefined).length} choices for ${expected}`);
  return { ok: true, choices };
}

/** `count` first tokens drawn at one prompt and setting, unseeded, `batch` prompts a request and `concurrency` requests at once: how often each id came. */
export async function drawFirstTokens(server: SamplingServer, options: {
  readonly prompt: readonly TokenId[]; readonly setting: SamplingSetting; readonly count: number; readonly vocabSize: number;
  readonly stream: boolean; readonly batch: number; readonly concurrency: number;
}): Promise<Float64Array> {
  const counts = new Float64Array(options.vocabSize);
  let left = options.count;
  const worker = async () => {
    while (left > 0) {
      const size = Math.min(options.batch, left);
      left -= size;
      const answer = await sampled(server, { prompts: Array.from({ length: size }, () => options.prompt), maxTokens: 1, setting: options.setting, stream: options.stream });
      if (!answer.ok) throw new Error(`a sampled request was refused: HTTP ${answer.status} ${answer.body}`);
      for (const ids of answer.choices) {
        if (ids.length !== 1) throw new Error(`asked for one token, got ${ids.length}`);
        if (ids[0] >= options.vocabSize) throw new Error(`token ${ids[0]} is outside the vocabulary (${options.vocabSize})`);
        counts[ids[0]]++;
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  return counts;
}
