import type { TokenId } from "../harness/sut/types.js";
import { contextAccessAddon, type NativeSampleRow } from "../harness/sut/llamacpp-native-context.js";
import { rankedIds, rowArgmax, type LogitsRow } from "./logits-row.js";

/** The largest seed a request may give: a JSON number past 2^53 - 1 is no longer exact, so two different seeds would arrive as one. */
export const MAX_SEED = Number.MAX_SAFE_INTEGER;

/**
 * The generator a request's draws come from: SFC32, whose 128-bit state takes a seed's low and
 * high 32 bits whole, so each seed from 0 to MAX_SEED starts a stream of its own (SeededRandom's
 * mulberry32 holds 32 bits: seeds 2^32 apart drew the same tokens). Its step is a bijection of the
 * state, so two seeds' streams never merge. Integer arithmetic only: the same seed gives the same
 * draws on every machine.
 */
export class SamplingRandom {
  private a: number;
  private b: number;
  private c = 0x9e3779b9;
  private d = 1;

  constructor(seed: number) {
    if (!Number.isSafeInteger(seed) || seed < 0) throw new RangeError(`a sampling seed is an integer from 0 to ${MAX_SEED}, not ${seed}`);
    this.a = seed >>> 0;
    this.b = Math.floor(seed / 2 ** 32) >>> 0;
    // Seeds that differ in a few bits start in nearly the same state: mix before the first draw (SFC's author runs 12 or more rounds).
    for (let i = 0; i < 15; i++) this.next();
  }

  /** Uniform in [0, 1), 32 bits of resolution. */
  uniform(): number {
    return this.next() / 4294967296;
  }

  private next(): number {
    const t0 = (this.a + this.b) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.d = (this.d + 1) >>> 0;
    const t = (t0 + this.d) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }
}

/** Per-request sampling, OpenAI names: temperature 0 is greedy. The seed lives in the request's generator. */
export interface SamplingParams {
  readonly temperature: number;
  readonly topP: number;
  /** 0 keeps every token. */
  readonly topK: number;
  /** Keeps the tokens whose tempered probability is at least this fraction of the most likely one's (0 keeps every token). */
  readonly minP: number;
}

/**
 * Draws the next token from the model's distribution (a row of logits or log-probabilities):
 * greedy at temperature 0, else p^(1/T) restricted to top-k, to min-p and to the top-p nucleus,
 * renormalised, and drawn with the request's own seeded generator (same seed, same tokens). The
 * OpenAI/vLLM order (harness/sampling/convention.ts, "openai"): the temperature first, then top-k,
 * min-p (relative to the most likely token) and top-p on the tempered probabilities.
 *
 * The weights are computed in log space relative to the most likely token, exp((l - l_max)/T):
 * p^(1/T) itself underflows to 0 for every token at a small T (0.0001 raises p to the 10,000th),
 * and a draw over all-zero weights fell on whichever token came first, id 0. This way the top token
 * weighs 1 at any temperature; a token whose weight is 0 (probability 0, or underflowed next to
 * the top) is no candidate, so it is never drawn.
 *
 * Nothing sorts the vocabulary (that and node-llama-cpp's Map were a third of a second per token at
 * 262k entries): top-k keeps its k in one pass (rankedIds), top-p sums slices of the value range to
 * find where its nucleus ends (nucleus), and the draw walks the candidates in the order they are
 * kept — which tokens may be drawn, and with what weights, is all that decides the distribution.
 * The decode step draws most sampled tokens itself, the same way in native code (batch-step.ts,
 * stepAsk); this is the draw from a row JavaScript holds (a request that also asks its log-probs).
 */
export function sampleToken(row: LogitsRow, params: SamplingParams, random: SamplingRandom): TokenId {
  if (params.temperature === 0) return rowArgmax(row);
  const native = nativeSampleRow();
  return native === undefined ? sampleTokenInJs(row, params, random) : native(row, params.temperature, params.topK, params.topP, params.minP, random.uniform());
}

let nativeDraw: NativeSampleRow | null | undefined;

/** The addon's sampleRow (native/llama-context/row_sampler.cc), where this checkout's addon built and has it. */
function nativeSampleRow(): NativeSampleRow | undefined {
  if (nativeDraw === undefined) {
    const addon = contextAccessAddon();
    nativeDraw = typeof addon !== "string" && addon.sampleRow !== undefined ? addon.sampleRow.bind(addon) : null;
  }
  return nativeDraw ?? undefined;
}

/**
 * sampleToken's draw in JavaScript: where the addon did not build (a machine without a compiler)
 * and as the statement the native draw (row_sampler.cc) is held to — the same candidates in the
 * same order, the same single-precision weights from the same exp (negativeExp) summed in double
 * precision in the same order, so either path gives a seed the same tokens
 * (test/row-sampler.test.ts). Every single-precision step here is rounded with Math.fround, which
 * gives exactly what the native code's float operation gives. The native one vectorizes and is
 * several times faster on a real vocabulary.
 */
