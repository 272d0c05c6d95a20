import { argmaxToken } from "../harness/sut/topk.js";
import type { TokenId } from "../harness/sut/types.js";

/** The largest seed a request may give: a JSON number past 2^53 - 1 is no longer exact, so two different seeds would arrive as one. */
export const MAX_SEED = Number.MAX_SAFE_INTEGER;

/**
 * The generator a request's draws come from: SFC32, whose 128-bit state takes a seed's low and
 * high 32 bits whole, so each seed from 0 to MAX_SEED starts a stream of its own (SeededRandom's
 * mulberry32 holds 32 bits: seeds 2^32 apart drew the same tokens). Its step is a bijection of the
 * state, so two seeds' streams never merge. Integer arithmetic only: the same seed gives the same
 * draws on every machine.
 */
export class SamplingRandom {
  private a: number;
  private b: number;
  private c = 0x9e3779b9;
  private d = 1;

  constructor(seed: number) {
    if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`a sampling seed is an integer from 0 to ${MAX_SEED}, not ${seed}`);
    this.a = seed >>> 0;
    this.b = Math.floor(seed / 2 ** 32) >>> 0;
    // Seeds that differ in a few bits start in nearly the same state: mix before the first draw (SFC's author runs 12 or more rounds).
    for (let i = 0; i < 15; i++) this.next();
  }

  /** Uniform in [0, 1), 32 bits of resolution. */
  uniform(): number {
    return this.next() / 4294967296;
  }

  private next(): number {
    const t0 = (this.a + this.b) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.d = (this.d + 1) >>> 0;
    const t = (t0 + this.d) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }
}

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
export function sampleToken(probabilities: ReadonlyMap<TokenId, number>, params: SamplingParams, random: SamplingRandom): TokenId {
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
