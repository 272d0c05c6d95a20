import { BenchError } from "../errors.js";
import { tensorByteSize } from "../gguf/types.js";
import type { GgmlType, GgufFile, GgufTensorInfo } from "../gguf/types.js";

/**
 * What a residency policy decides per tensor: the gather table, the logits head, dense matmul
 * weights, stacked expert towers, and small tensors (norms, biases, convolution kernels) that no
 * engine packs or twins.
 */
export type TensorClass = "embedding" | "output_head" | "matmul" | "expert" | "small";
export const TENSOR_CLASSES: readonly TensorClass[] = ["embedding", "output_head", "matmul", "expert", "small"];

export interface ClassifiedTensor {
  readonly name: string;
  readonly class: TensorClass;
  readonly type: GgmlType;
  /** Row length (ggml dims[0]): the K of a matmul weight. */
  readonly rowLength: number;
  /** Rows: every dim past the first multiplied (N, times experts for a tower). */
  readonly rows: number;
  readonly elements: number;
  readonly bytes: number;
}

/** One attention layer's cache row: K and V floats per cell, and the window when it slides. */
export interface AttentionLayer {
  readonly index: number;
  readonly heads: number;
  readonly keyValueFloats: number;
  readonly slidingWindow: number | undefined;
}

/** The shapes a memory budget needs, all read from the header. */
export interface ModelShape {
  readonly architecture: string;
  readonly embeddingLength: number;
  readonly vocabulary: number;
  /** Query floats per token in the widest attention layer (heads × key length). */
  readonly queryFloats: number;
  readonly tensors: readonly ClassifiedTensor[];
  /** True when the file has no output.weight: the head is the embedding table. */
  readonly tiedHead: boolean;
  readonly attentionLayers: readonly AttentionLayer[];
  /** Recurrent (SSM / gated delta net) layers and each one's state floats per slot: convolution state plus SSM state. */
  readonly recurrentLayers: readonly { readonly index: number; readonly stateFloats: number }[];
}

export function classifyTensor(name: string, dims: readonly number[]): TensorClass {
  if (name === "token_embd.weight") return "embedding";
  if (name === "output.weight") return "output_head";
  if (/_exps\.weight$/.test(name)) return "expert";
  // A matrix whose rows hold whole 32-value blocks is a projection; the rest (norms, convolution
  // kernels, per-head gates and scalars) stay as they are in every engine.
  return dims.length >= 2 && dims[0] >= 32 && dims.slice(1).reduce((a, b) => a * b, 1) >= 32 && !/_norm|conv1d|ssm_a$|ssm_d$/.test(name) ? "matmul" : "small";
}

function classified(tensor: GgufTensorInfo): ClassifiedTensor {
  const elements = tensor.dims.reduce((a, b) => a * b, 1);
  return {
    name: tensor.name, class: classifyTensor(tensor.name, tensor.dims), type: tensor.type,
    rowLength: tensor.dims[0], rows: elements / tensor.dims[0], elements, bytes: tensorByteSize(tensor.type, elements),
  };
}

function metadataNumber(file: GgufFile, key: string): number | undefined {
  const value = file.metadata.get(key)?.value;
  return typeof value === "number" || typeof value === "bigint" ? Number(value) : undefined;
}

/** A per-layer key (an array) or one value for every layer. */
function perLayer(file: GgufFile, key: string, layer: number): number | boolean | undefined {
  const entry = file.metadata.get(key);
  if (entry === undefined) return undefined;
  if (Array.isArray(entry.value)) {
    const item: unknown = entry.value[layer];
    return typeof item === "boolean" ? item : Number(item);
  }
  return typeof entry.value === "boolean" ? entry.value : Number(entry.value);
}

function required(file: GgufFile, key: string, path: string): number {
  const value = metadataNumber(file, key);
  if (value === undefined || !(value > 0)) throw new BenchError("missing or not positive", { file: path, field: key, fix: "a budget needs this hyperparameter in the GGUF metadata" });
  return value;
}

/**
 * Reads a model's budget shapes from its header: layers are told apart by the tensors they hold
 * (blk.N.attn_k is an attention layer, blk.N.ssm_conv1d a recurrent one), so hybrid models need
 * no per-architecture table.
 */
export function modelShape(file: GgufFile, path: string): ModelShape {
  const arch = String(file.metadata.get("general.architecture")?.value ?? "");
  if (arch === "") throw new BenchError("general.architecture is missing", { file: path, field: "general.architecture", fix: "a budget reads hyperparameters under the architecture's prefix" });
  const embeddingLength = required(file, `${arch}.embedding_length`, path);
  const blocks = required(file, `${arch}.block_count`, path);
  const byName = new Map(file.tensors.map((tensor) => [tensor.name, tensor]));
  const tokens = file.metadata.get("tokenizer.ggml.tokens")?.value;
  const vocabulary = metadataNumber(file, `${arch}.vocab_size`) ?? (Array.isArray(tokens) ? tokens.length : byName.get("token_embd.weight")?.dims[1] ?? 0);
  const window = metadataNumber(file, `${arch}.attention.sliding_window`);
  const attentionLayers: AttentionLayer[] = [];
  const recurrentLayers: { index: number; stateFloats: number }[] = [];
  let queryFloats = 0;
  for (let layer = 0; layer < blocks; layer++) {
    const key = byName.get(`blk.${layer}.attn_k.weight`);
    if (key !== undefined) {
      const value = byName.get(`blk.${layer}.attn_v.weight`) ?? key;
      const heads = Number(perLayer(file, `${arch}.attention.head_count`, layer) ?? 1);
      const sliding = perLayer(file, `${arch}.attention.sliding_window_pattern`, layer) === true;
      const keyLength = Number(perLayer(file, `${arch}.attention.${sliding ? "key_length_swa" : "key_length"}`, layer) ?? embeddingLength / heads);
      queryFloats = Math.max(queryFloats, heads * keyLength);
      attentionLayers.push({ index: layer, heads, keyValueFloats: key.dims[1] + value.dims[1], slidingWindow: sliding ? window : undefined });
    }
    const conv = byName.get(`blk.${layer}.ssm_conv1d.weight`);
    if (conv !== undefined) {
      const ssmFloats = required(file, `${arch}.ssm.state_size`, path) * required(file, `${arch}.ssm.inner_size`, path);
      recurrentLayers.push({ index: layer, stateFloats: (conv.dims[0] - 1) * conv.dims[1] + ssmFloats });
    }
  }
  return {
    architecture: arch, embeddingLength, vocabulary, queryFloats, tensors: file.tensors.map(classified),
    tiedHead: !byName.has("output.weight"), attentionLayers, recurrentLayers,
  };
}