export function sampleTokenInJs(row: LogitsRow, params: SamplingParams, random: SamplingRandom): TokenId {
  const best = rowArgmax(row);
  if (params.temperature === 0) return best;
  const top = Math.fround(row[best]);
  if (!(top > -Infinity && top < Infinity)) throw new Error(`the distribution's most likely token has logit ${row[best]}`);
  // The candidates in order: top_k's k by falling value (ties: lower id first), else every token in id order.
  const ids = params.topK > 0 ? rankedIds(row, params.topK) : undefined;
  const count = ids?.length ?? row.length;
  const { values, weights, slices } = scratch(count);
  // A Float32Array rounds what it stores, as the native code reads a row as floats.
  for (let i = 0; i < count; i++) values[i] = row[ids === undefined ? i : ids[i]];
  const inverseTemperature = Math.fround(Math.min(1 / params.temperature, FLOAT_MAX));
  const total = weigh(count, top, inverseTemperature, params.minP);
  // The slices span the values a weight can have: down to the exponent's lowest (a bound, not the lowest candidate, which would cost a pass).
  const cut = params.topP < 1 ? nucleus(ids, count, params.topP, total, top + LOWEST_EXPONENT / inverseTemperature, top) : undefined;
  // Kept: a positive weight, and with a top-p cut a slice below the cut's.
  const kept = (i: number) => (cut === undefined ? weights[i] > 0 : slices[i] < cut.below);
  // The walk: whole blocks skipped while the draw lies past them, then candidate by candidate.
  let remaining = random.uniform() * (cut?.mass ?? total);
  let i = 0;
  for (; i + WALK_BLOCK <= count; i += WALK_BLOCK) {
    const block = blockWeight(i, cut?.below);
    if (!(remaining - block > 0)) break;
    remaining -= block;
  }
  for (; i < count; i++) {
    if (!kept(i)) continue;
    remaining -= weights[i];
    if (remaining <= 0) return ids === undefined ? i : ids[i];
  }
  // Rounding left a sliver: the last kept candidate.
  for (let j = count - 1; j >= 0; j--) if (kept(j)) return ids === undefined ? j : ids[j];
  return best;
}

/** At most this many slices of the candidates' value range, over which top-p sums its mass before ranking any token (nucleus). */
const NUCLEUS_SLICES = 4096;
/** Below this exponent a weight (e^-86 ≈ 4e-38 of the top token's) would come near the smallest normal float: no candidate, as one of probability 0. */
const LOWEST_EXPONENT = -86;
/** Sums run in this many interleaved lanes (what a vector unit adds at once), then the lanes pairwise. */
const SUM_LANES = 8;
/** The draw's walk skips whole blocks of this many candidates while the draw lies past them. */
const WALK_BLOCK = 64;
/** The nucleus's slice masses are summed in this many interleaved histograms, then pairwise. */
const HISTOGRAMS = 4;
const FLOAT_MAX = 3.4028234663852886e38;

/**
 * Candidates' values, weights and nucleus slices, reused by every draw (a draw is synchronous, so one
 * at a time): allocated per token at a 262k vocabulary they were much of the garbage collector's work.
 */
let buffers = { values: new Float32Array(0), weights: new Float32Array(0), slices: new Int32Array(0) };

function scratch(size: number): typeof buffers {
  if (buffers.values.length < size) buffers = { values: new Float32Array(size), weights: new Float32Array(size), slices: new Int32Array(size) };
  return buffers;
}

const f = Math.fround;
/** 2^-k for k from 0 to 126, exact (halving a power of two is). */
const NEGATIVE_POWERS_OF_TWO = (() => {
  const powers = new Float64Array(127);
  for (let k = 0, power = 1; k < powers.length; k++, power /= 2) powers[k] = power;
  return powers;
})();
// Each constant a double rounded once to single precision, as the native code's static_cast<float>.
const LOG2_E = f(1.4426950408889634);
const LN2_HIGH = f(0.693359375);
const LN2_LOW = f(-2.1219444e-4);
const ROUND = 12582912;
const TAYLOR = [1 / 5040, 1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5, 1, 1].map(f);

/**
 * e^x for x in [LOWEST_EXPONENT, 0] in single precision, within 3e-7 relative: x = k ln 2 + r with
 * |r| ≤ ln 2 / 2, e^r by its Taylor series to r^7 (the next term is under 6e-9 there), times 2^k.
 * Not Math.exp: each step is one IEEE single-precision operation, which the native code does in
 * vector registers and this does in double precision rounded by Math.fround — the same bits, since
 * a double holds a float sum, difference, product or quotient exactly enough to round it once.
 */
