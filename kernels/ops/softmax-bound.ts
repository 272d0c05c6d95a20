import { FLOAT32_SUBNORMAL_STEP, gamma, LIBM_ULPS } from "../envelopes.js";

/** A softmax computed in float64, with the relative error bounds of its float32 evaluation. */
export interface BoundedSoftmax {
  /** e_i = exp(s·z_i − M). */
  readonly e: Float64Array;
  /** Σ e_i. */
  readonly sum: number;
  /** Relative error bound of each computed e_i. */
  readonly termError: Float64Array;
  /**
   * Absolute error of each computed e_i on top of termError: an e_i in the subnormal range is off
   * by up to one step there (libm's one ulp), 2⁻¹⁴⁹ — 0 for an exact value below 2⁻¹⁵⁰ included.
   */
  readonly termAbsolute: number;
  /** Relative error bound of the computed Σ e_i (the terms' absolute errors included: Σ ≥ 1). */
  readonly sumError: number;
}

/**
 * exp(s·z_i − M) / Σ_j exp(s·z_j − M), max-subtracted as llama.cpp does (docs/kernel-bounds.md,
 * "softmax"). The exponent s·z_i − M is off by at most u(|s·z_i| + |t_i| + |M|) (the product, the
 * subtraction, and whichever way M was formed; an error common to every exponent cancels in the
 * ratio), plus `upstream[i]` when the logits themselves carry an error; exp adds one libm call.
 * The sum of positive terms adds γ_{n−1}. Underflow: each e_i may also be off by one subnormal
 * step (termAbsolute), so the sum by n of them, which is relative n·2⁻¹⁴⁹/Σ since Σ ≥ e^0 = 1.
 */
export function boundedSoftmax(z: ArrayLike<number>, scale: number, u: number, upstream?: ArrayLike<number>): BoundedSoftmax {
  const n = z.length;
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, scale * z[i]);
  const e = new Float64Array(n);
  const termError = new Float64Array(n);
  let sum = 0;
  let worst = 0;
  for (let i = 0; i < n; i++) {
    const a = scale * z[i];
    const t = a - max;
    e[i] = Math.exp(t);
    sum += e[i];
    termError[i] = u * (Math.abs(a) + Math.abs(t) + Math.abs(max)) + (upstream?.[i] ?? 0) + LIBM_ULPS * u;
    worst = Math.max(worst, termError[i]);
  }
  return { e, sum, termError, termAbsolute: FLOAT32_SUBNORMAL_STEP, sumError: worst + gamma(Math.max(1, n - 1), u) + (n * FLOAT32_SUBNORMAL_STEP) / sum };
}
