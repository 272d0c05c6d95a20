import { idList, sortedTopK, type Dialect, type DialectClient, type DialectOffer } from "./dialect.js";
import type { TokenId, TopK } from "../types.js";

/** `return_tokens_as_token_ids` spells every token "token_id:<id>" instead of its text. */
function tokenIdOf(spelled: unknown): TokenId {
  const match = typeof spelled === "string" ? /^token_id:(\d+)$/.exec(spelled) : null;
  if (match === null) throw new Error(`${JSON.stringify(spelled)} is not a "token_id:<id>" token (return_tokens_as_token_ids ignored?)`);
  return Number(match[1]);
}

type PromptLogprobEntry = { readonly logprob?: unknown; readonly rank?: unknown } | null;

/**
 * vLLM's OpenAI server: /tokenize and /detokenize (its field names, not llama.cpp's), greedy ids
 * through completion log-probs spelled as token ids (`return_tokens_as_token_ids`), and teacher
 * forcing through `prompt_logprobs`: for each prompt position a map id → {logprob, rank} holding
 * the top-k and, when it is not among them, the prompt token itself (rank > k, dropped here).
 */
export const VLLM_DIALECT: Dialect = {
  name: "vllm",
  offer(client: DialectClient): DialectOffer {
    return {
      tokenize: async (text) => idList((await client.json<{ tokens?: unknown }>("/tokenize", { model: client.model, prompt: text, add_special_tokens: true })).tokens, "tokens"),
      detokenize: async (ids) => {
        const { prompt } = await client.json<{ prompt?: unknown }>("/detokenize", { model: client.model, tokens: ids });
        if (typeof prompt !== "string") throw new Error("/detokenize answered without prompt");
        return prompt;
      },
      greedy: async (r) => {
        const answer = await client.json<{ choices?: { logprobs?: { tokens?: unknown[] } | null }[] }>("/v1/completions", {
          model: client.model, prompt: r.promptIds, max_tokens: r.maxTokens, temperature: 0, ignore_eos: r.eosIds === undefined, logprobs: 0, return_tokens_as_token_ids: true,
        });
        const tokens = answer.choices?.[0]?.logprobs?.tokens;
        if (!Array.isArray(tokens)) throw new Error("/v1/completions answered without logprobs.tokens");
        return tokens.map(tokenIdOf);
      },
      teacherForced: async (r) => {
        const answer = await client.json<{ choices?: { prompt_logprobs?: unknown }[] }>("/v1/completions", {
          model: client.model, prompt: [...r.promptIds, ...r.continuationIds], max_tokens: 1, temperature: 0, prompt_logprobs: r.k, return_tokens_as_token_ids: true,
        });
        const rows = answer.choices?.[0]?.prompt_logprobs;
        if (!Array.isArray(rows)) throw new Error("/v1/completions answered without choices[0].prompt_logprobs");
        return r.continuationIds.map((_, j): TopK => {
          const at = r.promptIds.length + j;
          const row = rows[at] as Record<string, PromptLogprobEntry> | null | undefined;
          if (row === null || row === undefined || typeof row !== "object") throw new Error(`prompt_logprobs[${at}] is missing`);
          const entries = Object.entries(row).filter(([, e]) => typeof e?.rank === "number" && e.rank <= r.k).map(([id, e]) => {
            if (!/^\d+$/.test(id) || typeof e?.logprob !== "number") throw new Error(`prompt_logprobs[${at}] holds ${JSON.stringify({ [id]: e })}, not id → {logprob, rank}`);
            return { id: Number(id), logprob: e.logprob };
          });
          return sortedTopK(entries, r.k);
        });
      },
    };
  },
};
