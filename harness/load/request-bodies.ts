import { httpCall } from "../sut/http-call.js";
import { conversationWorkload } from "./conversations.js";
import type { ServedModel } from "./load-server.js";
import type { LoadPlan } from "./plan.js";
import { jsonlPrompts, randomPrompts, sharedPrefixPrompts, type LoadPrompt } from "./prompts.js";
import { warmupRequests } from "./run-load.js";

/** What every point of a load run sends: the endpoint's URL and the i-th request's body (streamed, greedy, ignore_eos). */
export interface LoadRequests {
  readonly url: string;
  readonly body: (index: number) => unknown;
}

/**
 * The plan's prompts as request bodies, enough for the largest point's warm-up and measured
 * requests; a conversations run's in workload order (round by round, users in order). Random prompts are trimmed to their exact token length with the server's own tokenizer
 * where it offers one (/tokenize).
 */
export async function loadRequests(plan: LoadPlan, baseUrl: string, served: ServedModel | undefined): Promise<LoadRequests> {
  const { dataset, sharedPrefix, conversations, inputTokens, outputTokens } = plan.prompts;
  const total = plan.requests + Math.max(...plan.modes.map((mode) => warmupRequests({ mode, warmup: plan.warmup }).count));
  const tokenize = served?.capabilities?.tokenize === true
    ? async (text: string) => JSON.parse((await httpCall(`${baseUrl}/tokenize`, { body: { content: text, add_special: true }, apiKey: plan.apiKey })).text).tokens as number[]
    : undefined;
  const prompts: LoadPrompt[] = conversations !== undefined ? conversationWorkload(conversations).flat().map((r) => ({ prompt: [...r.prompt], maxTokens: outputTokens }))
    : dataset !== undefined ? jsonlPrompts(dataset, outputTokens)
    : sharedPrefix !== undefined ? sharedPrefixPrompts(total, sharedPrefix, outputTokens)
      : await randomPrompts(total, inputTokens, outputTokens, plan.seed, tokenize);
  const model = served?.id ?? "model";
  const body = (i: number) => {
    const p = prompts[i % prompts.length];
    const common = { model, max_tokens: p.maxTokens, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true } };
    return plan.endpoint === "chat" ? { ...common, messages: [{ role: "user", content: typeof p.prompt === "string" ? p.prompt : "" }] } : { ...common, prompt: p.prompt };
  };
  return { url: `${baseUrl}/v1/${plan.endpoint === "chat" ? "chat/completions" : "completions"}`, body };
}
