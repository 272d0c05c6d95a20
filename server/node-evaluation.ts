import type { Token } from "node-llama-cpp";
import { topKFromProbabilities } from "../harness/sut/topk.js";
import { teacherForceInEmptySequence } from "../harness/sut/llamacpp-native-context.js";
import type { GenerationRequest } from "./generation.js";
import { acceptToken, type NextTokenOutput } from "./next-token.js";
import { finishSlot, type EngineShared, type Slot } from "./slot.js";
import { PieceRenderer } from "./token-text.js";

/**
 * The requests stepBatch does not decode (echoed prompts' log-probs, the FAKE uncleared slot, and every
 * request without the addon), evaluated through node-llama-cpp's controlledEvaluate: the prompt in
 * prefill chunks, then one token a step. The engine awaits every slot's call together, so they
 * share one llama_decode (node-llama-cpp batches the calls of one tick).
 */

/** The whole next-token distribution as node-llama-cpp gives it (a Map of the vocabulary): where the addon does not reach the context, for sampling and for log-probs. */
const PROBE = { generateNext: { probabilities: true } } as const;
/**
 * The whole next-token distribution as the output's logits row (a Float32Array): where the addon
 * reaches the context, for sampling and for log-probs. node-llama-cpp has no such probe: a
 * confidence-only one is answered by sampling-order.ts with the row, in the `confidence` field
 * that node-llama-cpp passes through untouched. No softmax, no Map of the vocabulary.
 */
const ROW = { generateNext: { confidence: true } } as const;
/**
 * Greedy without log-probs: llama.cpp's own argmax over the logits (node-llama-cpp's sampler at
 * temperature 0 is its greedy sampler alone). No distribution crosses into JavaScript, which was
 * most of a decode step's cost (docs/performance.md).
 */
const GREEDY = { generateNext: { token: true } } as const;
type Probe = typeof PROBE | typeof ROW | typeof GREEDY;

/** GREEDY is the only token-only probe: sampling-order.ts takes its argmax without a sampler. ROW needs the addon (`rows`). */
function probeFor(request: GenerationRequest, rows: boolean): Probe {
  return request.sampling.temperature === 0 && !request.tokenLogprobs && request.logprobs === 0 ? GREEDY : rows ? ROW : PROBE;
}

/**
 * An echoed prompt's own log-probs (promptLogprobs > 0), from the addon's top-k in native code:
 * node-llama-cpp would hand over each position's whole vocabulary as a Map, which at a 152k
 * vocabulary costs far more than the forward pass. The prompt is decoded here into the cleared
 * sequence and cleared again, so node-llama-cpp then prefills it as if for the first time (twice
 * the forward pass, none of the Maps). Before any node-llama-cpp evaluation of the step starts.
 */
export function scorePromptNatively(shared: EngineShared, slot: Slot): void {
  const job = slot.job!;
  const { native, fault } = shared;
  const k = job.request.promptLogprobs;
  // The FAKE uncleared slot must keep its stale cells: decoding over them here would hide the fault.
  if (k === 0 || !native.reached || fault === "skip-slot-clear") return;
  const { rows, next } = teacherForceInEmptySequence(native, slot.sequenceId, job.request.promptIds, 0, k);
  // FAULT echo-one-late: each position reads the row after its own (the last keeps its own).
  const row = (i: number) => (fault === "echo-one-late" ? Math.min(i + 1, rows.length - 2) : i);
  job.promptLogprobs = rows.slice(0, -1).map((_, i) => ({ logprob: next[row(i)], top: rows[row(i)] }));
}

/** An admitted prompt through node-llama-cpp, whole (in prefill chunks), and its first token. */
export async function prefillThroughNode(shared: EngineShared, slot: Slot): Promise<void> {
  const job = slot.job!;
  const { request } = job;
  const prompt = request.promptIds as Token[];
  const chunkSize = shared.cacheSettings.prefillChunk;
  // Without the addon, node-llama-cpp's distributions at every position.
  const withPromptLogprobs = request.promptLogprobs > 0 && job.promptLogprobs === undefined;
  const last = prompt.length - 1;
  const input = prompt.map((id, i) => (i === last ? ([id, probeFor(request, shared.native.reached)] as [Token, Probe]) : withPromptLogprobs ? ([id, PROBE] as [Token, Probe]) : id));
  // The prompt in prefill chunks, one evaluation each. controlledEvaluate answers a sparse array,
  // set only where an input asked for an output (and only as long as its last such index), so a
  // chunk's outputs are placed by their index in the prompt: appended, a chunk that asked for
  // none added nothing and the last token's output landed short of `last`.
  const output: (NextTokenOutput | undefined)[] = [];
  for (let start = 0; start < input.length; start += chunkSize) {
    const chunk = await slot.sequence.controlledEvaluate(input.slice(start, start + chunkSize)) as (NextTokenOutput | undefined)[];
    chunk.forEach((item, i) => { output[start + i] = item; });
  }
  if (withPromptLogprobs) {
    job.promptLogprobs = prompt.slice(1).map((id, i) => {
      const probabilities = output[i]!.next.probabilities!;
      return { logprob: Math.log(probabilities.get(id) ?? 0), top: topKFromProbabilities(probabilities, request.promptLogprobs) };
    });
  }
  job.renderer = new PieceRenderer(shared.model);
  if (request.maxTokens === 0) return finishSlot(shared, slot, "length");
  acceptToken(shared, slot, output[last]!);
}

/** One generated token through node-llama-cpp: the last one evaluated, the next one drawn. */
export async function decodeThroughNode(shared: EngineShared, slot: Slot): Promise<void> {
  const job = slot.job!;
  if (job.request.signal.aborted) return finishSlot(shared, slot, "cancelled");
  const output = await slot.sequence.controlledEvaluate([[job.ids[job.ids.length - 1] as Token, probeFor(job.request, shared.native.reached)]]) as (NextTokenOutput | undefined)[];
  acceptToken(shared, slot, output[0]!);
}
