import { idList, sortedTopK, type Dialect, type DialectClient, type DialectOffer } from "./dialect.js";
import type { GreedyRequest, TokenId, TopK } from "../types.js";

interface CompletionAnswer {
  readonly tokens?: unknown;
  readonly completion_probabilities?: { readonly top_logprobs?: { id: unknown; logprob: unknown }[] }[];
  readonly timings?: { readonly predicted_n?: unknown; readonly predicted_ms?: unknown; readonly draft_n?: unknown; readonly draft_n_accepted?: unknown };
}

/** One greedy answer of llama-server with what its `timings` say of how it was generated. */
export interface LlamaServerGreedy {
  readonly ids: TokenId[];
  /** Tokens generated, and the milliseconds from the prompt's end to the last of them. */
  readonly predictedN: number;
  readonly predictedMs: number;
  /** Tokens drafted by speculation, and how many of them the target accepted (0 and 0 when it did not speculate: the server then leaves both out). */
  readonly draftN: number;
  readonly draftAccepted: number;
}

/** A count the server must report as a non-negative integer (absent counts as `absent`, when given). */
function countField(value: unknown, field: string, absent?: number): number {
  if (value === undefined && absent !== undefined) return absent;
  if (!Number.isInteger(value) || (value as number) < 0) throw new Error(`${field} is ${JSON.stringify(value) ?? "missing"}, not a count`);
  return value as number;
}

/**
 * A greedy /completion request: the prompt cache off, so a rerun evaluates its prompt as the first
 * run did, not reusing cells another request left.
 */
function greedyCompletion(json: DialectClient["json"], r: GreedyRequest): Promise<CompletionAnswer> {
  return json<CompletionAnswer>("/completion", { prompt: r.promptIds, n_predict: r.maxTokens, ignore_eos: r.eosIds === undefined, temperature: 0, cache_prompt: false, return_tokens: true });
}

/**
 * Greedy ids with the request's generation and speculation counts from `timings`, each held to
 * what it can be: as many generated as returned, no more accepted than drafted. (The greedy
 * capability asks nothing of `timings`: a server that leaves them out still serves ids.)
 */
export async function llamaServerGreedy(json: DialectClient["json"], r: GreedyRequest): Promise<LlamaServerGreedy> {
  const answer = await greedyCompletion(json, r);
  const ids = idList(answer.tokens, "tokens");
  const t = answer.timings ?? {};
  const predictedN = countField(t.predicted_n, "timings.predicted_n");
  if (predictedN !== ids.length) throw new Error(`timings.predicted_n is ${predictedN}, but ${ids.length} tokens came back`);
  if (typeof t.predicted_ms !== "number" || !(t.predicted_ms >= 0)) throw new Error(`timings.predicted_ms is ${JSON.stringify(t.predicted_ms) ?? "missing"}, not a duration`);
  const draftN = countField(t.draft_n, "timings.draft_n", 0);
  const draftAccepted = countField(t.draft_n_accepted, "timings.draft_n_accepted", 0);
  if (draftAccepted > draftN) throw new Error(`timings.draft_n_accepted ${draftAccepted} exceeds timings.draft_n ${draftN}`);
  return { ids, predictedN, predictedMs: t.predicted_ms, draftN, draftAccepted };
}

/**
 * llama.cpp's own server (tools/server): /tokenize and /detokenize, and /completion, which takes a
 * prompt of ids and answers with the generated ids (`return_tokens`) and, with `n_probs`, the
 * top-k of each next-token distribution before sampling. It has no prompt log-probs (`echo` is
 * refused), so teacher forcing asks for one token after each prefix of the continuation; the
 * server's prompt cache makes each of those a one-token decode. Greedy is greedyCompletion's.
 */
export const LLAMA_CPP_DIALECT: Dialect = {
  name: "llama.cpp",
  offer(client: DialectClient): DialectOffer {
    const complete = (body: Record<string, unknown>) => client.json<CompletionAnswer>("/completion", { temperature: 0, cache_prompt: true, return_tokens: true, ...body });
    const greedy = async (r: GreedyRequest) => idList((await greedyCompletion(client.json, r)).tokens, "tokens");
    return {
      // add_special: BOS included, as the SUT interface promises (llama-server leaves it out by default).
      tokenize: async (text) => idList((await client.json<{ tokens?: unknown }>("/tokenize", { content: text, add_special: true })).tokens, "tokens"),
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
          const top = answer.completion_probabilities?.[0]?.top_logprobs;
          if (!Array.isArray(top)) throw new Error("/completion with n_probs answered without completion_probabilities[0].top_logprobs");
          rows.push(sortedTopK(top.map((entry, i) => {
            if (!Number.isInteger(entry.id) || typeof entry.logprob !== "number") throw new Error(`top_logprobs[${i}] is ${JSON.stringify(entry)}, not {id, logprob}`);
            return { id: entry.id as number, logprob: entry.logprob };
          }), r.k));
        }
        return rows;
      },
    };
  },
};
