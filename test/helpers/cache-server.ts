/**
 * What the prompt cache tests share: our server on a family's fixture over loopback, greedy
 * completions of token-id prompts with what usage says was cached, and /metrics read back.
 */
import * as assert from "uvu/assert";
import { resolveModel } from "../../harness/fixtures/registry.js";
import { httpCall } from "../../harness/sut/http-call.js";
import { startManagedServer, type ManagedServer, type ManagedServerOptions } from "../../harness/sut/managed-server.js";
import { SERVER_FAULT_ENV, type ServerFault } from "../../server/faults.js";

export const MAX_TOKENS = 16;

export interface Answer {
  readonly ids: number[];
  readonly cached: number;
  /** Each generated token's log-prob, where asked for. */
  readonly logprobs: number[] | undefined;
}

/** A greedy completion of MAX_TOKENS tokens; `cachePrompt: false` bypasses the cache for this request. */
export async function complete(server: ManagedServer, prompt: readonly number[], options: { readonly cachePrompt?: boolean; readonly logprobs?: boolean } = {}): Promise<Answer> {
  const body = { prompt, temperature: 0, max_tokens: MAX_TOKENS, ignore_eos: true, cache_prompt: options.cachePrompt ?? true, ...(options.logprobs === true ? { logprobs: 1 } : {}) };
  const response = await httpCall(`${server.baseUrl}/v1/completions`, { body });
  assert.is(response.status, 200, response.text);
  const answer = JSON.parse(response.text) as { choices: { token_ids: number[]; logprobs?: { token_logprobs: number[] } }[]; usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } };
  const choice = answer.choices[0];
  assert.is(choice.token_ids.length, MAX_TOKENS);
  assert.is(answer.usage.prompt_tokens, prompt.length);
  if (options.logprobs === true) assert.is(choice.logprobs?.token_logprobs.length, MAX_TOKENS, "one log-prob per generated token");
  return { ids: choice.token_ids, cached: answer.usage.prompt_tokens_details.cached_tokens, logprobs: choice.logprobs?.token_logprobs };
}

export async function tokenize(server: ManagedServer, text: string, bos: boolean): Promise<number[]> {
  const response = await httpCall(`${server.baseUrl}/tokenize`, { body: { content: text, add_special: bos } });
  return (JSON.parse(response.text) as { tokens: number[] }).tokens;
}

/** A sample of /metrics by its series name (NaN where absent). */
export async function metricsReader(server: ManagedServer): Promise<(name: string) => number> {
  const text = (await httpCall(`${server.baseUrl}/metrics`)).text;
  return (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
}

/** The prompt-token counters of /metrics. */
export async function promptCounters(server: ManagedServer): Promise<{ total: number; cached: number; evaluated: number }> {
  const read = await metricsReader(server);
  return { total: read("bench_prompt_tokens_total"), cached: read("bench_prompt_tokens_cached_total"), evaluated: read("bench_prompt_tokens_evaluated_total") };
}

export async function serve(model: string, options: Partial<ManagedServerOptions>, fault?: ServerFault): Promise<ManagedServer> {
  const path = (await resolveModel(model)).path;
  // A FAKE fault reaches the server through its environment, which it inherits when it starts.
  if (fault !== undefined) process.env[SERVER_FAULT_ENV] = fault;
  try {
    // Batch 64: gemma4's sliding-window cache is then 256 cells for two slots, so long prompts in both overwrite cells that left the window.
    return await startManagedServer({ modelPath: path, slots: 2, queue: 4, contextSize: 256, threads: 1, flashAttention: false, kvCacheType: "F32", batchSize: 64, bootTimeoutS: 120, ...options });
  } finally {
    delete process.env[SERVER_FAULT_ENV];
  }
}

/** Ids of no text in particular (every fixture's vocabulary holds them): prompts whose answers depend on every part of the state. */
export const idRun = (length: number, first: number, step: number): number[] => Array.from({ length }, (_, i) => first + ((i * step) % 97));
