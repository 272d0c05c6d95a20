import type { TokenId, TopK } from "./types.js";

/**
 * Reduces a full next-token distribution (token -> probability) to its top-k log-probs.
 * Ties break toward the lower token id so the order is reproducible everywhere.
 */
export function topKFromProbabilities(probabilities: ReadonlyMap<TokenId, number>, k: number): TopK {
  const entries = [...probabilities.entries()];
  entries.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
  const top = entries.slice(0, k);
  return { ids: top.map(([id]) => id), logprobs: top.map(([, p]) => Math.log(p)) };
}

/** The greedy choice of a distribution: highest probability, lower id on ties. */
export function argmaxToken(probabilities: ReadonlyMap<TokenId, number>): TokenId {
  let best = -1;
  let bestP = -Infinity;
  for (const [id, p] of probabilities) {
    if (p > bestP || (p === bestP && id < best)) {
      best = id;
      bestP = p;
    }
  }
  return best;
}
