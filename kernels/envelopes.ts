/**
 * Analytic error envelopes for owned kernels. A dot product of n float32 terms, computed in float32
 * in any order, is within γ_n · Σ|w_i·x_i| of the exact value, γ_n = n·u / (1 − n·u), u = 2⁻²⁴
 * (Higham, Accuracy and Stability of Numerical Algorithms, §3.1). A kernel outside it is wrong,
 * not merely differently rounded; one that accumulates in bf16 or fp16 needs a wider envelope.
 */
export const FLOAT32_UNIT_ROUNDOFF = 2 ** -24;

export function float32DotEnvelope(terms: number, absoluteSum: number): number {
  const nu = terms * FLOAT32_UNIT_ROUNDOFF;
  return (nu / (1 - nu)) * absoluteSum;
}
