/**
 * A server's sampler convention: in which order temperature, top_k, top_p and min_p act on the
 * model's next-token distribution, and so which distribution a request's draws must follow. Two
 * are in use, and they differ wherever the temperature is not 1 and a cut is active:
 *
 * - "openai" (OpenAI's API as vLLM and our server serve it): the logits are divided by the
 *   temperature first; top_k keeps the k most likely, min_p those whose tempered probability is at
 *   least min_p times the tempered maximum, and top_p the fewest most likely of those whose
 *   tempered, renormalised mass reaches top_p; the draw is from the survivors' tempered
 *   probabilities.
 * - "llama.cpp" (llama.cpp's default sampler chain, common/common.h: penalties, DRY, top-n-sigma,
 *   top_k, typical_p, top_p, min_p, XTC, temperature, then the draw): top_k, top_p and min_p all
 *   act on the raw distribution (top_p on the softmax of top_k's survivors, min_p relative to the
 *   raw maximum), and the temperature last, on the survivors alone. The samplers this module does
 *   not model (penalties, DRY, typical_p, XTC, top-n-sigma) are off at their neutral values, which
 *   a suite's requests must send.
 *
 * Both keep the token that carries the running sum to top_p or past it (llama.cpp's
 * `cum_sum >= p`), and order equal values lower id first.
 */

export const SAMPLER_CONVENTIONS = ["openai", "llama.cpp"] as const;
export type SamplerConvention = (typeof SAMPLER_CONVENTIONS)[number];

/** One request's sampling parameters, with their neutral values: top_k 0, top_p 1 and min_p 0 cut nothing. */
export interface SamplingSetting {
  readonly temperature: number;
  readonly top_k: number;
  readonly top_p: number;
  readonly min_p: number;
}

export interface ExpectedDistribution {
  /** Probability of each token id (0 outside the survivors), summing to 1. */
  readonly probabilities: Float64Array;
  /** Tokens that survive the cuts. */
  readonly support: number;
  /**
   * Why the survivors are not settled by the oracle's numbers: a cut falls so close to a token
   * (within CUT_MARGIN) that a SUT's logits, which differ from the oracle's in their last digits,
   * may honestly keep it or drop it. Absent: every cut is clear of every token.
   */
  readonly unsettled?: string;
}

/**
 * How close to a cut a token may sit before the survivors are unsettled: in nats for top_k and
 * min_p (logits of the same model on two builds differ by about 1e-5), and as probability mass for
 * top_p (llama.cpp sums top_p's mass in float32).
 */
export const CUT_MARGIN = 1e-4;

/** Ids by falling log-prob, equal values lower id first. */
function byFallingValue(values: ArrayLike<number>, ids: readonly number[]): number[] {
  return [...ids].sort((a, b) => values[b] - values[a] || a - b);
}

/** The ids whose value is finite (a log-prob of -Infinity is no candidate for either convention). */
function candidates(logprobs: ArrayLike<number>): number[] {
  const ids: number[] = [];
  for (let id = 0; id < logprobs.length; id++) if (logprobs[id] > -Infinity) ids.push(id);
  return ids;
}

interface Cut {
  readonly kept: number[];
  readonly unsettled?: string;
}

/** top_k on `ranked` (by falling value): unsettled where the k-th and the (k+1)-th are nearly tied. */
function topK(values: ArrayLike<number>, ranked: number[], k: number): Cut {
  if (k <= 0 || k >= ranked.length) return { kept: ranked };
  const gap = values[ranked[k - 1]] - values[ranked[k]];
  return { kept: ranked.slice(0, k), ...(gap < CUT_MARGIN ? { unsettled: `top_k ${k}: the ${k}th and ${k + 1}th tokens are ${gap.toExponential(2)} apart` } : {}) };
}

/** min_p on `ranked`: those within ln(min_p) of the first; unsettled where one sits on the cut. */
function minP(values: ArrayLike<number>, ranked: number[], p: number): Cut {
  if (p <= 0 || ranked.length === 0) return { kept: ranked };
  const floor = values[ranked[0]] + Math.log(p);
  const near = ranked.find((id) => Math.abs(values[id] - floor) < CUT_MARGIN);
  return { kept: ranked.filter((id) => values[id] >= floor), ...(near === undefined ? {} : { unsettled: `min_p ${p}: token ${near} sits on the cut` }) };
}

