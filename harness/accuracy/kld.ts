import type { TopK } from "../sut/types.js";

/** The KL divergence of the SUT from the oracle at one position, and how many of its terms used a bounded SUT log-prob. */
export interface PositionKld {
  readonly kld: number;
  readonly floored: number;
}

/**
 * Below this a KLD mean says "the same distribution": log-probs of one model move by up to 2e-5 nats
 * between CPU instruction-set variants (docs/metrics.md), and a shift d costs about p·d²/2 per term,
 * 2e-10 at most; five times that is still rounding, not a change.
 */
export const KLD_RESOLUTION_NATS = 1e-9;

/**
 * One term of the divergence: p (log p − log q) − p + q, written as p · (e^(−d) − 1 + d) with
 * d = log p − log q so that a tiny d loses no digits. x ln(x/y) − x + y ≥ 0 for all positive x, y:
 * every term is non-negative, so the sum can never go below zero by rounding either (the clamp only
 * guards against a last-ulp error of expm1).
 */
function term(logP: number, logQ: number): number {
  const d = logP - logQ;
  return Math.max(0, Math.exp(logP) * (Math.expm1(-d) + d));
}

/**
 * The KL divergence KL(oracle ‖ SUT) at one position, on the oracle's top-K support S with the mass
 * outside it bounded (docs/metrics.md, "KLD"):
 *
 *   Σ_{i∈S} [ p_i ln(p_i / q_i) − p_i + q_i ]
 *
 * The full-vocabulary KLD that `llama-perplexity --kl-divergence` prints is
 * Σ_S p ln(p/q) + Σ_{rest} p ln(p/q), and its tail is at least P_rest ln(P_rest/Q_rest) ≥ P_rest − Q_rest
 * = Σ_S q − Σ_S p (log-sum inequality, then x ln(x/y) ≥ x − y). So this value lies between 0 and the
 * full-vocabulary KLD, and is exact when S holds all the mass. Unlike renormalising both
 * distributions over S, it still sees a SUT that moves mass off the support.
 *
 * A token of S the SUT left out of its own top-K takes the SUT's K-th log-prob (the most it can
 * be); such terms are counted in `floored`.
 */
export function kldOnOracleSupport(reference: TopK, observed: TopK): PositionKld {
  const floor = observed.logprobs[observed.logprobs.length - 1];
  let kld = 0;
  let floored = 0;
  reference.ids.forEach((id, i) => {
    const index = observed.ids.indexOf(id);
    if (index < 0) floored++;
    kld += term(reference.logprobs[i], index >= 0 ? observed.logprobs[index] : floor);
  });
  return { kld, floored };
}
