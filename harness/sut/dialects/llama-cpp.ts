import { idList, reportedCount, sortedTopK, timedGreedy, type Dialect, type DialectClient, type DialectOffer, type GenerationTimings, type TimedGreedy } from "./dialect.js";
import type { GreedyRequest, TopK } from "../types.js";

interface ProbabilityRow {
  readonly top_logprobs?: { id: unknown; logprob: unknown }[];
}

interface CompletionAnswer {
  readonly tokens?: unknown;
  readonly completion_probabilities?: ProbabilityRow[];
  readonly timings?: GenerationTimings & { readonly cache_n?: unknown; readonly prompt_ms?: unknown };
}

/**
 * A greedy /completion request: the prompt cache off, so a rerun evaluates its prompt as the first
 * run did, not reusing cells another request left.
 */
function greedyCompletion(json: DialectClient["json"], r: GreedyRequest): Promise<CompletionAnswer> {
  return json<CompletionAnswer>("/completion", { prompt: r.promptIds, n_predict: r.maxTokens, ignore_eos: r.eosIds === undefined, temperature: 0, cache_prompt: false, return_tokens: true });
}

/** Greedy ids with the request's generation and speculation counts from `timings` (the greedy capability asks nothing of them: a server that leaves them out still serves ids). */
async function llamaServerGreedy(json: DialectClient["json"], r: GreedyRequest): Promise<TimedGreedy> {
  const answer = await greedyCompletion(json, r);
  return timedGreedy(idList(answer.tokens, "tokens"), answer.timings);
}

/** One row of `completion_probabilities` as a TopK (n_probs: the distribution before sampling). */
function topKRow(row: ProbabilityRow | undefined, k: number, at: number): TopK {
  const top = row?.top_logprobs;
  if (!Array.isArray(top)) throw new Error(`/completion with n_probs answered without completion_probabilities[${at}].top_logprobs`);
  return sortedTopK(top.map((entry, i) => {
    if (!Number.isInteger(entry.id) || typeof entry.logprob !== "number") throw new Error(`top_logprobs[${i}] is ${JSON.stringify(entry)}, not {id, logprob}`);
    return { id: entry.id as number, logprob: entry.logprob };
  }), k);
}

/**
 * llama.cpp's own server (tools/server): /tokenize and /detokenize, and /completion, which takes a
 * prompt of ids and answers with the generated ids (`return_tokens`) and, with `n_probs`, the
 * top-k of each next-token distribution before sampling. It has no prompt log-probs (`echo` is
 * refused), so teacher forcing asks for one token after each prefix of the continuation; the
 * server's prompt cache makes each of those a one-token decode. Greedy is greedyCompletion's.
 * Reuse suites set it themselves (`cachedGreedy`) and read what was reused from `timings.cache_n`;
 * slots are saved and restored through `/slots/N?action=…` (the server needs `--slot-save-path`).
 */
export const LLAMA_CPP_DIALECT: Dialect = {
  name: "llama.cpp",
  offer(client: DialectClient): DialectOffer {
    const complete = (body: Record<string, unknown>) => client.json<CompletionAnswer>("/completion", { temperature: 0, cache_prompt: true, return_tokens: true, ...body });
    const greedy = async (r: GreedyRequest) => idList((await greedyCompletion(client.json, r)).tokens, "tokens");
    return {
      // add_special: BOS included, and parse_special off: special-token text plain, as the SUT interface promises (llama.cpp servers default to the opposite of both).
      tokenize: async (text) => idList((await client.json<{ tokens?: unknown }>("/tokenize", { content: text, add_special: true, parse_special: false })).tokens, "tokens"),
      detokenize: async (ids) => {
        const { content } = await client.json<{ content?: unknown }>("/detokenize", { tokens: ids });
        if (typeof content !== "string") throw new Error("/detokenize answered without content");
        return content;
      },
      greedy,
      teacherForced: async (r) => {
        const rows: TopK[] = [];
        for (let j = 0; j < r.continuationIds.length; j++) {
          const answer = await complete({ prompt: [...r.promptIds, ...r.continuationIds.slice(0, j)], n_predict: 1, n_probs: r.k, post_sampling_probs: false });
          rows.push(topKRow(answer.completion_probabilities?.[0], r.k, 0));
        }
        return rows;
      },
      cachedGreedy: async (r) => {
        const answer = await complete({
          prompt: r.promptIds, n_predict: r.maxTokens, ignore_eos: r.eosIds === undefined, cache_prompt: r.cachePrompt,
          ...(r.slot === undefined ? {} : { id_slot: r.slot }), ...(r.topK === undefined ? {} : { n_probs: r.topK, post_sampling_probs: false }),
        });
        const ids = idList(answer.tokens, "tokens");
        const promptMs = answer.timings?.prompt_ms;
        return {
          ids,
          cachedTokens: reportedCount(answer.timings?.cache_n, "timings.cache_n"),
          promptMs: typeof promptMs === "number" && Number.isFinite(promptMs) ? promptMs : undefined,
          ...(r.topK === undefined ? {} : { topK: ids.map((_, j) => topKRow(answer.completion_probabilities?.[j], r.topK!, j)) }),
        };
      },
      slotAction: async (slot, action, name) => {
        await client.json(`/slots/${slot}?action=${action}`, { filename: name });
      },
      speculativeGreedy: (r) => llamaServerGreedy(client.json, r),
    };
  },
};
