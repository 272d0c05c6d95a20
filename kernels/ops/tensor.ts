import { GgmlType } from "../../harness/gguf/types.js";
import { f16ToF32, f32ToF16 } from "../../harness/quant/fp16.js";
import { codecFor } from "../../harness/quant/registry.js";

/**
 * Tensors as the kernel ops exchange them (docs/kernel-ops.md, "Conventions"): a ggml dtype, a
 * shape outermost first, contiguous row-major bytes. The same description travels to a plugin
 * (ABI v2 descriptors) and to a runner (the `kernel` method), so one shape serves both.
 */
export const DTYPES = {
  F32: { id: 0, blockElements: 1, blockBytes: 4 },
  F16: { id: 1, blockElements: 1, blockBytes: 2 },
  Q8_0: { id: 8, blockElements: 32, blockBytes: 34 },
  Q4_K: { id: 12, blockElements: 256, blockBytes: 144 },
  Q5_K: { id: 13, blockElements: 256, blockBytes: 176 },
  Q6_K: { id: 14, blockElements: 256, blockBytes: 210 },
  I32: { id: 26, blockElements: 1, blockBytes: 4 },
  BF16: { id: 30, blockElements: 1, blockBytes: 2 },
} as const;

export type Dtype = keyof typeof DTYPES;
export const QUANTIZED_DTYPES = ["Q8_0", "Q4_K", "Q5_K", "Q6_K"] as const;
export type QuantizedDtype = (typeof QUANTIZED_DTYPES)[number];

export function isDtype(name: string): name is Dtype {
  return Object.prototype.hasOwnProperty.call(DTYPES, name);
}

export interface KernelTensor {
  readonly name: string;
  readonly dtype: Dtype;
  /** Elements, outermost first. */
  readonly shape: readonly number[];
  /** Contiguous little-endian bytes; for a block dtype the innermost dimension is whole blocks. */
  readonly data: Uint8Array;
}

/** Bytes a contiguous tensor of `shape` takes; the innermost dimension of a block dtype must be whole blocks. */
export function tensorBytes(dtype: Dtype, shape: readonly number[]): number {
  const { blockElements, blockBytes } = DTYPES[dtype];
  const inner = shape.length === 0 ? 1 : shape[shape.length - 1];
  if (inner % blockElements !== 0) throw new Error(`a ${dtype} row of ${inner} values is not whole blocks of ${blockElements}`);
  return (shape.reduce((a, b) => a * b, 1) / blockElements) * blockBytes;
}

export function elementCount(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function float32Tensor(name: string, shape: readonly number[], values: Float32Array): KernelTensor {
  return { name, dtype: "F32", shape, data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength) };
}

export function int32Tensor(name: string, shape: readonly number[], values: Int32Array): KernelTensor {
  return { name, dtype: "I32", shape, data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength) };
}

/** float32 -> bf16 bits, round to nearest even (NaN kept quiet). */
export function f32ToBf16(value: number): number {
  const bits = new Uint32Array(Float32Array.of(value).buffer)[0];
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x40) & 0xffff;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

export function bf16ToF32(bits: number): number {
  return new Float32Array(Uint32Array.of((bits & 0xffff) << 16).buffer)[0];
}

/** Stores float32 values in a dtype a table or cache may have: exact for F32, rounded for F16/BF16, quantized by the harness's codecs. */
export function encodeValues(dtype: Dtype, values: Float32Array): Uint8Array {
  if (dtype === "F16") return new Uint8Array(Uint16Array.from(values, (v) => f32ToF16(v)).buffer);
  if (dtype === "BF16") return new Uint8Array(Uint16Array.from(values, (v) => f32ToBf16(v)).buffer);
  if (dtype === "F32" || (QUANTIZED_DTYPES as readonly string[]).includes(dtype)) return codecFor(GgmlType[dtype as "F32" | QuantizedDtype]).encode(values);
  throw new Error(`cannot encode values as ${dtype}`);
}

/** Decodes stored values to float32 exactly as ggml does (dequantize_row_*, fp16/bf16 widening). */
export function decodeValues(dtype: Dtype, data: Uint8Array): Float32Array {
  if (dtype === "F16" || dtype === "BF16") {
    const halves = new Uint16Array(data.slice().buffer);
    return Float32Array.from(halves, dtype === "F16" ? f16ToF32 : bf16ToF32);
  }
  if (dtype === "F32" || (QUANTIZED_DTYPES as readonly string[]).includes(dtype)) return codecFor(GgmlType[dtype as "F32" | QuantizedDtype]).decode(data);
  throw new Error(`cannot decode ${dtype} values`);
}

/**
 * Sentinels an output is pre-filled with: quiet NaNs with a payload no arithmetic produces, and an
 * id no op returns. An element still holding one was never written.
 */
export const SENTINEL = { F32: 0x7fc0dead, BF16: 0x7fc1, I32: -0x5ead } as const;
export type OutputDtype = keyof typeof SENTINEL;

export function sentinelFilled(name: string, dtype: OutputDtype, shape: readonly number[]): KernelTensor {
  const n = elementCount(shape);
  const data = dtype === "BF16" ? new Uint8Array(new Uint16Array(n).fill(SENTINEL.BF16).buffer)
    : dtype === "F32" ? new Uint8Array(new Uint32Array(n).fill(SENTINEL.F32).buffer)
    : new Uint8Array(new Int32Array(n).fill(SENTINEL.I32).buffer);
  return { name, dtype, shape, data };
}

/** The raw element bits of an output (for sentinel and bit-exact checks). */
export function outputBits(dtype: OutputDtype, data: Uint8Array): Uint32Array | Uint16Array | Int32Array {
  const copy = data.slice().buffer;
  return dtype === "BF16" ? new Uint16Array(copy) : dtype === "F32" ? new Uint32Array(copy) : new Int32Array(copy);
}

/** An output's values as numbers (bf16 widened exactly). */
export function outputValues(dtype: OutputDtype, data: Uint8Array): Float64Array {
  const copy = data.slice().buffer;
  if (dtype === "F32") return Float64Array.from(new Float32Array(copy));
  if (dtype === "BF16") return Float64Array.from(new Uint16Array(copy), bf16ToF32);
  return Float64Array.from(new Int32Array(copy));
}

/** A multi-index for messages: `[3,17]` of element 3·N+17 of a [R, N] tensor. */
export function multiIndex(shape: readonly number[], flat: number): string {
  const index: number[] = [];
  for (let d = shape.length - 1; d >= 0; d--) {
    index.unshift(flat % shape[d]);
    flat = Math.floor(flat / shape[d]);
  }
  return `[${index.join(",")}]`;
}
