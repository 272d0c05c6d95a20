import type { TokenId, TopK } from "../sut/types.js";

/**
 * The gap of one cell (docs/metrics.md, greedy-id parity): with the ORACLE teacher-forced on `prompt + SUT ids`,
 * gap = max(0, logp[oracle argmax] − logp[SUT token]), stored as integer milli-nats. A SUT token
 * outside the oracle's top-k gets the top-k lower bound logp[top1] − logp[top-k] and is marked.
 */
export interface CellGap {
  readonly gapMnats: number;
  readonly lowerBound: boolean;
  readonly oracleArgmax: TokenId;
}

export function cellGap(oracleRow: TopK, sutToken: TokenId): CellGap {
  const top = oracleRow.logprobs[0];
  const index = oracleRow.ids.indexOf(sutToken);
  if (index >= 0) {
    return { gapMnats: Math.max(0, Math.round((top - oracleRow.logprobs[index]) * 1000)), lowerBound: false, oracleArgmax: oracleRow.ids[0] };
  }
  const last = oracleRow.logprobs[oracleRow.logprobs.length - 1];
  return { gapMnats: Math.max(0, Math.round((top - last) * 1000)), lowerBound: true, oracleArgmax: oracleRow.ids[0] };
}
