import { performance } from "node:perf_hooks";
import type { Token } from "node-llama-cpp";
import type { TokenId, TopK } from "../harness/sut/types.js";
import type { GeneratedToken } from "./generation.js";
import { rowFromProbabilities, rowLogSumExp, rowTopK, type LogitsRow } from "./logits-row.js";
import { sampleToken } from "./sampling.js";
import { isSamplerFault, sampleWithFault } from "./sampling-faults.js";
import { finishSlot, type EngineShared, type Slot } from "./slot.js";
import { scanStops } from "./stop-strings.js";

/**
 * A decode's output becoming the request's next token, whichever path decoded it (node-llama-cpp's,
 * stepBatch's, a speculative step's): the token drawn from the row (sampling.ts) or taken as
 * llama.cpp's argmax, its text released to the stream past any possible stop string, its log-probs
 * where asked, and the request ended at a stop, EOS, max_tokens or the slot's last cell.
 */

/** A generated token's own log-prob and its distribution's top-k: computed in native code (stepBatch), or from its row (rowDistribution). */
export interface TokenDistribution {
  readonly logprob: number;
  readonly top: TopK;
}

/** A token's log-prob in a row, and the row's top-k (k = 0: an empty one). */
function rowDistribution(row: LogitsRow, id: TokenId, k: number): TokenDistribution {
  const logSumExp = rowLogSumExp(row);
  return { logprob: row[id] - logSumExp, top: k === 0 ? { ids: [], logprobs: [] } : rowTopK(row, k, logSumExp) };
}

export interface NextTokenOutput {
  /** `confidence` is the ROW probe's answer: the logits row (the addon's logitsRow), never a number (no probe of ours asks for a confidence). */
  readonly next: { readonly token?: Token | null; readonly probabilities?: Map<Token, number>; readonly confidence?: Float32Array };
  readonly native?: TokenDistribution;
}

export function acceptToken(shared: EngineShared, slot: Slot, output: NextTokenOutput): void {
  const job = slot.job!;
  const { request } = job;
  if (request.signal.aborted) return finishSlot(shared, slot, "cancelled");
  const { probabilities, confidence } = output.next;
  const row = confidence ?? (probabilities === undefined ? undefined : rowFromProbabilities(probabilities));
  const fault = shared.fault;
  const id = row === undefined ? output.next.token
    : isSamplerFault(fault) && request.sampling.temperature > 0 ? sampleWithFault(row, request.sampling, job.random, fault) : sampleToken(row, request.sampling, job.random);
  if (id === undefined || id === null) throw new Error("llama.cpp sampled no token");
  job.ids.push(id);
  const piece = job.renderer!.push(id);
  const text = job.renderer!.rendered;
  const { stopAt, safeEnd } = scanStops(text, request.stop);
  // A row's log-probs only where the request asked for them: their normaliser is a pass over the vocabulary.
  const distribution = output.native ?? (row === undefined || !request.tokenLogprobs ? undefined : rowDistribution(row, id, request.logprobs));
  const token: GeneratedToken = {
    id,
    piece,
    text: text.slice(job.streamed, Math.max(job.streamed, safeEnd)),
    ...(distribution === undefined ? {} : { logprob: distribution.logprob }),
    ...(request.logprobs === 0 || distribution === undefined ? {} : { top: distribution.top }),
  };
  // Nothing reads the row after this: the addon fills it again for a later token.
  if (confidence !== undefined && shared.native.reached) shared.native.recycleRow(confidence);
  job.streamed = Math.max(job.streamed, safeEnd);
  if (job.firstTokenAt === undefined) {
    job.firstTokenAt = performance.now();
  }
  job.tokens.push(token);
  request.onToken?.(token);
  if (job.tokens.length === 1) shared.trace?.firstToken(job.traceId, job.firstTokenAt);
  const eos = !request.ignoreEos && id === shared.model.tokens.eos;
  if (eos || stopAt !== undefined) {
    job.stopAt = stopAt;
    return finishSlot(shared, slot, "stop");
  }
  // The token just sampled is evaluated next step: stop while it still has a cell.
  if (job.ids.length >= request.maxTokens || request.promptIds.length + job.ids.length >= shared.contextSize) finishSlot(shared, slot, "length");
}
