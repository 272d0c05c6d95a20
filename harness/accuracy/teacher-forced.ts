import { distribution, proportion, type Distribution } from "../stats/distribution.js";
import type { TokenId, TopK } from "../sut/types.js";
import { kldOnOracleSupport } from "./kld.js";

/**
 * Teacher-forced accuracy of a SUT fed the oracle's greedy ids (docs/metrics.md).
 * top-1: SUT argmax equals the reference top-1; top-5: SUT argmax is in the reference top-5
 * (tt-metal's definitions). KLD, Δp and same-top follow llama-perplexity, except that KLD is
 * computed on the oracle's top-K support with the rest of the vocabulary bounded (kldOnOracleSupport):
 * never negative, never above the full-vocabulary KLD. Tokens the SUT left out of its own top-K
 * take the SUT's K-th log-prob.
 */
export interface TeacherForcedAccuracy {
  readonly positions: number;
  readonly top1: { readonly p: number; readonly stderr: number | undefined };
  readonly top5: { readonly p: number; readonly stderr: number | undefined };
  readonly sameTop: { readonly p: number; readonly stderr: number | undefined };
  readonly kldTopK: Distribution | undefined;
  /** KLD terms whose token was outside the SUT's top-K (its log-prob taken at the SUT's K-th). */
  readonly kldFlooredTerms: number;
  readonly deltaP: Distribution | undefined;
  readonly rmsDeltaP: number;
}

export interface OracleRow {
  readonly ids: readonly TokenId[];
  readonly logprobs: readonly number[];
}

export function teacherForcedAccuracy(
  nextIds: readonly (readonly TokenId[])[],
  oracle: readonly (readonly OracleRow[])[],
  sut: readonly (readonly TopK[])[],
): TeacherForcedAccuracy {
  let positions = 0;
  let top1 = 0;
  let top5 = 0;
  let floored = 0;
  const klds: number[] = [];
  const deltaPs: number[] = [];
  for (let p = 0; p < sut.length; p++) {
    for (let t = 0; t < sut[p].length; t++) {
      const reference = oracle[p][t];
      const observed = sut[p][t];
      const sutArgmax = observed.ids[0];
      positions++;
      if (sutArgmax === reference.ids[0]) top1++;
      if (reference.ids.slice(0, 5).includes(sutArgmax)) top5++;
      const sutFloor = observed.logprobs[observed.logprobs.length - 1];
      const sutLogprob = (id: TokenId): number => {
        const index = observed.ids.indexOf(id);
        return index >= 0 ? observed.logprobs[index] : sutFloor;
      };
      const position = kldOnOracleSupport(reference, observed);
      floored += position.floored;
      klds.push(position.kld);
      const next = nextIds[p][t];
      const baseIndex = reference.ids.indexOf(next);
      if (baseIndex >= 0) deltaPs.push(Math.exp(sutLogprob(next)) - Math.exp(reference.logprobs[baseIndex]));
    }
  }
  const rms = deltaPs.length === 0 ? NaN : Math.sqrt(deltaPs.reduce((s, d) => s + d * d, 0) / deltaPs.length);
  return {
    positions,
    top1: proportion(top1, positions),
    top5: proportion(top5, positions),
    sameTop: proportion(top1, positions),
    kldTopK: distribution(klds),
    kldFlooredTerms: floored,
    deltaP: distribution(deltaPs),
    rmsDeltaP: rms,
  };
}
