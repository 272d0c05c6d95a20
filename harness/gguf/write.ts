import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION, GgufValueType, tensorByteSize } from "./types.js";
import type { GgmlType, GgufScalarType, GgufValue } from "./types.js";

export interface TensorToWrite {
  readonly name: string;
  /** ggml order: dims[0] is the contiguous (row) dimension. */
  readonly dims: readonly number[];
  readonly type: GgmlType;
  /** Already encoded bytes (F32 little-endian, or quantized blocks). */
  readonly data: Uint8Array;
}

/** Growable little-endian byte sink. */
class ByteSink {
  private buffer = new Uint8Array(1 << 16);
  private view = new DataView(this.buffer.buffer);
  length = 0;

  private reserve(extra: number): void {
    if (this.length + extra <= this.buffer.length) return;
    let capacity = this.buffer.length * 2;
    while (capacity < this.length + extra) capacity *= 2;
    const grown = new Uint8Array(capacity);
    grown.set(this.buffer.subarray(0, this.length));
    this.buffer = grown;
    this.view = new DataView(grown.buffer);
  }

  u8(v: number): void { this.reserve(1); this.view.setUint8(this.length, v); this.length += 1; }
  i8(v: number): void { this.reserve(1); this.view.setInt8(this.length, v); this.length += 1; }
  u16(v: number): void { this.reserve(2); this.view.setUint16(this.length, v, true); this.length += 2; }
  i16(v: number): void { this.reserve(2); this.view.setInt16(this.length, v, true); this.length += 2; }
  u32(v: number): void { this.reserve(4); this.view.setUint32(this.length, v, true); this.length += 4; }
  i32(v: number): void { this.reserve(4); this.view.setInt32(this.length, v, true); this.length += 4; }
  f32(v: number): void { this.reserve(4); this.view.setFloat32(this.length, v, true); this.length += 4; }
  f64(v: number): void { this.reserve(8); this.view.setFloat64(this.length, v, true); this.length += 8; }
  u64(v: bigint | number): void { this.reserve(8); this.view.setBigUint64(this.length, BigInt(v), true); this.length += 8; }
  i64(v: bigint): void { this.reserve(8); this.view.setBigInt64(this.length, v, true); this.length += 8; }
  bytes(b: Uint8Array): void { this.reserve(b.length); this.buffer.set(b, this.length); this.length += b.length; }
  string(s: string): void { const b = new TextEncoder().encode(s); this.u64(b.length); this.bytes(b); }
  padTo(alignment: number): void { while (this.length % alignment !== 0) this.u8(0); }
  result(): Uint8Array { return this.buffer.slice(0, this.length); }
}

function writeScalar(sink: ByteSink, type: GgufScalarType, value: number | bigint | boolean | string): void {
  switch (type) {
    case GgufValueType.UINT8: sink.u8(value as number); break;
    case GgufValueType.INT8: sink.i8(value as number); break;
    case GgufValueType.UINT16: sink.u16(value as number); break;
    case GgufValueType.INT16: sink.i16(value as number); break;
    case GgufValueType.UINT32: sink.u32(value as number); break;
    case GgufValueType.INT32: sink.i32(value as number); break;
    case GgufValueType.FLOAT32: sink.f32(value as number); break;
    case GgufValueType.FLOAT64: sink.f64(value as number); break;
    case GgufValueType.UINT64: sink.u64(value as bigint); break;
    case GgufValueType.INT64: sink.i64(value as bigint); break;
    case GgufValueType.BOOL: sink.u8(value ? 1 : 0); break;
    case GgufValueType.STRING: sink.string(value as string); break;
  }
}

/** A tensor's table entry without its data: what a header-only file describes. */
export type TensorShape = Omit<TensorToWrite, "data">;

function alignmentOf(metadata: ReadonlyArray<readonly [string, GgufValue]>): number {
  const alignmentEntry = metadata.find(([key]) => key === "general.alignment");
  return alignmentEntry === undefined ? GGUF_DEFAULT_ALIGNMENT : Number(alignmentEntry[1].value);
}

/** Header, metadata and tensor table, padded to the alignment: everything before the tensor data. */
function writeHeader(sink: ByteSink, metadata: ReadonlyArray<readonly [string, GgufValue]>, tensors: readonly TensorShape[], alignment: number): void {
  sink.u32(GGUF_MAGIC);
  sink.u32(GGUF_VERSION);
  sink.u64(tensors.length);
  sink.u64(metadata.length);
  for (const [key, entry] of metadata) {
    sink.string(key);
    sink.u32(entry.type);
    if (entry.type === GgufValueType.ARRAY) {
      sink.u32(entry.itemType);
      sink.u64(entry.value.length);
      for (const item of entry.value) writeScalar(sink, entry.itemType, item);
    } else {
      writeScalar(sink, entry.type, entry.value);
    }
  }
  let offset = 0;
  for (const tensor of tensors) {
    sink.string(tensor.name);
    sink.u32(tensor.dims.length);
    for (const dim of tensor.dims) sink.u64(dim);
    sink.u32(tensor.type);
    sink.u64(offset);
    offset += Math.ceil(tensorByteSize(tensor.type, tensor.dims.reduce((a, b) => a * b, 1)) / alignment) * alignment;
  }
  sink.padTo(alignment);
}

/**
 * Serialises a GGUF v3 file: header, metadata, tensor infos, then tensor data, each tensor
 * starting on `general.alignment` (32 unless the metadata says otherwise).
 */
export function encodeGguf(metadata: ReadonlyArray<readonly [string, GgufValue]>, tensors: readonly TensorToWrite[]): Uint8Array {
  const alignment = alignmentOf(metadata);
  for (const tensor of tensors) {
    const expected = tensorByteSize(tensor.type, tensor.dims.reduce((a, b) => a * b, 1));
    if (expected !== tensor.data.length) {
      throw new Error(`tensor ${tensor.name}: ${tensor.data.length} bytes given, ${expected} expected for its dims and type`);
    }
  }
  const sink = new ByteSink();
  writeHeader(sink, metadata, tensors, alignment);
  for (const tensor of tensors) {
    sink.bytes(tensor.data);
    sink.padTo(alignment);
  }
  return sink.result();
}

/**
 * A GGUF file's header alone (metadata and tensor table, no tensor data): a model's shapes and
 * encodings at the cost of kilobytes, for arithmetic on models too large to build or download.
 * Only `readGgufHeader` reads it; llama.cpp and `readGguf` reject it as truncated, as they should.
 */
export function encodeGgufHeader(metadata: ReadonlyArray<readonly [string, GgufValue]>, tensors: readonly TensorShape[]): Uint8Array {
  const sink = new ByteSink();
  writeHeader(sink, metadata, tensors, alignmentOf(metadata));
  return sink.result();
}

/** Shorthands for typed metadata values. */
export const gguf = {
  u32: (value: number): GgufValue => ({ type: GgufValueType.UINT32, value }),
  i32: (value: number): GgufValue => ({ type: GgufValueType.INT32, value }),
  f32: (value: number): GgufValue => ({ type: GgufValueType.FLOAT32, value }),
  bool: (value: boolean): GgufValue => ({ type: GgufValueType.BOOL, value }),
  str: (value: string): GgufValue => ({ type: GgufValueType.STRING, value }),
  array: (itemType: GgufScalarType, value: ReadonlyArray<number | bigint | boolean | string>): GgufValue =>
    ({ type: GgufValueType.ARRAY, itemType, value }),
};
