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
 * same order with the same double-precision weights, so either path gives a seed the same tokens
 * (test/row-sampler.test.ts). The native one is several times faster on a real vocabulary.
 */
export function sampleTokenInJs(row: LogitsRow, params: SamplingParams, random: SamplingRandom): TokenId {
  const best = rowArgmax(row);
  if (params.temperature === 0) return best;
  const top = row[best];
  if (!(top > -Infinity && top < Infinity)) throw new Error(`the distribution's most likely token has logit ${top}`);
  // top_k's k by falling value (ties: lower id first), else every token in id order; only those of positive weight.
  const order = params.topK > 0 ? rankedIds(row, params.topK) : undefined;
  const size = order?.length ?? row.length;
  const { ids, weights, slices } = scratch(size);
  let count = 0;
  let total = 0;
  let low = top;
  for (let i = 0; i < size; i++) {
    const id = order === undefined ? i : order[i];
    const exponent = (row[id] - top) / params.temperature;
    // exp underflows to 0 below -745: no token, and no exp to compute (a NaN fails the test too).
    if (!(exponent > -746)) continue;
    const weight = Math.exp(exponent);
    // The top token weighs 1, so min-p's cut is on the weight itself.
    if (weight === 0 || weight < params.minP) continue;
    ids[count] = id;
    weights[count++] = weight;
    total += weight;
    if (row[id] < low) low = row[id];
  }
  // With a top-p cut, the candidates kept are those whose slice is below the cut's.
  const cut = params.topP < 1 ? nucleus(row, count, params.topP, total, low, top) : undefined;
  let draw = random.uniform() * (cut?.mass ?? total);
  let last = best;
  for (let i = 0; i < count; i++) {
    if (cut !== undefined && slices[i] >= cut.below) continue;
    last = ids[i];
    draw -= weights[i];
    if (draw <= 0) return ids[i];
  }
  return last;
}

/** At most this many slices of the candidates' value range, over which top-p sums its mass before ranking any token (nucleus). */
const NUCLEUS_SLICES = 4096;

/**
 * Candidates' ids, weights and nucleus slices, reused by every draw (a draw is synchronous, so one
 * at a time): allocated per token at a 262k vocabulary they were much of the garbage collector's work.
 */
let buffers = { ids: new Int32Array(0), weights: new Float64Array(0), slices: new Int32Array(0) };

function scratch(size: number): typeof buffers {
  if (buffers.ids.length < size) buffers = { ids: new Int32Array(size), weights: new Float64Array(size), slices: new Int32Array(size) };
  return buffers;
}

/**
 * The top-p nucleus of the first `count` candidates in the scratch buffers (weights positive):
 * the fewest of the highest-valued whose weights reach top_p of the total, equal values taken
 * lower id first — what a sort by falling value and a running sum would keep. Found in linear time: the value range is cut into slices, a slice's tokens all
 * rank below the slices above it, so summing each slice's weight finds the slice where the nucleus
 * ends, and only that slice's tokens are sorted. Leaves each candidate's slice in the scratch,
 * those kept from the boundary slice moved one above it; returns the first slice not kept, and
 * the kept candidates' weight. `total` is their weight, `low` and `high` their lowest and highest value.
 */
function nucleus(row: LogitsRow, count: number, topP: number, total: number, low: number, high: number): { readonly below: number; readonly mass: number } {
  const { ids, weights, slices } = buffers;
  const target = topP * total;
  // Slice 0 holds the highest values. Subtraction and scaling keep the order of values (never
  // reverse it), so a higher value never lands in a later slice, and equal values share one.
  const sliceCount = Math.min(NUCLEUS_SLICES, count);
  const scale = high > low ? (sliceCount - 1) / (high - low) : 0;
  const mass = new Float64Array(sliceCount);
  for (let i = 0; i < count; i++) {
    slices[i] = Math.floor((high - row[ids[i]]) * scale);
    mass[slices[i]] += weights[i];
  }
  let above = 0;
  let boundary = 0;
  while (boundary < sliceCount - 1 && above + mass[boundary] < target) above += mass[boundary++];
  const ranked: number[] = [];
  for (let i = 0; i < count; i++) if (slices[i] === boundary) ranked.push(i);
  ranked.sort((a, b) => row[ids[b]] - row[ids[a]] || ids[a] - ids[b]);
  for (const i of ranked) {
    if (above >= target) break;
    slices[i] = boundary - 1;
    above += weights[i];
  }
  return { below: boundary, mass: above };
}
