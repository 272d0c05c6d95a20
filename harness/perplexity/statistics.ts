import { kldOnOracleSupport } from "../accuracy/kld.js";
import { distribution, proportion, type Distribution } from "../stats/distribution.js";
import type { TokenId, TopK } from "../sut/types.js";

/** What the goldens keep of the base model at one scored position. */
export interface BasePosition {
  /** The base's top-K (its first id is the base's argmax). */
  readonly topK: TopK;
  /** The base's log-prob of the corpus's next token (kept even when the token is outside the top-K). */
  readonly nextLogprob: number;
}

/** One scored position of an arm against the base: llama-perplexity's per-token quantities. */
export interface PositionScore {
  /** −log p_arm(next). */
  readonly nll: number;
  /** −log p_base(next). */
  readonly nllBase: number;
  /** KL(base ‖ arm) on the base's top-K support (harness/accuracy/kld.ts: exact when the top-K holds all the mass, never above the full-vocabulary value). */
  readonly kld: number;
  /** Δp = p_arm(next) − p_base(next). */
  readonly deltaP: number;
  readonly sameTop: boolean;
}

/**
 * Scores one position. `observed` must hold the next token (the suite asks for the whole
 * distribution): undefined when it does not, so that a position cannot be scored by guessing.
 */
export function scorePosition(base: BasePosition, observed: TopK, next: TokenId): PositionScore | undefined {
  const index = observed.ids.indexOf(next);
  if (index < 0) return undefined;
  const logprob = observed.logprobs[index];
  return {
    nll: -logprob,
    nllBase: -base.nextLogprob,
    kld: kldOnOracleSupport(base.topK, observed).kld,
    deltaP: Math.exp(logprob) - Math.exp(base.nextLogprob),
    sameTop: observed.ids[0] === base.topK.ids[0],
  };
}

/** A value and its standard error (undefined for a single position). */
export interface Estimate {
  readonly value: number;
  readonly stderr: number | undefined;
}

/** The statistics llama-perplexity prints for a model against a base, with the same definitions. */
export interface CorpusStatistics {
  readonly positions: number;
  /** exp(mean nll), stderr = PPL × stderr(nll). */
  readonly ppl: Estimate;
  readonly pplBase: Estimate;
  /** mean(nll) − mean(nll_base), stderr = sqrt(s² + s_base² − 2 cov). */
  readonly lnPplRatio: Estimate;
  readonly kld: Distribution;
  readonly deltaP: Distribution;
  /** sqrt(mean Δp²), stderr = stderr(Δp²) / (2 RMS). */
  readonly rmsDeltaP: Estimate;
  readonly sameTop: { readonly p: number; readonly stderr: number | undefined };
}

/** exp of a mean with its stderr carried through (d exp(x)/dx = exp(x)). */
function exponentiated(values: Distribution): Estimate {
  const value = Math.exp(values.mean);
  return { value, stderr: values.stderr === undefined ? undefined : value * values.stderr };
}

/** Covariance of the two means: (E[ab] − E[a]E[b]) / (n − 1), as llama-perplexity takes it. */
function covarianceOfMeans(a: readonly number[], b: readonly number[]): number | undefined {
  const n = a.length;
  if (n < 2) return undefined;
  let sumA = 0, sumB = 0, sumAB = 0;
  for (let i = 0; i < n; i++) {
    sumA += a[i];
    sumB += b[i];
    sumAB += a[i] * b[i];
  }
  return (sumAB / n - (sumA / n) * (sumB / n)) / (n - 1);
}

/** The corpus statistics of an arm's scored positions (undefined when none was scored). */
export function corpusStatistics(scores: readonly PositionScore[]): CorpusStatistics | undefined {
  if (scores.length === 0) return undefined;
  const nll = scores.map((s) => s.nll);
  const nllBase = scores.map((s) => s.nllBase);
  const nllStats = distribution(nll)!;
  const nllBaseStats = distribution(nllBase)!;
  const covariance = covarianceOfMeans(nll, nllBase);
  const ratioStderr = nllStats.stderr === undefined || nllBaseStats.stderr === undefined || covariance === undefined
    ? undefined
    : Math.sqrt(Math.max(0, nllStats.stderr ** 2 + nllBaseStats.stderr ** 2 - 2 * covariance));
  const squared = distribution(scores.map((s) => s.deltaP ** 2))!;
  const rms = Math.sqrt(squared.mean);
  return {
    positions: scores.length,
    ppl: exponentiated(nllStats),
    pplBase: exponentiated(nllBaseStats),
    lnPplRatio: { value: nllStats.mean - nllBaseStats.mean, stderr: ratioStderr },
    kld: distribution(scores.map((s) => s.kld))!,
    deltaP: distribution(scores.map((s) => s.deltaP))!,
    rmsDeltaP: { value: rms, stderr: squared.stderr === undefined || rms === 0 ? undefined : squared.stderr / (2 * rms) },
    sameTop: proportion(scores.filter((s) => s.sameTop).length, scores.length),
  };
}
