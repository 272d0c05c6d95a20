/** GGUF container facts (GGUF v3, as read by llama.cpp's gguf.cpp). */

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** Metadata value types, with ggml's numeric codes. */
export enum GgufValueType {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
}

export type GgufScalarType = Exclude<GgufValueType, GgufValueType.ARRAY>;

/** A typed metadata value: the type is explicit so a writer never has to guess u32 versus i32. */
export type GgufValue =
  | { type: GgufValueType.UINT8 | GgufValueType.INT8 | GgufValueType.UINT16 | GgufValueType.INT16; value: number }
  | { type: GgufValueType.UINT32 | GgufValueType.INT32 | GgufValueType.FLOAT32 | GgufValueType.FLOAT64; value: number }
  | { type: GgufValueType.UINT64 | GgufValueType.INT64; value: bigint }
  | { type: GgufValueType.BOOL; value: boolean }
  | { type: GgufValueType.STRING; value: string }
  | { type: GgufValueType.ARRAY; itemType: GgufScalarType; value: ReadonlyArray<number | bigint | boolean | string> };

/** Tensor encodings the harness writes and decodes, with ggml's type ids. */
export enum GgmlType {
  F32 = 0,
  F16 = 1,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
}

/** Elements per block and bytes per block of each encoding (ggml-common.h block structs). */
export const GGML_BLOCK: Readonly<Record<GgmlType, { elements: number; bytes: number }>> = {
  [GgmlType.F32]: { elements: 1, bytes: 4 },
  [GgmlType.F16]: { elements: 1, bytes: 2 },
  [GgmlType.Q8_0]: { elements: 32, bytes: 34 },
  [GgmlType.Q4_K]: { elements: 256, bytes: 144 },
  [GgmlType.Q5_K]: { elements: 256, bytes: 176 },
  [GgmlType.Q6_K]: { elements: 256, bytes: 210 },
};

export function isKnownGgmlType(id: number): id is GgmlType {
  return Object.prototype.hasOwnProperty.call(GGML_BLOCK, id);
}

export function ggmlTypeName(type: GgmlType): string {
  return GgmlType[type];
}

/** Bytes taken by a tensor of `elements` values in `type`; rows must hold whole blocks. */
export function tensorByteSize(type: GgmlType, elements: number): number {
  const block = GGML_BLOCK[type];
  return (elements / block.elements) * block.bytes;
}

export interface GgufTensorInfo {
  readonly name: string;
  /** ggml order: dims[0] is the contiguous (row) dimension. */
  readonly dims: readonly number[];
  readonly type: GgmlType;
  /** Offset from the start of the tensor data section. */
  readonly offset: number;
}

export interface GgufFile {
  readonly version: number;
  readonly metadata: ReadonlyMap<string, GgufValue>;
  readonly tensors: readonly GgufTensorInfo[];
  readonly alignment: number;
  /** Absolute file offset of the tensor data section. */
  readonly dataOffset: number;
  readonly fileSize: number;
}
