import type { GgufFloatTensor, GgufModel } from "./gguf-model.js";
import type { SafetensorsTensor } from "./safetensors.js";

/** What `bench fixtures export-hf` writes: transformers' config.json and its tensors, by their HF names. */
export interface HfModel {
  readonly config: Record<string, unknown>;
  readonly tensors: SafetensorsTensor[];
}

/** A ggml tensor under its HF name: the torch shape is the ggml dims reversed, the bytes the same. */
export function asTorch(name: string, tensor: GgufFloatTensor, values: Float32Array = tensor.values): SafetensorsTensor {
  return { name, shape: [...tensor.dims].reverse(), values };
}

/** Every value through `f` (norm offsets, A = −exp(A_log) inverted, ...). */
export function mapValues(values: Float32Array, f: (value: number) => number): Float32Array {
  return values.map(f);
}

/** Rows (of `rowLength` values) reordered: output row r is input row `sourceRow[r]`. */
export function permuteRows(values: Float32Array, rowLength: number, sourceRow: readonly number[]): Float32Array {
  const out = new Float32Array(values.length);
  sourceRow.forEach((source, row) => out.set(values.subarray(source * rowLength, (source + 1) * rowLength), row * rowLength));
  return out;
}

/** Columns reordered within every row: output column c is input column `sourceColumn[c]`. */
export function permuteColumns(values: Float32Array, rowLength: number, sourceColumn: readonly number[]): Float32Array {
  const out = new Float32Array(values.length);
  for (let row = 0; row < values.length / rowLength; row++) {
    for (let c = 0; c < rowLength; c++) out[row * rowLength + c] = values[row * rowLength + sourceColumn[c]];
  }
  return out;
}

/** The special-token ids and sizes every config carries, from the GGUF's tokenizer metadata. */
export function tokenizerConfig(model: GgufModel): Record<string, unknown> {
  const id = (key: string) => {
    const value = model.raw(`tokenizer.ggml.${key}`);
    return value === undefined ? null : Number(value.value);
  };
  return { bos_token_id: id("bos_token_id"), eos_token_id: id("eos_token_id"), pad_token_id: id("padding_token_id"), vocab_size: model.tensor("token_embd.weight").dims[1] };
}

/** The output head, or tied embeddings when the GGUF has none. */
export function outputHead(model: GgufModel, name = "lm_head.weight"): { tie_word_embeddings: boolean; tensors: SafetensorsTensor[] } {
  return model.has("output.weight")
    ? { tie_word_embeddings: false, tensors: [asTorch(name, model.tensor("output.weight"))] }
    : { tie_word_embeddings: true, tensors: [] };
}
