import { performance } from "node:perf_hooks";
import type { LlamaContextSequence, LlamaModel } from "node-llama-cpp";
import type { TokenId } from "../harness/sut/types.js";
import type { NativeContext } from "../harness/sut/llamacpp-native-context.js";
import type { ServerFault } from "./faults.js";
import type { EngineObserver, FinishReason, GeneratedToken, GenerationRequest, GenerationResult, PromptLogprob } from "./generation.js";
import { exchangeWithHost, type HostPromptCache } from "./host-prompt-cache.js";
import { admitToCache, cachesRequest, type PrefillPlan, type PrefillStop, type PromptCacheSettings, type SlotCache, type StateKind } from "./prompt-cache.js";
import { SamplingRandom } from "./sampling.js";
import type { StepTracer } from "./step-trace.js";
import type { PieceRenderer } from "./token-text.js";

/**
 * A slot and the request it holds, from admission to its result: what each room of the engine
 * (the step loop, the two decode paths, speculation) reads and moves on. A slot is one llama.cpp
 * sequence; a job is one request's progress in it.
 */

/** What the engine's rooms share: the model and its context, the settings, and whom they report to. Built once by BatchEngine. */
export interface EngineShared {
  readonly model: LlamaModel;
  readonly native: NativeContext;
  readonly observer: EngineObserver;
  readonly cacheSettings: PromptCacheSettings;
  /** How the model's state can be cut back (undefined without the addon: no prompt cache then). */
  readonly stateKind: StateKind | undefined;
  /** How every prompt is cut into llama_decodes, cache or not (prompt-cache.ts, prefillPlan). */
  readonly prefillPlan: PrefillPlan;
  /** Slots' states beyond the slots (`--cache-ram`); undefined with the cache off or no room given. */
  readonly hostCache: HostPromptCache | undefined;
  /** Cells per slot: a sequence may not grow past it (llama.cpp would shift its context and go on silently). */
  readonly contextSize: number;
  /** A planted FAULT (tests only); see faults.ts. */
  readonly fault: ServerFault | undefined;
  /** `--trace-steps`: one line per step and per request event (step-trace.ts); absent: nothing is timed beyond what runs anyway. */
  readonly trace: StepTracer | undefined;
}

export interface Slot {
  readonly sequence: LlamaContextSequence;
  /** llama.cpp's sequence id (node-llama-cpp's, internal in its typings), for decodes outside it. */
  readonly sequenceId: number;
  /** Whether node-llama-cpp evaluated tokens in it since it was last cleared (its clearHistory is then needed). */
  throughNode: boolean;
  /** What the sequence holds for stepBatch (its length is where the next token goes); empty for node-llama-cpp's path. */
  readonly cache: SlotCache;
  job: Job | undefined;
}

export interface Job {
  readonly request: GenerationRequest;
  readonly random: SamplingRandom;
  readonly tokens: GeneratedToken[];
  readonly ids: TokenId[];
  readonly started: number;
  /** Built at admission (it detokenizes the prompt's tail for context). */
  renderer: PieceRenderer | undefined;
  /** Length of the rendered text already released to onToken. */
  streamed: number;
  stopAt: number | undefined;
  firstTokenAt: number | undefined;
  promptLogprobs: PromptLogprob[] | undefined;
  /** Reported as usage's cached tokens. */
  cachedTokens: number;
  drafted: number;
  accepted: number;
  readonly acceptedDraftPositions: number[];
  /** stepBatch's prefill stops of the prompt not decoded yet (one a step); empty once its first token is out. */
  prefill: PrefillStop[];
  resolve: (result: GenerationResult) => void;
  reject: (error: unknown) => void;
  /** Its id in the step trace (0 without one). */
  readonly traceId: number;
}

/** A queued request's job, nothing generated yet; its draws come from `seed`. */
export function newJob(request: GenerationRequest, seed: number, traceId: number, resolve: Job["resolve"], reject: Job["reject"]): Job {
  return {
    request, random: new SamplingRandom(seed), tokens: [], ids: [], started: performance.now(), renderer: undefined, streamed: 0, stopAt: undefined, firstTokenAt: undefined,
    promptLogprobs: undefined, cachedTokens: 0, drafted: 0, accepted: 0, acceptedDraftPositions: [], prefill: [], resolve, reject, traceId,
  };
}

