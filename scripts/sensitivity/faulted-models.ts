/**
 * FAKE faulted models for the sensitivity table and the tensor-ablation test: the tiny-random
 * fixture with one planted fault in its weights or metadata, written by the fixture writer into a
 * scratch directory (never into the fixture cache or goldens/). A real bring-up produces such
 * errors by accident; here they are made on purpose, at a known size.
 */
import { join } from "node:path";
import { encodeFixtureGguf, tensorNamed, type FixtureModel, type FloatTensor } from "../../harness/fixtures/architecture.js";
import { SeededRandom } from "../../harness/fixtures/seeded-random.js";
import { TINY_RANDOM_SHAPE, buildTinyRandom } from "../../harness/fixtures/tiny-random.js";
import { GgmlType, type GgufValue } from "../../harness/gguf/types.js";
import { gguf } from "../../harness/gguf/write.js";
import { writeFileAtomic } from "../../harness/io/atomic-write.js";

/** One planted change to a model: its tensors (edited in place on a private copy) and/or hyper-parameters. */
export interface ModelFault {
  readonly name: string;
  readonly tensors?: (tensors: readonly FloatTensor[]) => void;
  /** Hyper-parameters to overwrite, keys without the architecture prefix (e.g. `rope.freq_base`). */
  readonly hyperparameters?: Readonly<Record<string, GgufValue>>;
}

function copyModel(model: FixtureModel): FixtureModel {
  return { ...model, tensors: model.tensors.map((t) => ({ ...t, values: Float32Array.from(t.values) })) };
}

/** The clean tiny-random model with `fault` applied (the clean one is built afresh: no shared state between faults). */
export function faultedTinyRandom(fault: ModelFault): FixtureModel {
  const model = copyModel(buildTinyRandom("none"));
  fault.tensors?.(model.tensors);
  const overrides = fault.hyperparameters ?? {};
  for (const key of Object.keys(overrides)) {
    if (!model.hyperparameters.some(([k]) => k === key)) throw new Error(`tiny-random has no hyper-parameter ${key}`);
  }
  const hyperparameters = model.hyperparameters.map(([key, value]) => [key, overrides[key] ?? value] as const);
  return { ...model, name: `tiny-random-FAKE-${fault.name}`, hyperparameters };
}

/** Writes the faulted model as an F32 GGUF into `directory`; returns its path. */
export async function writeFaultedTinyRandom(fault: ModelFault, directory: string): Promise<string> {
  const path = join(directory, `tiny-random-FAKE-${fault.name.replace(/[^A-Za-z0-9._-]/g, "_")}.F32.gguf`);
  await writeFileAtomic(path, encodeFixtureGguf(faultedTinyRandom(fault), GgmlType.F32));
  return path;
}

/** Gaussian noise of `relative` × the tensor's RMS on every value of each named tensor (seeded: reproducible). */
export function weightNoise(names: readonly string[], relative: number, seed = 14): ModelFault["tensors"] {
  return (tensors) => {
    const random = new SeededRandom(seed);
    for (const name of names) {
      const tensor = tensorNamed(tensors, name);
      const rms = Math.sqrt(tensor.values.reduce((sum, v) => sum + v * v, 0) / tensor.values.length);
      for (let i = 0; i < tensor.values.length; i++) tensor.values[i] += random.normal(relative * rms);
    }
  };
}

export function scaleTensor(name: string, factor: number): ModelFault["tensors"] {
  return (tensors) => { tensorNamed(tensors, name).values.forEach((v, i, values) => { values[i] = v * factor; }); };
}

/** What a forward that skips a tensor computes: norm weights read as 1, anything else as 0. */
export function ablateTensor(name: string): ModelFault["tensors"] {
  return (tensors) => { tensorNamed(tensors, name).values.fill(name.endsWith("_norm.weight") ? 1 : 0); };
}

/** Every norm weight set to 1: a forward that ignores norm weights. */
export const dropNormWeights: ModelFault["tensors"] = (tensors) => {
  for (const tensor of tensors) if (tensor.name.endsWith("_norm.weight")) tensor.values.fill(1);
};

/** Zeroes one attention head's slice of the output projection (its contribution to the residual). */
export function zeroHead(layer: number, head: number): ModelFault["tensors"] {
  return (tensors) => {
    const output = tensorNamed(tensors, `blk.${layer}.attn_output.weight`);
    const [inputs, outputs] = output.dims;
    const headDim = inputs / TINY_RANDOM_SHAPE.headCount;
    for (let o = 0; o < outputs; o++) output.values.fill(0, o * inputs + head * headDim, o * inputs + (head + 1) * headDim);
  };
}

/** Swaps the embedding rows of two token ids (a gather that reads the wrong row for them). */
export function swapTokenRows(tensorName: string, a: number, b: number): ModelFault["tensors"] {
  return (tensors) => {
    const tensor = tensorNamed(tensors, tensorName);
    const width = tensor.dims[0];
    const rowA = tensor.values.slice(a * width, (a + 1) * width);
    tensor.values.copyWithin(a * width, b * width, (b + 1) * width);
    tensor.values.set(rowA, b * width);
  };
}

export const ropeBase = (base: number): ModelFault["hyperparameters"] => ({ "rope.freq_base": gguf.f32(base) });
export const rmsEpsilon = (epsilon: number): ModelFault["hyperparameters"] => ({ "attention.layer_norm_rms_epsilon": gguf.f32(epsilon) });
