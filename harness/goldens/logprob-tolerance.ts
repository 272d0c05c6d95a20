import type { TokenId } from "../sut/types.js";

/**
 * How far a fresh llama.cpp run's top-k log-probs may sit from committed goldens, in nats.
 * llama.cpp's CPU kernels pick instructions by CPU, so the same build on another x86-64 machine
 * gives the same greedy ids but log-probs up to 1.9e-5 apart (measured on the fixture goldens);
 * 1e-4 leaves room for that and is still far below the 1e-3-nat near-tie band a gap is judged by.
 * Two processes on one machine agree byte for byte; across machines only ids are exact.
 */
export const GOLDEN_LOGPROB_TOLERANCE_NATS = 1e-4;

/**
 * The same, between two ggml CPU variants (docs/findings-cpu.md): 1.25 × the largest difference
 * measured between the committed goldens (made under zen4) and a re-run under each variant the AMD
 * EPYC dev VM loads, by architecture. gemma4 moves by up to 9.25e-3 nats (sse42), every other
 * family by up to 1.01e-4 (qwen35's zoo-long, sandybridge, at a token of log-prob −17.8).
 */
const CROSS_VARIANT_TOLERANCE_NATS: Readonly<Record<string, number>> = { gemma4: 1.2e-2 };
const CROSS_VARIANT_TOLERANCE_DEFAULT_NATS = 1.3e-4;

/**
 * How far a re-run may move the goldens' log-probs: GOLDEN_LOGPROB_TOLERANCE_NATS under the variant
 * they were made with (or where they do not say), the architecture's cross-variant tolerance under
 * another, with the reason for the message that names it.
 */
export function recomputeTolerance(madeUnder: string | undefined, runningUnder: string | undefined, architecture: string | undefined): { readonly nats: number; readonly why: string } {
  if (madeUnder === undefined || runningUnder === undefined || madeUnder === runningUnder) {
    return { nats: GOLDEN_LOGPROB_TOLERANCE_NATS, why: madeUnder === undefined ? "the goldens do not say which CPU variant made them" : `made and re-run under ggml ${madeUnder}` };
  }
  const nats = (architecture === undefined ? undefined : CROSS_VARIANT_TOLERANCE_NATS[architecture]) ?? CROSS_VARIANT_TOLERANCE_DEFAULT_NATS;
  return { nats, why: `made under ggml ${madeUnder}, re-run under ${runningUnder}: the cross-variant tolerance of ${architecture ?? "this architecture"}` };
}

interface TopKRow {
  readonly ids: readonly TokenId[];
  readonly logprobs: readonly number[];
}

/**
 * The first place a fresh top-k row leaves the committed one by more than `toleranceNats`, or
 * undefined. Compared rank by rank on values (the r-th largest log-prob moves no further than the
 * log-probs themselves), and token by token: each committed id keeps its log-prob within the
 * tolerance, and one missing from the fresh top-k
 * is allowed only when it sat within the tolerance of the fresh row's cut-off (a near-tie at the edge).
 */
export function topKDifference(committed: readonly (readonly TopKRow[])[], fresh: readonly (readonly TopKRow[])[], toleranceNats = GOLDEN_LOGPROB_TOLERANCE_NATS): string | undefined {
  if (fresh.length !== committed.length) return `${fresh.length} prompts, the goldens hold ${committed.length}`;
  for (let p = 0; p < committed.length; p++) {
    if (fresh[p].length !== committed[p].length) return `prompt ${p}: ${fresh[p].length} positions, the goldens hold ${committed[p].length}`;
    for (let t = 0; t < committed[p].length; t++) {
      const want = committed[p][t];
      const got = fresh[p][t];
      const at = `prompt ${p} position ${t}`;
      if (got.logprobs.length !== want.logprobs.length) return `${at}: top-${got.logprobs.length}, the goldens hold top-${want.logprobs.length}`;
      for (let r = 0; r < want.logprobs.length; r++) {
        const delta = Math.abs(got.logprobs[r] - want.logprobs[r]);
        if (!(delta <= toleranceNats)) return `${at} rank ${r}: log-prob ${got.logprobs[r]} vs ${want.logprobs[r]} (|Δ| ${delta.toExponential(2)} > ${toleranceNats})`;
      }
      const cutoff = got.logprobs[got.logprobs.length - 1];
      for (const [r, id] of want.ids.entries()) {
        const index = got.ids.indexOf(id);
        if (index >= 0 && !(Math.abs(got.logprobs[index] - want.logprobs[r]) <= toleranceNats)) return `${at}: token ${id} has log-prob ${got.logprobs[index]}, the goldens ${want.logprobs[r]}`;
        if (index < 0 && !(want.logprobs[r] <= cutoff + toleranceNats)) return `${at}: token ${id} (rank ${r}) is missing from the fresh top-${got.ids.length}`;
      }
    }
  }
  return undefined;
}
