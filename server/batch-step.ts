import type { Token } from "node-llama-cpp";
import { greedyStepDistributions } from "../harness/sut/llamacpp-native-context.js";
import { readNextRankedRow } from "./faults.js";
import type { GenerationRequest } from "./generation.js";
import { acceptToken, type TokenDistribution } from "./next-token.js";
import { keepCheckpointAt, prefillStops, type PrefillStop, type ReachedNative } from "./prompt-cache.js";
import { isSamplerFault } from "./sampling-faults.js";
import { failSlot, liveSlots, type EngineShared, type Job, type Slot } from "./slot.js";
import { PieceRenderer } from "./token-text.js";

/**
 * The batch step, as llama-server's loop runs it: every generating slot's last token and every
 * prefilling slot's next prompt stretch (up to a prefill chunk, or a checkpoint) in one
 * llama_decode of our own, through our addon (native/llama-context) — no node-llama-cpp sampler.
 * A greedy request's token is the output's argmax, taken in native code; a sampled request's is
 * drawn from the output's logits row (kept by the step, server/sampling.ts draws), so sampled and
 * greedy requests share one decode and the prompt cache. The one path with a prompt cache.
 */

/**
 * A greedy step of at least this many tokens runs on a worker thread, so that requests arriving
 * meanwhile are read and queued for the next step: a few milliseconds of compute even on the tiny
 * fixtures. A shorter one stays on the JavaScript thread: the two thread wake-ups of a hop cost
 * more than they save there — on a loaded 2-core machine, with every prefill of 32 tokens off the
 * thread, output tok/s fell to about half of llama-server's (docs/performance.md).
 */
const OFF_THREAD_TOKENS = 256;

/** The step's asks for a sampled request's token: keep the output's whole logits row (stepRow) to draw from in JavaScript, or draw it in the step. */
const KEEP_ROW = -1;
const DRAW_HERE = -2;

/**
 * What the step asks of the output that becomes a request's token: a greedy request's top
 * log-probs (1 where it asked for its tokens' own only: greedy's token is the top-1); a sampled
 * request's token drawn in the step from llama.cpp's row, where `drawsInStep` (no copy of the
 * row, no hop back to JavaScript: on a 262k vocabulary the two copies and the second argmax were
 * most of what a sampled token cost beyond a greedy one); else, or where the row is read again
 * (its log-probs asked), the row kept for the draw in JavaScript.
 */
export function stepAsk(request: GenerationRequest, drawsInStep = false): number {
  if (request.sampling.temperature > 0) return drawsInStep && !request.tokenLogprobs ? DRAW_HERE : KEEP_ROW;
  return request.logprobs > 0 ? request.logprobs : request.tokenLogprobs ? 1 : 0;
}

/** A DRAW_HERE entry's five numbers for the addon (decodeGreedyTopK's draws): the request's sampling and its generator's next uniform number, taken now as the JavaScript draw would take it. */
function drawOf(job: Job): number[] {
  const { temperature, topK, topP, minP } = job.request.sampling;
  return [temperature, topK, topP, minP, job.random.uniform()];
}

/** A greedy request without log-probs: what a draft model may speculate (a drafted token has no distribution to report). */
export function isPlainGreedy(request: GenerationRequest): boolean {
  return stepAsk(request) === 0;
}

/** A request stepBatch decodes: any that generates and does not ask for its prompt's log-probs (those are scored through node-llama-cpp). */
export function decodesInBatchStep(request: GenerationRequest): boolean {
  return request.promptLogprobs === 0 && request.maxTokens > 0;
}

/** One slot's part of the step: the tokens it puts in the batch, from position `start`. */
interface Stretch {
  readonly slot: Slot;
  /** Its index in the batch (and in the decode's answers). */
  readonly index: number;
  readonly start: number;
  readonly piece: readonly number[];
  readonly stop: PrefillStop;
  readonly prefilling: boolean;
}

/** The decode's answer: each stretch's argmax (its drawn token where it asked DRAW_HERE), and its log-probs where its greedy request asked for them (a kept row is read with stepRow). */
interface StepAnswer {
  readonly decoded: Int32Array;
  /** What each stretch asked (stepAsk; 0 for a stretch whose output is no token). */
  readonly asks: Int32Array | undefined;
  readonly distributions: ((index: number) => TokenDistribution | undefined) | undefined;
}

/**
 * One step for the slots decoded here. A prompt longer than a chunk takes several steps, so requests
 * admitted meanwhile and the other slots' tokens do not wait for all of it. A failure fails these
 * requests only.
 */
