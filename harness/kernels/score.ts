import type { ExpectedOutput, KernelProblem } from "../../kernels/ops/op.js";
import { multiIndex, outputBits, outputValues, SENTINEL, type KernelTensor, type OutputDtype } from "../../kernels/ops/tensor.js";

/** A kernel case's outcome, and its one reproducible line (test-backend-ops style). */
export interface KernelOutcome {
  readonly pass: boolean;
  readonly line: string;
  /** The worst element's error as a fraction of its bound (null when every output is bit-exact). */
  readonly ratio: number | null;
}

/** The case a reproducible line names: the part before its first ": " (`DEQUANTIZE(type=Q4_K,…)`). */
export function caseNameOfLine(line: string): string {
  return line.slice(0, line.indexOf(": "));
}

const shown = (x: number) => (Number.isFinite(x) ? x.toPrecision(9).replace(/\.?0+(e|$)/, "$1") : String(x));
const ratioText = (ratio: number) => (ratio < 0.001 && ratio > 0 ? ratio.toExponential(2) : ratio.toPrecision(3));

type OutputVerdict = { readonly ok: true; readonly note: string; readonly ratio: number | null } | { readonly ok: false; readonly reason: string; readonly ratio: number | null };

/** Elements still holding the sentinel were never written: the first, and how many. */
function unwritten(tensor: KernelTensor, observed: Uint8Array): string | undefined {
  const dtype = tensor.dtype as OutputDtype;
  const bits = outputBits(dtype, observed);
  let count = 0;
  let first = -1;
  for (let i = 0; i < bits.length; i++) {
    if (bits[i] === SENTINEL[dtype]) {
      count++;
      if (first < 0) first = i;
    }
  }
  return count === 0 ? undefined : `${tensor.name}${multiIndex(tensor.shape, first)} never written (${count}/${bits.length} elements still hold the sentinel)`;
}

function scoreExact(tensor: KernelTensor, expected: Uint8Array, observed: Uint8Array): OutputVerdict {
  const dtype = tensor.dtype as OutputDtype;
  const want = outputBits(dtype, expected);
  const got = outputBits(dtype, observed);
  let differing = 0;
  let first = -1;
  for (let i = 0; i < want.length; i++) {
    if (want[i] !== got[i]) {
      differing++;
      if (first < 0) first = i;
    }
  }
  if (differing === 0) return { ok: true, note: `${want.length}/${want.length} values bit-exact`, ratio: null };
  const values = (data: Uint8Array) => outputValues(dtype, data)[first];
  return { ok: false, ratio: null, reason: `${differing}/${want.length} values differ; first at ${tensor.name}${multiIndex(tensor.shape, first)}: expected ${shown(values(expected))}, got ${shown(values(observed))}` };
}

function scoreBounded(tensor: KernelTensor, expected: { value: Float64Array; bound: Float64Array }, observed: Uint8Array, boundName: string): OutputVerdict {
  const got = outputValues(tensor.dtype as OutputDtype, observed);
  let worst = 0;
  let at = 0;
  for (let i = 0; i < got.length; i++) {
    const error = Math.abs(got[i] - expected.value[i]);
    // NaN and ±Inf are outside every bound; a zero bound (a copied value) admits no error at all.
    const ratio = !Number.isFinite(got[i]) || Number.isNaN(error) ? Infinity : error === 0 ? 0 : error / expected.bound[i];
    if (ratio > worst || (ratio === Infinity && worst !== Infinity)) {
      worst = ratio;
      at = i;
    }
  }
  const where = `${tensor.name}${multiIndex(tensor.shape, at)}`;
  if (worst <= 1) return { ok: true, note: `${tensor.name}: worst ratio ${ratioText(worst)} of the ${boundName} bound`, ratio: worst };
  return { ok: false, ratio: worst, reason: `${where}: expected ${shown(expected.value[at])}, got ${shown(got[at])}; ratio ${Number.isFinite(worst) ? ratioText(worst) : "∞"} of the ${boundName} bound` };
}

/**
 * Pure: scores a kernel's outputs against the reference, output by output. Unwritten elements
 * (sentinels) fail first; exact outputs must match bit for bit; bounded ones must stay within
 * their envelope at every element (ratio ≤ 1), NaN and Inf included as failures.
 */
export function scoreKernelCase(name: string, problem: KernelProblem, expected: readonly ExpectedOutput[], observed: readonly Uint8Array[], boundName: string): KernelOutcome {
  const verdicts = problem.outputs.map((tensor, i): OutputVerdict => {
    const missing = unwritten(tensor, observed[i]);
    if (missing !== undefined) return { ok: false, reason: missing, ratio: null };
    const want = expected[i];
    return want.kind === "exact" ? scoreExact(tensor, want.data, observed[i]) : scoreBounded(tensor, want, observed[i], boundName);
  });
  const ratios = verdicts.map((v) => v.ratio).filter((r): r is number => r !== null);
  const ratio = ratios.length === 0 ? null : Math.max(...ratios);
  const failed = verdicts.filter((v): v is Extract<OutputVerdict, { ok: false }> => !v.ok);
  if (failed.length > 0) return { pass: false, line: `${name}: FAIL (${failed.map((v) => v.reason).join("; ")})`, ratio };
  const notes = verdicts.map((v, i) => (v.ok && v.ratio === null && verdicts.length > 1 ? `${problem.outputs[i].name} bit-exact` : (v as { note: string }).note));
  return { pass: true, line: `${name}: OK (${notes.join("; ")})`, ratio };
}
