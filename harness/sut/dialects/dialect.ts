import type { HttpResponse } from "../http.js";
import type { CachedChatAnswer, CachedChatRequest, CachedGreedyAnswer, CachedGreedyRequest, GreedyRequest, SlotAction, TeacherForcedRequest, TokenId, TokenKind, TopK } from "../types.js";

/** How a dialect reaches the server: POSTs with the key, and the model id /v1/models listed. */
export interface DialectClient {
  readonly model: string;
  post(path: string, body: unknown): Promise<HttpResponse>;
  /** POST, and the parsed body of a 200 (anything else throws with the status and the start of the body). */
  json<T>(path: string, body: unknown): Promise<T>;
}

/** One request's worth of each capability, in one wire format. A dialect offers what its format can carry. */
export interface DialectOffer {
  readonly tokenize?: (text: string) => Promise<TokenId[]>;
  readonly detokenize?: (ids: readonly TokenId[]) => Promise<string>;
  readonly inspectTokens?: (ids: readonly TokenId[]) => Promise<TokenKind[]>;
  readonly greedy?: (request: GreedyRequest) => Promise<TokenId[]>;
  readonly teacherForced?: (request: TeacherForcedRequest) => Promise<TopK[]>;
  readonly cachedGreedy?: (request: CachedGreedyRequest) => Promise<CachedGreedyAnswer>;
  readonly cachedChat?: (request: CachedChatRequest) => Promise<CachedChatAnswer>;
  readonly slotAction?: (slot: number, action: SlotAction, name: string) => Promise<void>;
}

export type DialectCapability = keyof DialectOffer;

/**
 * A family of HTTP APIs (plain OpenAI, llama.cpp's server, vLLM's): how each capability is asked
 * and read in its wire format. A dialect does not know whether a server speaks it: probing does.
 */
export interface Dialect {
  readonly name: string;
  offer(client: DialectClient): DialectOffer;
}

/** An id-shaped value or a clear error: a wire field that is not a list of integers is the server's fault, named. */
export function idList(value: unknown, field: string): TokenId[] {
  if (!Array.isArray(value) || !value.every((id) => Number.isInteger(id))) throw new Error(`${field} is ${JSON.stringify(value)?.slice(0, 80) ?? "missing"}, not a list of token ids`);
  return value as TokenId[];
}

/** Top-k rows sorted by log-prob descending, ties lower id first (the order types.ts promises). */
export function sortedTopK(entries: readonly { id: TokenId; logprob: number }[], k: number): TopK {
  const sorted = [...entries].sort((a, b) => b.logprob - a.logprob || a.id - b.id).slice(0, k);
  return { ids: sorted.map((e) => e.id), logprobs: sorted.map((e) => e.logprob) };
}

/** A count a server reports (cached prompt tokens): a non-negative integer, absent, or the server's fault, named. */
export function reportedCount(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Number.isInteger(value) || (value as number) < 0) throw new Error(`${field} is ${JSON.stringify(value)?.slice(0, 40)}, not a token count`);
  return value as number;
}
