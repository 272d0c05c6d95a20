import { SeededRandom } from "../harness/fixtures/seeded-random.js";
import { argmaxToken } from "../harness/sut/topk.js";
import type { TokenId } from "../harness/sut/types.js";

/** Per-request sampling, OpenAI names: temperature 0 is greedy. The seed lives in the request's generator. */
export interface SamplingParams {
  readonly temperature: number;
  readonly topP: number;
  /** 0 keeps every token. */
  readonly topK: number;
}

/**
 * Draws the next token from the model's distribution (softmax of the logits): greedy at
 * temperature 0, else p^(1/T) restricted to top-k and the top-p nucleus, renormalised, and drawn
 * with the request's own seeded generator (same seed, same tokens).
 *
 * The weights are computed in log space relative to the most likely token, exp((log p - log p_max)/T):
 * p^(1/T) itself underflows to 0 for every token at a small T (0.0001 raises p to the 10,000th),
 * and a draw over all-zero weights fell on whichever token came first, id 0. This way the top token
 * weighs 1 at any temperature; a token whose weight is 0 (probability 0, or underflowed next to
 * the top) is no candidate, so it is never drawn.
 */
export function sampleToken(probabilities: ReadonlyMap<TokenId, number>, params: SamplingParams, random: SeededRandom): TokenId {
  if (params.temperature === 0) return argmaxToken(probabilities);
  let maxLog = -Infinity;
  for (const p of probabilities.values()) maxLog = Math.max(maxLog, Math.log(p));
  let candidates: [TokenId, number][] = [];
  for (const [id, p] of probabilities) {
    const weight = Math.exp((Math.log(p) - maxLog) / params.temperature);
    if (weight > 0) candidates.push([id, weight]);
  }
  if (candidates.length === 0) throw new Error("the distribution has no token of positive probability");
  candidates.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
  if (params.topK > 0) candidates = candidates.slice(0, params.topK);
  const total = candidates.reduce((sum, [, w]) => sum + w, 0);
  if (params.topP < 1) {
    let cumulative = 0;
    const kept: [TokenId, number][] = [];
    for (const candidate of candidates) {
      kept.push(candidate);
      cumulative += candidate[1] / total;
      if (cumulative >= params.topP) break;
    }
    candidates = kept;
  }
  const mass = candidates.reduce((sum, [, w]) => sum + w, 0);
  let draw = random.uniform() * mass;
  for (const [id, weight] of candidates) {
    draw -= weight;
    if (draw <= 0) return id;
  }
  return candidates[candidates.length - 1][0];
}