export function negativeExp(x: number): number {
  // Adding 1.5 * 2^23 rounds x / ln 2 to the nearest integer (ties to even), as the native code's bit trick reads it.
  const shifted = f(f(x * LOG2_E) + ROUND);
  const k = f(shifted - ROUND);
  const r = f(f(x - f(k * LN2_HIGH)) - f(k * LN2_LOW));
  let p = TAYLOR[0];
  for (let term = 1; term < TAYLOR.length; term++) p = f(f(p * r) + TAYLOR[term]);
  return f(p * NEGATIVE_POWERS_OF_TWO[-k]);
}

/**
 * The weights of the first `count` values in the scratch buffers: e^((value - top) / T) where that
 * is a candidate (exponent not under LOWEST_EXPONENT, weight at least min_p), else 0. The top
 * token weighs 1, so min-p's cut is on the weight itself. Returns their sum in double precision
 * (SUM_LANES lanes, added in a fixed tree).
 */
function weigh(count: number, top: number, inverseTemperature: number, minP: number): number {
  const { values, weights } = buffers;
  const lanes = new Float64Array(SUM_LANES);
  for (let i = 0; i < count; i++) {
    const exponent = f(f(values[i] - top) * inverseTemperature);
    // A NaN fails the test too: no token.
    const weight = exponent >= LOWEST_EXPONENT ? negativeExp(exponent) : 0;
    weights[i] = weight > 0 && weight >= minP ? weight : 0;
    lanes[i % SUM_LANES] += weights[i];
  }
  return sumOfLanes(lanes);
}

const sumOfLanes = (lanes: Float64Array): number => ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));

/** The weight of the kept candidates (slice below `below`; without a cut, every weight) among WALK_BLOCK from `start`, in SUM_LANES lanes added in a fixed tree. */
function blockWeight(start: number, below: number | undefined): number {
  const { weights, slices } = buffers;
  const lanes = new Float64Array(SUM_LANES);
  for (let i = 0; i < WALK_BLOCK; i++) if (below === undefined || slices[start + i] < below) lanes[i % SUM_LANES] += weights[start + i];
  return sumOfLanes(lanes);
}

/**
 * The top-p nucleus of the first `count` candidates in the scratch buffers: the fewest of the
 * highest-valued whose weights reach top_p of the total, equal values taken lower id first — what
 * a sort by falling value and a running sum would keep. Found in linear time: the value range is
 * cut into slices, a slice's tokens all rank below the slices above it, so summing each slice's
 * weight finds the slice where the nucleus ends, and only that slice's tokens are sorted. Leaves
 * each candidate's slice in the scratch (past every slice for a weight of 0), those kept from the
 * boundary slice moved one above it; returns the first slice not kept, and the kept candidates'
 * weight. `total` is their weight, `high` their highest value and `low` a bound under every one
 * (the last slice also holds whatever rounding puts below it).
 */
function nucleus(ids: Int32Array | undefined, count: number, topP: number, total: number, low: number, high: number): { readonly below: number; readonly mass: number } {
  const { values, weights, slices } = buffers;
  const target = topP * total;
  // Slice 0 holds the highest values. Subtraction and scaling keep the order of values (never
  // reverse it), so a higher value never lands in a later slice, and equal values share one.
  const sliceCount = Math.min(NUCLEUS_SLICES, count);
  const scale = high > low ? (sliceCount - 1) / (high - low) : 0;
  // Never negative, so truncation is the floor.
  for (let i = 0; i < count; i++) slices[i] = weights[i] > 0 ? Math.min(Math.trunc((high - values[i]) * scale), sliceCount - 1) : sliceCount;
  // Each slice's weight in interleaved histograms, then pairwise (the native code's order).
  const stride = sliceCount + 1;
  const partial = new Float64Array(stride * HISTOGRAMS);
  for (let i = 0; i < count; i++) partial[(i % HISTOGRAMS) * stride + slices[i]] += weights[i];
  const mass = new Float64Array(stride);
  for (let s = 0; s < stride; s++) mass[s] = (partial[s] + partial[stride + s]) + (partial[2 * stride + s] + partial[3 * stride + s]);
  let above = 0;
  let boundary = 0;
  while (boundary < sliceCount - 1 && above + mass[boundary] < target) above += mass[boundary++];
  const idOf = (i: number) => (ids === undefined ? i : ids[i]);
  const ranked: number[] = [];
  for (let i = 0; i < count; i++) if (slices[i] === boundary) ranked.push(i);
  ranked.sort((a, b) => values[b] - values[a] || idOf(a) - idOf(b));
  for (const i of ranked) {
    if (above >= target) break;
    slices[i] = boundary - 1;
    above += weights[i];
  }
  return { below: boundary, mass: above };
}
