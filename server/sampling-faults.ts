import type { TokenId } from "../harness/sut/types.js";
import type { ServerFault } from "./faults.js";
import type { LogitsRow } from "./logits-row.js";
import type { SamplingParams, SamplingRandom } from "./sampling.js";

/**
 * FAULT: the planted sampler faults (faults.ts, `sample-*`), each a sampler that is wrong in one
 * way a bring-up server's is. Written as a plain sampler (a sort of the candidates, then each cut
 * in turn) so that each fault is one visible deviation from the OpenAI order the fast sampler
 * (sampling.ts) implements; only the faults' tests reach it.
 */

/** The faults of the draw itself (the seed's and the request parser's act elsewhere: engine.ts, requests.ts). */
export type SamplerFault = Exclude<Extract<ServerFault, `sample-${string}`>, "sample-unseeded" | "sample-params-ignored">;

export function isSamplerFault(fault: ServerFault | undefined): fault is SamplerFault {
  return fault !== undefined && fault.startsWith("sample-") && fault !== "sample-unseeded" && fault !== "sample-params-ignored";
}

/** A float64 rounded to bfloat16's 8 significant bits (round half to even on the bit pattern of its float32). */
function toBfloat16(value: number): number {
  const view = new DataView(new ArrayBuffer(4));
  view.setFloat32(0, value);
  const bits = view.getUint32(0);
  view.setUint32(0, ((bits + 0x7fff + ((bits >>> 16) & 1)) & 0xffff0000) >>> 0);
  return view.getFloat32(0);
}

/** Candidate ids by falling `values`, ties lower id first, or (unstable) in a random order each call. */
function ranked(values: Float64Array, unstable: boolean): number[] {
  const ids = Array.from(values.keys()).filter((id) => values[id] > -Infinity);
  const shuffle = unstable ? new Float64Array(values.length).map(() => Math.random()) : undefined;
  return ids.sort((a, b) => values[b] - values[a] || (shuffle === undefined ? a - b : shuffle[a] - shuffle[b]));
}

/** Probabilities of `ids` from `values` (a softmax over them alone). */
function softmax(values: Float64Array, ids: readonly number[]): number[] {
  const top = Math.max(...ids.map((id) => values[id]));
  const weights = ids.map((id) => Math.exp(values[id] - top));
  const total = weights.reduce((a, b) => a + b, 0);
  return weights.map((w) => w / total);
}

/** top_p's nucleus of `ids` (by falling value): through the token that reaches p, one fewer or one more under the faults. */
function nucleus(values: Float64Array, ids: number[], p: number, fault: SamplerFault): number[] {
  if (p >= 1) return ids;
  const probabilities = softmax(values, ids);
  let sum = 0;
  let end = ids.length;
  for (let i = 0; i < ids.length; i++) {
    sum += probabilities[i];
    if (sum >= p) { end = i + 1; break; }
  }
  if (fault === "sample-top-p-one-short") end = Math.max(1, end - 1);
  if (fault === "sample-top-p-one-extra") end = Math.min(ids.length, end + 1);
  return ids.slice(0, end);
}

/** min_p's survivors of `ids`: relative to the first (most likely), or to 1 under the fault. */
function minP(values: Float64Array, ids: number[], p: number, fault: SamplerFault): number[] {
  if (p <= 0) return ids;
  if (fault === "sample-min-p-wrong-max") {
    const probabilities = softmax(values, ids);
    return ids.filter((_, i) => i === 0 || probabilities[i] >= p);
  }
  return ids.filter((id) => values[id] - values[ids[0]] >= Math.log(p));
}

/**
 * FAULT sample-small-temperature-underflow: p^(1/T) from the probabilities, in linear space, as
 * a sampler that never works in log space computes them; where every weight underflows to 0, all
 * of the draw goes to the first candidate in id order.
 */
function powerWeights(values: Float64Array, ids: readonly number[], temperature: number): number[] {
  const powered = softmax(values, ids).map((p) => p ** (1 / temperature));
  const total = powered.reduce((a, b) => a + b, 0);
  if (total > 0) return powered.map((w) => w / total);
  const first = Math.min(...ids);
  return ids.map((id) => (id === first ? 1 : 0));
}

/** Draws one token as sampling.ts's sampleToken does, with the planted fault's deviation. */
export function sampleWithFault(row: LogitsRow, params: SamplingParams, random: SamplingRandom, fault: SamplerFault): TokenId {
  const temperature = fault === "sample-temperature-twice" ? params.temperature * params.temperature : params.temperature;
  const raw = Float64Array.from(row);
  const tempered = raw.map((l) => l / temperature);
  // The OpenAI order cuts the tempered values; the llama.cpp order cuts the raw ones and tempers the survivors.
  const cutOn = fault === "sample-llama-order" ? raw : tempered;
  const rankOn = fault === "sample-top-k-unstable-ties" ? cutOn.map(toBfloat16) : cutOn;
  let ids = ranked(rankOn, fault === "sample-top-k-unstable-ties");
  if (params.topK > 0) ids = ids.slice(0, params.topK);
  // The cuts after top_k read the exact values, in the order the ranking gave.
  if (fault === "sample-llama-order") {
    ids = minP(cutOn, nucleus(cutOn, ids, params.topP, fault), params.minP, fault);
  } else {
    ids = nucleus(cutOn, minP(cutOn, ids, params.minP, fault), params.topP, fault);
  }
  const probabilities = fault === "sample-small-temperature-underflow" ? powerWeights(raw, ids, temperature) : softmax(tempered, ids);
  let draw = random.uniform();
  for (let i = 0; i < ids.length; i++) {
    draw -= probabilities[i];
    if (draw <= 0) return ids[i];
  }
  return ids[ids.length - 1];
}
