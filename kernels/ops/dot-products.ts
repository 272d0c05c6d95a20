import { float32DotEnvelope, storedBound } from "../envelopes.js";
import type { OutputDtype } from "./tensor.js";

/** The operands of one dot product: k values of `w` from `wAt`, k values of `x` from `xAt`. */
export interface DotOperands {
  readonly w: Float32Array;
  readonly wAt: number;
  readonly x: Float32Array;
  readonly xAt: number;
}

/**
 * `count` dot products of k terms in float64, each with the bound of a float32 dot product
 * (γ_k·Σ|w·x|) plus the output's storage rounding: the shared core of matvec, the grouped matmul
 * and the conv1d update.
 */
export function boundedDots(count: number, k: number, operands: (i: number) => DotOperands, output: OutputDtype, u: number): { value: Float64Array; bound: Float64Array } {
  const value = new Float64Array(count);
  const bound = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    const { w, wAt, x, xAt } = operands(i);
    let sum = 0;
    let absolute = 0;
    for (let j = 0; j < k; j++) {
      const term = w[wAt + j] * x[xAt + j];
      sum += term;
      absolute += Math.abs(term);
    }
    value[i] = sum;
    bound[i] = storedBound(float32DotEnvelope(k, absolute, u), sum, output);
  }
  return { value, bound };
}