/** top_p on `ranked`, its values' softmax over `ranked` alone: unsettled where the running sum passes top_p within CUT_MARGIN of a token's edge. */
function topP(values: ArrayLike<number>, ranked: number[], p: number): Cut {
  if (p >= 1 || ranked.length === 0) return { kept: ranked };
  const probabilities = softmax(values, ranked);
  let sum = 0;
  for (let i = 0; i < ranked.length; i++) {
    const before = sum;
    sum += probabilities[i];
    if (sum >= p) {
      const unsettled = p - before < CUT_MARGIN || sum - p < CUT_MARGIN ? `top_p ${p}: the running sum reaches ${sum.toFixed(6)} at token ${ranked[i]}, within ${CUT_MARGIN} of the cut` : undefined;
      return { kept: ranked.slice(0, i + 1), ...(unsettled === undefined ? {} : { unsettled }) };
    }
  }
  return { kept: ranked };
}

/** Softmax of `values` over `ids`, in the order of `ids`, from the largest (no overflow at any scale). */
function softmax(values: ArrayLike<number>, ids: readonly number[]): number[] {
  let top = -Infinity;
  for (const id of ids) top = Math.max(top, values[id]);
  const weights = ids.map((id) => Math.exp(values[id] - top));
  const total = weights.reduce((a, b) => a + b, 0);
  return weights.map((w) => w / total);
}

/** The logits divided by the temperature (log-probs shift by a constant, which no cut or softmax sees). */
function tempered(logprobs: ArrayLike<number>, temperature: number): Float64Array {
  return Float64Array.from(logprobs as ArrayLike<number>, (l) => l / temperature);
}

/**
 * The distribution a request with `setting` draws from under `convention`, from the oracle's
 * full next-token log-probs (one per vocabulary id). Temperature 0 is greedy: all mass on the
 * first most likely token.
 */
export function expectedDistribution(logprobs: ArrayLike<number>, setting: SamplingSetting, convention: SamplerConvention): ExpectedDistribution {
  if (!(setting.temperature >= 0)) throw new RangeError(`temperature ${setting.temperature}`);
  const ids = candidates(logprobs);
  if (ids.length === 0) throw new RangeError("the distribution has no token of finite log-prob");
  if (setting.temperature === 0) return settle(logprobs.length, [byFallingValue(logprobs, ids)[0]], [1], []);
  const cuts: Cut[] = [];
  // Each convention's cuts act on its own values: tempered (openai) or raw (llama.cpp).
  const values = convention === "openai" ? tempered(logprobs, setting.temperature) : Float64Array.from(logprobs as ArrayLike<number>);
  let kept = byFallingValue(values, ids);
  const apply = (cut: Cut) => { cuts.push(cut); kept = cut.kept; };
  apply(topK(values, kept, setting.top_k));
  if (convention === "openai") {
    apply(minP(values, kept, setting.min_p));
    apply(topP(values, kept, setting.top_p));
  } else {
    apply(topP(values, kept, setting.top_p));
    apply(minP(values, kept, setting.min_p));
  }
  const drawn = softmax(tempered(logprobs, setting.temperature), kept);
  return settle(logprobs.length, kept, drawn, cuts);
}

function settle(size: number, kept: readonly number[], probabilities: readonly number[], cuts: readonly Cut[]): ExpectedDistribution {
  const out = new Float64Array(size);
  kept.forEach((id, i) => { out[id] = probabilities[i]; });
  const unsettled = cuts.map((cut) => cut.unsettled).filter((reason) => reason !== undefined);
  return { probabilities: out, support: kept.length, ...(unsettled.length === 0 ? {} : { unsettled: unsettled.join("; ") }) };
}

/** A setting as a request's parameters name it, for verdict details and reproduce lines. */
export function describeSetting(setting: SamplingSetting): string {
  return `temperature ${setting.temperature}, top_k ${setting.top_k}, top_p ${setting.top_p}, min_p ${setting.min_p}`;
}

/**
 * The k from 2 to `maxK` whose cut falls in the narrowest gap between neighbouring log-probs that
 * is still settled (at least CUT_MARGIN), among the cuts whose k-th token has at least
 * `minProbability`: the top_k setting where a sampler that ranks imprecisely (rounded logits,
 * ties ordered at random) keeps the wrong token most often, where an honest one still has one
 * right answer, and where the token at stake is drawn often enough to show it.
 */
export function narrowestTopK(logprobs: ArrayLike<number>, maxK: number, minProbability = 0.01): number {
  const ranked = byFallingValue(logprobs, candidates(logprobs));
  let best = 2;
  let narrowest = Infinity;
  for (let k = 2; k <= Math.min(maxK, ranked.length - 1); k++) {
    if (Math.exp(logprobs[ranked[k - 1]]) < minProbability) break;
    const gap = logprobs[ranked[k - 1]] - logprobs[ranked[k]];
    if (gap >= CUT_MARGIN && gap < narrowest) {
      narrowest = gap;
      best = k;
    }
  }
  return best;
}
