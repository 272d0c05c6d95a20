import { float32DotEnvelope } from "../../kernels/envelopes.js";
import type { KernelCase } from "../suites/kernel-suite.js";

/** A kernel case's outcome, and its one reproducible line (test-backend-ops style). */
export interface KernelOutcome {
  readonly pass: boolean;
  readonly line: string;
  /** Matvec: the worst row's error as a fraction of its envelope. */
  readonly envelopeUse: number | null;
}

export function caseName(c: KernelCase): string {
  return c.op === "dequantize" ? `DEQUANTIZE(type=${c.type},values=${c.values},seed=${c.seed})` : `MATVEC(type=${c.type},rows=${c.rows},cols=${c.cols},seed=${c.seed})`;
}

/** The case a reproducible line names: the part before its first ": " (`DEQUANTIZE(type=Q4_K,…)`). */
export function caseNameOfLine(line: string): string {
  return line.slice(0, line.indexOf(": "));
}

const bits = (values: Float32Array) => new Uint32Array(values.buffer, values.byteOffset, values.length);

/** Pure: a decode must match the reference bit for bit. */
export function scoreDequantize(c: KernelCase, expected: Float32Array, observed: Float32Array): KernelOutcome {
  if (observed.length !== expected.length) return { pass: false, line: `${caseName(c)}: FAIL (${observed.length} values returned, ${expected.length} expected)`, envelopeUse: null };
  const want = bits(expected);
  const got = bits(observed);
  let differing = 0;
  let first = -1;
  for (let i = 0; i < want.length; i++) {
    if (want[i] !== got[i]) {
      differing++;
      if (first < 0) first = i;
    }
  }
  if (differing === 0) return { pass: true, line: `${caseName(c)}: OK (${want.length}/${want.length} values bit-exact)`, envelopeUse: null };
  return { pass: false, line: `${caseName(c)}: FAIL (${differing}/${want.length} values differ; first at ${first}: expected ${expected[first]}, got ${observed[first]})`, envelopeUse: null };
}

/** Pure: every row of y = W·x within the float32 dot-product envelope of the float64 reference. */
export function scoreMatvec(c: Extract<KernelCase, { op: "matvec" }>, reference: { y: Float64Array; absoluteSums: Float64Array }, observed: Float32Array): KernelOutcome {
  if (observed.length !== c.rows) return { pass: false, line: `${caseName(c)}: FAIL (${observed.length} rows returned, ${c.rows} expected)`, envelopeUse: null };
  let worst = 0;
  let worstRow = 0;
  let maxError = 0;
  for (let r = 0; r < c.rows; r++) {
    const error = Math.abs(observed[r] - reference.y[r]);
    const use = Number.isNaN(error) ? Infinity : error / float32DotEnvelope(c.cols, reference.absoluteSums[r]);
    maxError = Math.max(maxError, error);
    if (use > worst) {
      worst = use;
      worstRow = r;
    }
  }
  const percent = `${(100 * worst).toPrecision(3)}% of the float32 envelope`;
  if (worst <= 1) return { pass: true, line: `${caseName(c)}: OK (max |err| ${maxError.toExponential(2)}, ${percent})`, envelopeUse: worst };
  return { pass: false, line: `${caseName(c)}: FAIL (row ${worstRow}: expected ${reference.y[worstRow].toPrecision(9)}, got ${observed[worstRow]}; ${percent})`, envelopeUse: worst };
}