export async function stepBatch(shared: EngineShared, slots: readonly Slot[], admitted: readonly Slot[]): Promise<void> {
  const live = liveSlots(shared, slots);
  const { native } = shared;
  if (live.length === 0 || !native.reached) return;
  for (const slot of live.filter((s) => admitted.includes(s))) {
    const job = slot.job!;
    // The uncached rest of an admitted prompt, split at its prefill stops (chunk edges, checkpoints).
    job.prefill = prefillStops(slot.cache.tokens.length, job.request.promptIds.length, shared.prefillPlan, shared.fault);
    job.renderer = new PieceRenderer(shared.model);
  }
  const stretches = live.map(stretchOf);
  let answer: StepAnswer;
  try {
    answer = await decodeStretches(shared, native, stretches);
  } catch (error) {
    for (const slot of live) failSlot(shared, slot, error);
    return;
  }
  // Prefilling slots are settled first, so a prompt that finished here streams its first token
  // ahead of the other slots' tokens: Node flushes each response's socket in the order of its first
  // write in this turn, and a loopback write took ~0.14 ms on the loaded 2-core box (docs/performance.md).
  for (const stretch of [...stretches.filter((e) => e.prefilling), ...stretches.filter((e) => !e.prefilling)]) settle(shared, native, stretch, answer);
}

/** A generating slot's stretch is its last sampled token; a prefilling slot's, its prompt up to the next stop. */
function stretchOf(slot: Slot, index: number): Stretch {
  const job = slot.job!;
  const start = slot.cache.tokens.length;
  const prefilling = job.prefill.length > 0;
  const stop = job.prefill[0] ?? { end: start + 1, checkpointAs: undefined, chunkEdge: false };
  const piece = prefilling ? job.request.promptIds.slice(start, stop.end) : [job.ids[job.ids.length - 1]];
  return { slot, index, start, piece, stop, prefilling };
}

/** The step's one llama_decode (on a worker thread when long), with top-k or a kept row only where a stretch's output becomes a token that asks for one. */
async function decodeStretches(shared: EngineShared, native: ReachedNative, stretches: readonly Stretch[]): Promise<StepAnswer> {
  const step = [
    Int32Array.from(stretches, (e) => e.slot.sequenceId),
    Int32Array.from(stretches, (e) => e.piece.length),
    Int32Array.from(stretches.flatMap((e) => e.piece)),
    Int32Array.from(stretches, (e) => e.start),
    shared.cacheSettings.prefillChunk,
  ] as const;
  const offThread = stretches.reduce((sum, e) => sum + e.piece.length, 0) >= OFF_THREAD_TOKENS;
  // Only an output that becomes a token (not a prompt stretch short of the prompt's end) is ranked or kept.
  // A FAKE sampler fault is planted in the JavaScript draw: those servers keep the row.
  const drawsInStep = native.drawsInStep && !isSamplerFault(shared.fault);
  const topK = Int32Array.from(stretches, (e) => (e.prefilling && e.slot.job!.prefill.length > 1 ? 0 : stepAsk(e.slot.job!.request, drawsInStep)));
  const draws = topK.includes(DRAW_HERE) ? Float64Array.from(stretches.flatMap((e, i) => (topK[i] === DRAW_HERE ? drawOf(e.slot.job!) : [0, 0, 0, 0, 0]))) : undefined;
  shared.trace?.decodeStarted(stretches, offThread);
  let answer: StepAnswer;
  if (topK.some((k) => k !== 0)) {
    const result = await native.decodeGreedyTopK(...step, topK, offThread, draws);
    const distributions = greedyStepDistributions(result, topK);
    answer = { decoded: result.next, asks: topK, distributions: shared.fault === "logprobs-other-row" ? readNextRankedRow(distributions, topK) : distributions };
  } else {
    answer = { decoded: offThread ? await native.decodeGreedyOffThread(...step) : native.decodeGreedy(...step), asks: undefined, distributions: undefined };
  }
  shared.trace?.phaseEnded("decode");
  return answer;
}

/** A stretch decoded: the slot's cache takes its tokens (and a checkpoint where its stop keeps one); a prompt's end or a decode gives a token. */
function settle(shared: EngineShared, native: ReachedNative, e: Stretch, answer: StepAnswer): void {
  const job = e.slot.job!;
  e.slot.cache.tokens.push(...e.piece);
  try {
    keepCheckpointAt(native, e.slot, e.stop, shared.stateKind);
    // FAULT: the next chunk is evaluated as if it began a new sequence (the recurrent conv and SSM state, and the earlier chunks' cells, are dropped).
    if (shared.fault === "chunk-drops-conv" && e.stop.chunkEdge) native.clearSequence(e.slot.sequenceId);
    if (e.prefilling) job.prefill.shift();
    // A stretch short of the prompt's end gives no token yet.
    if (e.prefilling && job.prefill.length > 0) return;
    const keptRow = answer.asks?.[e.index] === KEEP_ROW;
    acceptToken(shared, e.slot, keptRow ? { next: { confidence: native.stepRow(e.index) } } : { next: { token: answer.decoded[e.index] as Token }, native: answer.distributions?.(e.index) });
  } catch (error) {
    failSlot(shared, e.slot, error);
  }
}
