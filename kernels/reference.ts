import { GgmlType } from "../harness/gguf/types.js";
import { SeededRandom } from "../harness/fixtures/seeded-random.js";
import { codecFor } from "../harness/quant/registry.js";
import type { KernelCase } from "../harness/suites/kernel-suite.js";

/**
 * CPU references for the kernel suites. Inputs come from the case's seed (normal values, encoded
 * by the harness's own quantizers); decodes are the TypeScript codecs, bit-exact to llama.cpp's
 * dequantize_row_* (test/quant-llamacpp.test.ts); matvec is the float64 product of those decoded
 * float32 weights and x, with Σ|w·x| per row for the error envelope.
 */
export interface DequantizeInputs {
  readonly type: GgmlType;
  readonly blocks: Uint8Array;
  readonly values: number;
}

export interface MatvecInputs {
  readonly type: GgmlType;
  readonly weights: Uint8Array;
  readonly rows: number;
  readonly cols: number;
  readonly x: Float32Array;
}

export function dequantizeInputs(c: Extract<KernelCase, { op: "dequantize" }>): DequantizeInputs {
  const type = GgmlType[c.type];
  return { type, blocks: codecFor(type).encode(new SeededRandom(c.seed).normalArray(c.values, 1)), values: c.values };
}

export function matvecInputs(c: Extract<KernelCase, { op: "matvec" }>): MatvecInputs {
  const type = GgmlType[c.type];
  const random = new SeededRandom(c.seed);
  const weights = codecFor(type).encode(random.normalArray(c.rows * c.cols, 1 / Math.sqrt(c.cols)));
  return { type, weights, rows: c.rows, cols: c.cols, x: random.normalArray(c.cols, 1) };
}

export function referenceDequantize(inputs: DequantizeInputs): Float32Array {
  return codecFor(inputs.type).decode(inputs.blocks);
}

/** y = W·x in float64 from the decoded float32 weights, and Σ|w·x| per row. */
export function referenceMatvec(inputs: MatvecInputs): { y: Float64Array; absoluteSums: Float64Array } {
  const w = codecFor(inputs.type).decode(inputs.weights);
  const y = new Float64Array(inputs.rows);
  const absoluteSums = new Float64Array(inputs.rows);
  for (let r = 0; r < inputs.rows; r++) {
    let sum = 0;
    let absolute = 0;
    for (let i = 0; i < inputs.cols; i++) {
      const term = w[r * inputs.cols + i] * inputs.x[i];
      sum += term;
      absolute += Math.abs(term);
    }
    y[r] = sum;
    absoluteSums[r] = absolute;
  }
  return { y, absoluteSums };
}
