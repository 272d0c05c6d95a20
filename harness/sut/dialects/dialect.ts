import type { CachedChatAnswer, CachedChatRequest, CachedGreedyAnswer, CachedGreedyRequest, GreedyRequest, SlotAction, TeacherForcedRequest, TokenId, TokenKind, TopK } from "../types.js";

/** A server's answer as a dialect reads it; what httpCall (../http-call.ts) returns. Declared here, so the dialects import nothing from the HTTP SUT that probes them. */
export interface HttpResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
}

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
  /** Greedy with the server's generation and speculation counts; offered only by a server whose probe answer drafted tokens. */
  readonly speculativeGreedy?: (request: GreedyRequest) => Promise<TimedGreedy>;
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

/** llama-server's `timings` of one generation (tools/server: server_slot_stats), as far as a greedy answer is read with them. */
export interface GenerationTimings {
  readonly predicted_n?: unknown;
  readonly predicted_ms?: unknown;
  readonly draft_n?: unknown;
  readonly draft_n_accepted?: unknown;
  /** Our server's: the output positions whose token is a kept draft. */
  readonly draft_accepted_positions?: unknown;
}

/** One greedy answer with what the server's `timings` say of how it was generated. */
export interface TimedGreedy {
  readonly ids: TokenId[];
  /** Tokens generated, and the milliseconds from the prompt's end to the last of them. */
  readonly predictedN: number;
  readonly predictedMs: number;
  /** Tokens drafted by speculation, and how many of them the target accepted (0 and 0 when it did not speculate: llama-server then leaves both out). */
  readonly draftN: number;
  readonly draftAccepted: number;
  /** Which output positions hold a kept draft, where the server says (ours does; llama-server does not). */
  readonly draftAcceptedPositions?: readonly number[];
}

/**
 * Greedy ids with the generation and speculation counts of their `timings`, each held to what it
 * can be: as many generated as returned, no more accepted than drafted, one position per kept draft.
 */
export function timedGreedy(ids: TokenId[], timings: GenerationTimings | undefined): TimedGreedy {
  const t = timings ?? {};
  const predictedN = reportedCount(t.predicted_n, "timings.predicted_n");
  if (predictedN !== ids.length) throw new Error(`timings.predicted_n is ${predictedN ?? "missing"}, but ${ids.length} tokens came back`);
  if (typeof t.predicted_ms !== "number" || !(t.predicted_ms >= 0)) throw new Error(`timings.predicted_ms is ${JSON.stringify(t.predicted_ms) ?? "missing"}, not a duration`);
  const draftN = reportedCount(t.draft_n, "timings.draft_n") ?? 0;
  const draftAccepted = reportedCount(t.draft_n_accepted, "timings.draft_n_accepted") ?? 0;
  if (draftAccepted > draftN) throw new Error(`timings.draft_n_accepted ${draftAccepted} exceeds timings.draft_n ${draftN}`);
  if (t.draft_accepted_positions === undefined) return { ids, predictedN, predictedMs: t.predicted_ms, draftN, draftAccepted };
  const positions = idList(t.draft_accepted_positions, "timings.draft_accepted_positions");
  if (positions.length !== draftAccepted || positions.some((p) => p < 0 || p >= ids.length)) {
    throw new Error(`timings.draft_accepted_positions holds ${positions.length} positions for ${draftAccepted} kept drafts of ${ids.length} tokens`);
  }
  return { ids, predictedN, predictedMs: t.predicted_ms, draftN, draftAccepted, draftAcceptedPositions: positions };
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