/** The result of a request cancelled while it waited in the queue: nothing admitted, nothing generated. */
export const CANCELLED_IN_QUEUE: GenerationResult = {
  tokens: [], text: "", unstreamedText: "", finishReason: "cancelled", ttftSeconds: undefined, cachedTokens: 0, generatingMs: 0, drafted: 0, accepted: 0, acceptedDraftPositions: [],
};

/** The slots whose requests are still wanted; the others end here as cancelled, before a step spends compute on them. */
export function liveSlots(shared: EngineShared, slots: readonly Slot[]): Slot[] {
  return slots.filter((slot) => {
    if (!slot.job!.request.signal.aborted) return true;
    finishSlot(shared, slot, "cancelled");
    return false;
  });
}

/** Ends the slot's request with `reason` and frees the slot; its sequence keeps what it holds for the prompt cache. */
export function finishSlot(shared: EngineShared, slot: Slot, reason: FinishReason): void {
  const job = slot.job!;
  slot.job = undefined;
  const rendered = job.renderer?.finish() ?? "";
  const text = job.stopAt === undefined ? rendered : rendered.slice(0, job.stopAt);
  const ttftSeconds = job.firstTokenAt === undefined ? undefined : (job.firstTokenAt - job.started) / 1000;
  shared.observer.finished(reason, ttftSeconds, job.tokens.length);
  const generatingMs = job.firstTokenAt === undefined ? 0 : performance.now() - job.firstTokenAt;
  job.resolve({
    tokens: job.tokens, text, unstreamedText: text.slice(job.streamed), finishReason: reason, promptLogprobs: job.promptLogprobs, ttftSeconds, cachedTokens: job.cachedTokens,
    generatingMs, drafted: job.drafted, accepted: job.accepted, acceptedDraftPositions: job.acceptedDraftPositions,
  });
}

/** A failing slot fails its own request only; the others keep going. */
export function failSlot(shared: EngineShared, slot: Slot, error: unknown): void {
  const job = slot.job;
  slot.job = undefined;
  // What the sequence holds after a failed step is unknown: the next request starts cold.
  slot.cache.forget();
  if (job !== undefined) shared.observer.errored();
  job?.reject(error);
}

/** A reused slot must start from nothing: for hybrid and recurrent models this also resets the recurrent and conv state (node-llama-cpp drops the whole sequence when its first cell goes). */
export async function clearSlot(shared: EngineShared, slot: Slot): Promise<void> {
  const { native, fault } = shared;
  shared.observer.prompt(slot.job!.request.promptIds.length, 0, slot.job!.request.promptIds.length);
  if (fault === "skip-slot-clear") return;
  // The conversation the slot held outlives this request in the host cache.
  if (native.reached && shared.hostCache !== undefined && shared.stateKind !== undefined) exchangeWithHost(native, slot, undefined, shared.stateKind, shared.hostCache, fault);
  // node-llama-cpp erases only the tokens it evaluated itself; stepBatch's are ours to erase.
  if (slot.throughNode || !native.reached) await slot.sequence.clearHistory();
  slot.throughNode = false;
  slot.cache.forget();
  if (native.reached) native.clearSequence(slot.sequenceId);
}

/**
 * A plain greedy request keeps what its slot's sequence holds of the longest prefix it shares
 * with the prompt (prompt-cache.ts says when that is valid), so stepBatch prefills only the rest.
 */
export async function reuseSlot(shared: EngineShared, slot: Slot, others: readonly Slot[]): Promise<void> {
  const job = slot.job!;
  const { native, stateKind } = shared;
  // node-llama-cpp's own record of the sequence would disagree with what stepBatch puts in it.
  if (slot.throughNode) {
    await slot.sequence.clearHistory();
    slot.throughNode = false;
  }
  if (!native.reached || stateKind === undefined) throw new Error("the prompt cache needs the llama-context addon");
  if (shared.hostCache !== undefined) exchangeWithHost(native, slot, cachesRequest(shared.cacheSettings, job.request) ? job.request.promptIds : undefined, stateKind, shared.hostCache, shared.fault);
  job.cachedTokens = admitToCache(native, slot, others, job.request, shared.cacheSettings, stateKind, shared.fault);
  // stepBatch prefills the prompt from where the slot's cache ends.
  shared.observer.prompt(job.request.promptIds.length, job.cachedTokens, job.request.promptIds.length - slot.cache.tokens.length);
}
