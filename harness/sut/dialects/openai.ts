import { idList, reportedCount, sortedTopK, timedGreedy, type Dialect, type DialectClient, type DialectOffer, type GenerationTimings } from "./dialect.js";
import type { TopK } from "../types.js";

interface Choice {
  readonly token_ids?: unknown;
  readonly logprobs?: { readonly top_token_ids?: unknown[]; readonly top_token_logprobs?: unknown[] } | null;
}

/**
 * Plain OpenAI /v1/completions: a prompt of token ids, `temperature: 0` for greedy, `echo` with
 * `logprobs` for teacher forcing. OpenAI's own answers carry text only; ids are read where the
 * server adds them (`choices[].token_ids`, as vLLM's `return_token_ids` and our server do;
 * `logprobs.top_token_ids` beside the top log-probs, as our server does). A server that answers
 * text only offers neither: text re-tokenized is not ids-level parity. Prompt reuse is read from
 * `usage.prompt_tokens_details.cached_tokens`, and asked off with llama.cpp's `cache_prompt: false`
 * (the field llama-server and our server take; OpenAI has no word for it). Generation and
 * speculation counts are read from llama-server's `timings`, which our server's answers carry too.
 */
export const OPENAI_DIALECT: Dialect = {
  name: "openai",
  offer(client: DialectClient): DialectOffer {
    type Answer = { choice: Choice; usage?: { prompt_tokens_details?: { cached_tokens?: unknown } }; timings?: GenerationTimings };
    const completionWithUsage = async (body: Record<string, unknown>): Promise<Answer> => {
      const answer = await client.json<{ choices?: Choice[]; usage?: Answer["usage"]; timings?: GenerationTimings }>("/v1/completions", { model: client.model, ...body });
      const choice = answer.choices?.[0];
      if (choice === undefined) throw new Error("/v1/completions answered without choices");
      return { choice, usage: answer.usage, timings: answer.timings };
    };
    const completion = async (body: Record<string, unknown>): Promise<Choice> => (await completionWithUsage(body)).choice;
    return {
      greedy: async (r) => idList((await completion({ prompt: r.promptIds, max_tokens: r.maxTokens, temperature: 0, ignore_eos: r.eosIds === undefined })).token_ids, "choices[0].token_ids"),
      speculativeGreedy: async (r) => {
        // The prompt cache off, so every answer is timed from a cold prompt, as llama-server's /completion is asked.
        const { choice, timings } = await completionWithUsage({ prompt: r.promptIds, max_tokens: r.maxTokens, temperature: 0, ignore_eos: r.eosIds === undefined, cache_prompt: false });
        return timedGreedy(idList(choice.token_ids, "choices[0].token_ids"), timings);
      },
      cachedGreedy: async (r) => {
        const { choice, usage } = await completionWithUsage({ prompt: r.promptIds, max_tokens: r.maxTokens, temperature: 0, ignore_eos: r.eosIds === undefined, cache_prompt: r.cachePrompt, ...(r.slot === undefined ? {} : { id_slot: r.slot }) });
        return { ids: idList(choice.token_ids, "choices[0].token_ids"), cachedTokens: reportedCount(usage?.prompt_tokens_details?.cached_tokens, "usage.prompt_tokens_details.cached_tokens"), promptMs: undefined };
      },
      cachedChat: async (r) => {
        const answer = await client.json<{ choices?: { message?: { content?: unknown } }[]; usage?: { prompt_tokens?: unknown; prompt_tokens_details?: { cached_tokens?: unknown } } }>("/v1/chat/completions", {
          model: client.model, messages: r.messages, max_tokens: r.maxTokens, temperature: 0, cache_prompt: r.cachePrompt,
        });
        const text = answer.choices?.[0]?.message?.content;
        if (typeof text !== "string") throw new Error("/v1/chat/completions answered without choices[0].message.content");
        return { text, promptTokens: reportedCount(answer.usage?.prompt_tokens, "usage.prompt_tokens"), cachedTokens: reportedCount(answer.usage?.prompt_tokens_details?.cached_tokens, "usage.prompt_tokens_details.cached_tokens") };
      },
      teacherForced: async (r) => {
        const choice = await completion({ prompt: [...r.promptIds, ...r.continuationIds], max_tokens: 0, echo: true, logprobs: r.k, temperature: 0 });
        const topIds = choice.logprobs?.top_token_ids;
        const topLogprobs = choice.logprobs?.top_token_logprobs;
        if (!Array.isArray(topIds) || !Array.isArray(topLogprobs)) throw new Error("echo with logprobs answered without logprobs.top_token_ids");
        // Entry i holds the distribution that predicted token i; the continuation starts at promptIds.length.
        return r.continuationIds.map((_, j): TopK => {
          const at = r.promptIds.length + j;
          const ids = idList(topIds[at], `logprobs.top_token_ids[${at}]`);
          const logprobs = topLogprobs[at];
          if (!Array.isArray(logprobs) || logprobs.length !== ids.length) throw new Error(`logprobs.top_token_logprobs[${at}] does not match its ids`);
          return sortedTopK(ids.map((id, i) => ({ id, logprob: logprobs[i] as number })), r.k);
        });
      },
    };
  },
};
