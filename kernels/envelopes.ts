/**
 * Building blocks of the analytic error envelopes (derivations: docs/kernel-bounds.md). Bounds are
 * forward error bounds in the standard model fl(a ∘ b) = (a ∘ b)(1 + δ), |δ| ≤ u, with γ_n =
 * n·u / (1 − n·u) (Higham, Accuracy and Stability of Numerical Algorithms, §3.1). A kernel outside
 * its envelope is wrong, not merely differently rounded.
 */
export const FLOAT32_UNIT_ROUNDOFF = 2 ** -24;
export const BF16_UNIT_ROUNDOFF = 2 ** -8;

/** γ_n for unit roundoff u; Infinity when n·u ≥ 1 (no finite worst case: a bf16 sum of 256 terms or more). */
export function gamma(n: number, u: number = FLOAT32_UNIT_ROUNDOFF): number {
  const nu = n * u;
  return nu >= 1 ? Infinity : nu / (1 - nu);
}

/** A dot product of n terms in any order: |ŝ − s| ≤ γ_n · Σ|a_i·b_i|. */
export function float32DotEnvelope(terms: number, absoluteSum: number, u: number = FLOAT32_UNIT_ROUNDOFF): number {
  return gamma(terms, u) * absoluteSum;
}

/**
 * libm's expf, logf, sinf, cosf are within one ulp of the exact result of their float32 argument:
 * a relative error of at most 2u.
 */
export const LIBM_ULPS = 2;

/**
 * The bound of a value computed with absolute error `computeError`, then stored: float32 stores
 * what it computed; bf16 rounds once more, to nearest even, adding at most u_bf16·|stored value|.
 */
export function storedBound(computeError: number, exact: number, output: "F32" | "BF16" | "I32"): number {
  if (output !== "BF16") return computeError;
  return computeError * (1 + BF16_UNIT_ROUNDOFF) + BF16_UNIT_ROUNDOFF * Math.abs(exact);
}

/**
 * Gradual underflow (docs/kernel-bounds.md, "Underflow and overflow"): below float32's smallest
 * normal the spacing of representable values is 2⁻¹⁴⁹, so a product, a quotient or a libm result
 * that lands there is off by up to one such step on top of its relative error (rounding: half a
 * step; libm's one ulp: a whole one). Additions and subtractions are exact there. An exact value
 * below half of it may therefore come back as 0.
 */
export const FLOAT32_SUBNORMAL_STEP = 2 ** -149;

/**
 * expf overflows to +Inf from ln(FLT_MAX) ≈ 88.7228 on; a libm within one ulp may already do so a
 * hair below. A sigmoid 1/(1 + e^(−z)) with −z beyond this returns 0 for an exact value below
 * e^(−88.7) ≈ 3.2e-39, which the bound must admit.
 */
export const EXPF_OVERFLOW_ARGUMENT = 88.7;
