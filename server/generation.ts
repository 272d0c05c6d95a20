import type { TokenId, TopK } from "../harness/sut/types.js";
import type { SamplingParams } from "./sampling.js";

/**
 * What the batching engine promises its callers (the HTTP routes, the metrics): a request in, its
 * tokens and result out, and the events it reports. Kept apart from the engine so that a reader of
 * a response or of /metrics needs none of the scheduling.
 */

export type FinishReason = "stop" | "length" | "cancelled";

export interface GenerationRequest {
  readonly promptIds: readonly TokenId[];
  readonly maxTokens: number;
  readonly sampling: SamplingParams;
  /** Same seed, same tokens; absent: a random seed. */
  readonly seed?: number;
  readonly stop: readonly string[];
  readonly ignoreEos: boolean;
  /** false: evaluate the whole prompt, reusing nothing the slot holds (llama-server's `cache_prompt: false`); absent: the server's setting. */
  readonly cachePrompt?: boolean;
  /** Whether each generated token carries its own log-prob. */
  readonly tokenLogprobs: boolean;
  /** Top-k log-probs per generated token (0: none). */
  readonly logprobs: number;
  /** Log-probs for every prompt position after the first, with this many top-k (0: none): echo, teacher forcing over HTTP. */
  readonly promptLogprobs: number;
  readonly signal: AbortSignal;
  /** Called for every generated token as it is produced (streaming). */
  readonly onToken?: (token: GeneratedToken) => void;
  /** The HTTP request's id in the step trace (`--trace-steps`), which its submit line names. */
  readonly traceRequest?: number;
}

export interface GeneratedToken {
  readonly id: TokenId;
  /** The text this token adds to the output in context (pieces concatenate to the full output). */
  readonly piece: string;
  /**
   * Text this token releases to a stream: empty until a multi-byte character completes, and text
   * that could begin a stop string is held back until it cannot (see GenerationResult.unstreamedText).
   */
  readonly text: string;
  /** Present when the request asked for log-probs (greedy without them never builds a distribution). */
  readonly logprob?: number;
  readonly top?: TopK;
}

/** A prompt position's log-prob of the token actually there, and its top-k. */
export interface PromptLogprob {
  readonly logprob: number;
  readonly top: TopK;
}

export interface GenerationResult {
  readonly tokens: readonly GeneratedToken[];
  /** The output text, cut before the first stop string. */
  readonly text: string;
  /** The tail of `text` no token released to the stream (held back as a possible stop string when the request ended). */
  readonly unstreamedText: string;
  readonly finishReason: FinishReason;
  /** Positions 1..n-1 of the prompt, when promptLogprobs > 0. */
  readonly promptLogprobs?: readonly PromptLogprob[];
  readonly ttftSeconds: number | undefined;
  /** Prompt tokens not evaluated because the slot's cache held them (usage.prompt_tokens_details.cached_tokens). */
  readonly cachedTokens: number;
  /** Milliseconds from the first generated token to the last (llama-server's timings.predicted_ms). */
  readonly generatingMs: number;
  /** Tokens a draft model proposed for this request, and how many the target kept (0 and 0 without speculation). */
  readonly drafted: number;
  readonly accepted: number;
  /** Output positions whose token is a kept draft (the rest are the target's own). */
  readonly acceptedDraftPositions: readonly number[];
}

/** Thrown by submit when the in-flight cap is reached (the HTTP layer answers 429). */
export class EngineFullError extends Error {}
/** Thrown by submit while draining (503). */
export class EngineDrainingError extends Error {}

export interface EngineObserver {
  readonly submitted: () => void;
  readonly rejected: () => void;
  /** A submitted request the engine failed: with finished, every submitted request is counted once. */
  readonly errored: () => void;
  readonly finished: (reason: FinishReason, ttftSeconds: number | undefined, generated: number) => void;
  /** A prompt admitted to a slot: its length, the tokens reported cached, and the tokens it will evaluate. */
  readonly prompt: (tokens: number, cached: number, evaluated: number) => void;
  readonly step: (seconds: number, activeSlots: number, queueDepth: number) => void;
  /** A speculative step of one request: tokens drafted and kept. */
  readonly speculated: (drafted: number, accepted: number) => void;
}
