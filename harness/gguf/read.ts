import { closeSync, fstatSync, openSync, readSync, statSync } from "node:fs";
import { BenchError } from "../errors.js";
import {
  GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GgufValueType, ggmlTypeName, GGML_BLOCK, isKnownGgmlType, tensorByteSize,
} from "./types.js";
import type { GgufFile, GgufScalarType, GgufTensorInfo, GgufValue } from "./types.js";

/** Upper bounds that stop a corrupt count from allocating the machine away. */
const MAX_STRING_BYTES = 1 << 24;
const MAX_ARRAY_ITEMS = 1 << 26;
const MAX_TENSORS = 1 << 20;
const MAX_DIMS = 4;

/** Reads a GGUF header lazily from disk: only the bytes the header needs, so a 50 GB model costs kilobytes. */
class HeaderCursor {
  private chunk = Buffer.alloc(0);
  private chunkStart = 0;
  position = 0;

  constructor(private readonly fd: number, readonly fileSize: number, private readonly path: string) {}

  private need(bytes: number, what: string): void {
    if (this.position + bytes > this.fileSize) {
      throw new BenchError(`file is truncated: ${what} at byte ${this.position} runs past the end (${this.fileSize} bytes)`, {
        file: this.path, fix: "re-create or re-download the model file",
      });
    }
    const chunkEnd = this.chunkStart + this.chunk.length;
    if (this.position >= this.chunkStart && this.position + bytes <= chunkEnd) return;
    const length = Math.min(Math.max(bytes, 1 << 20), this.fileSize - this.position);
    this.chunk = Buffer.alloc(length);
    readSync(this.fd, this.chunk, 0, length, this.position);
    this.chunkStart = this.position;
  }

  /** Makes `bytes` available and returns their index in `chunk` (read `chunk` only after calling). */
  private take(bytes: number, what: string): number {
    this.need(bytes, what);
    const at = this.position - this.chunkStart;
    this.position += bytes;
    return at;
  }

  u8(what: string): number { const at = this.take(1, what); return this.chunk.readUInt8(at); }
  i8(what: string): number { const at = this.take(1, what); return this.chunk.readInt8(at); }
  u16(what: string): number { const at = this.take(2, what); return this.chunk.readUInt16LE(at); }
  i16(what: string): number { const at = this.take(2, what); return this.chunk.readInt16LE(at); }
  u32(what: string): number { const at = this.take(4, what); return this.chunk.readUInt32LE(at); }
  i32(what: string): number { const at = this.take(4, what); return this.chunk.readInt32LE(at); }
  f32(what: string): number { const at = this.take(4, what); return this.chunk.readFloatLE(at); }
  f64(what: string): number { const at = this.take(8, what); return this.chunk.readDoubleLE(at); }
  u64(what: string): bigint { const at = this.take(8, what); return this.chunk.readBigUInt64LE(at); }
  i64(what: string): bigint { const at = this.take(8, what); return this.chunk.readBigInt64LE(at); }

  /** A u64 that must fit a JS number below `limit`. */
  count(what: string, limit: number): number {
    const value = this.u64(what);
    if (value > BigInt(limit)) {
      throw new BenchError(`${what} is ${value}, more than the sane limit ${limit}: the file is corrupt`, {
        file: this.path, fix: "re-create or re-download the model file",
      });
    }
    return Number(value);
  }

  string(what: string): string {
    const length = this.count(`${what} length`, MAX_STRING_BYTES);
    const at = this.take(length, what);
    return this.chunk.toString("utf8", at, at + length);
  }
}

function readScalar(cursor: HeaderCursor, type: number, what: string, path: string): number | bigint | boolean | string {
  switch (type) {
    case GgufValueType.UINT8: return cursor.u8(what);
    case GgufValueType.INT8: return cursor.i8(what);
    case GgufValueType.UINT16: return cursor.u16(what);
    case GgufValueType.INT16: return cursor.i16(what);
    case GgufValueType.UINT32: return cursor.u32(what);
    case GgufValueType.INT32: return cursor.i32(what);
    case GgufValueType.FLOAT32: return cursor.f32(what);
    case GgufValueType.FLOAT64: return cursor.f64(what);
    case GgufValueType.UINT64: return cursor.u64(what);
    case GgufValueType.INT64: return cursor.i64(what);
    case GgufValueType.BOOL: return cursor.u8(what) !== 0;
    case GgufValueType.STRING: return cursor.string(what);
    default:
      throw new BenchError(`unknown metadata value type ${type} in ${what}`, { file: path, fix: "the file is corrupt or from a newer GGUF version" });
  }
}

function readValue(cursor: HeaderCursor, key: string, path: string): GgufValue {
  const type = cursor.u32(`type of ${key}`);
  if (type === GgufValueType.ARRAY) {
    const itemType = cursor.u32(`item type of ${key}`);
    if (itemType === GgufValueType.ARRAY || itemType > GgufValueType.FLOAT64) {
      throw new BenchError(`unsupported array item type ${itemType} in metadata key ${key}`, { file: path, fix: "the file is corrupt" });
    }
    const length = cursor.count(`length of ${key}`, MAX_ARRAY_ITEMS);
    const value: Array<number | bigint | boolean | string> = new Array(length);
    for (let i = 0; i < length; i++) value[i] = readScalar(cursor, itemType, `${key}[${i}]`, path);
    return { type: GgufValueType.ARRAY, itemType: itemType as GgufScalarType, value };
  }
  // The union is keyed by type; readScalar returns the matching JS type for each code.
  return { type, value: readScalar(cursor, type, key, path) } as GgufValue;
}

/** Parsed headers kept for files read again (most recently read last), at most this many. */
const KEPT_HEADERS = 8;
/**
 * A file changed less than this long ago is parsed every time: a write within the same tick of the
 * kernel's coarse file clock could leave size, times and inode as they were (git's "racy" files).
 */
const SETTLED_MS = 2000;
const parsedHeaders = new Map<string, { readonly version: string; readonly file: GgufFile }>();

/**
 * Parses and validates a GGUF file's header and tensor table without loading tensor data.
 * Every structural problem (truncation, bad magic, unknown tensor types, data past the end)
 * becomes a BenchError naming the file. A file read again unchanged (same size, times and inode,
 * settled) is not parsed again: a run opens its model's header several times (validation, the
 * tokenizer fingerprint, the vocabulary size), and at a 152k vocabulary each parse is ~0.1 s.
 */
export function readGguf(path: string): GgufFile {
  return readCached(path, "whole");
}

/**
 * The header and tensor table of a GGUF file whose tensor data may be absent (a header-only file,
 * encodeGgufHeader): everything readGguf checks except that the data fits in the file. For
 * arithmetic on shapes only: never hand such a file to anything that reads tensors.
 */
export function readGgufHeader(path: string): GgufFile {
  return readCached(path, "header");
}

type Extent = "whole" | "header";

function readCached(path: string, extent: Extent): GgufFile {
  const stat = statSync(path, { throwIfNoEntry: false });
  const version = stat === undefined ? undefined : `${extent}\0${stat.size}\0${stat.mtimeMs}\0${stat.ctimeMs}\0${stat.ino}`;
  const kept = parsedHeaders.get(path);
  if (kept !== undefined && kept.version === version) return kept.file;
  const file = parseGguf(path, extent);
  parsedHeaders.delete(path);
  if (stat !== undefined && version !== undefined && Date.now() - Math.max(stat.mtimeMs, stat.ctimeMs) > SETTLED_MS) {
    parsedHeaders.set(path, { version, file });
    if (parsedHeaders.size > KEPT_HEADERS) parsedHeaders.delete(parsedHeaders.keys().next().value!);
  }
  return file;
}

function parseGguf(path: string, extent: Extent): GgufFile {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    throw new BenchError(`cannot open model file (${(error as NodeJS.ErrnoException).code ?? String(error)})`, {
      file: path, fix: "check the path; `bench fixtures` builds the built-in models",
    });
  }
  try {
    const fileSize = fstatSync(fd).size;
    const cursor = new HeaderCursor(fd, fileSize, path);
    const magic = cursor.u32("magic");
    if (magic !== GGUF_MAGIC) {
      throw new BenchError(`bad magic 0x${magic.toString(16).padStart(8, "0")}: not a GGUF file`, { file: path, fix: "pass a .gguf model file" });
    }
    const version = cursor.u32("version");
    if (version !== 2 && version !== 3) {
      throw new BenchError(`unsupported GGUF version ${version}`, { file: path, field: "version", fix: "convert the model to GGUF v3" });
    }
    const tensorCount = cursor.count("tensor count", MAX_TENSORS);
    const metadataCount = cursor.count("metadata count", MAX_ARRAY_ITEMS);
    const metadata = new Map<string, GgufValue>();
    for (let i = 0; i < metadataCount; i++) {
      const key = cursor.string(`metadata key #${i}`);
      if (metadata.has(key)) throw new BenchError(`duplicate metadata key`, { file: path, field: key, fix: "the file is corrupt" });
      metadata.set(key, readValue(cursor, key, path));
    }
    const alignmentValue = metadata.get("general.alignment");
    const alignment = alignmentValue === undefined ? GGUF_DEFAULT_ALIGNMENT : Number(alignmentValue.value);
    if (!Number.isInteger(alignment) || alignment <= 0 || (alignment & (alignment - 1)) !== 0) {
      throw new BenchError(`alignment ${alignment} is not a power of two`, { file: path, field: "general.alignment", fix: "the file is corrupt" });
    }

    const tensors: GgufTensorInfo[] = [];
    for (let i = 0; i < tensorCount; i++) {
      const name = cursor.string(`name of tensor #${i}`);
      const dimCount = cursor.u32(`dim count of ${name}`);
      if (dimCount < 1 || dimCount > MAX_DIMS) {
        throw new BenchError(`tensor has ${dimCount} dims (1..${MAX_DIMS} allowed)`, { file: path, field: name, fix: "the file is corrupt" });
      }
      const dims: number[] = [];
      for (let d = 0; d < dimCount; d++) dims.push(cursor.count(`dim ${d} of ${name}`, Number.MAX_SAFE_INTEGER));
      const typeId = cursor.u32(`type of ${name}`);
      if (!isKnownGgmlType(typeId)) {
        throw new BenchError(`unknown or unsupported tensor type id ${typeId}`, {
          file: path, field: name, fix: `use one of ${Object.keys(GGML_BLOCK).map((id) => ggmlTypeName(Number(id))).join(", ")}`,
        });
      }
      const offset = cursor.count(`offset of ${name}`, Number.MAX_SAFE_INTEGER);
      if (offset % alignment !== 0) {
        throw new BenchError(`tensor offset ${offset} is not aligned to ${alignment}`, { file: path, field: name, fix: "the file is corrupt" });
      }
      if (dims[0] % GGML_BLOCK[typeId].elements !== 0) {
        throw new BenchError(`row length ${dims[0]} is not a multiple of the ${ggmlTypeName(typeId)} block (${GGML_BLOCK[typeId].elements})`, {
          file: path, field: name, fix: "quantize rows whose length is a whole number of blocks",
        });
      }
      tensors.push({ name, dims, type: typeId, offset });
    }
    const dataOffset = Math.ceil(cursor.position / alignment) * alignment;
    for (const tensor of extent === "whole" ? tensors : []) {
      const end = dataOffset + tensor.offset + tensorByteSize(tensor.type, tensor.dims.reduce((a, b) => a * b, 1));
      if (end > fileSize) {
        throw new BenchError(`tensor data ends at byte ${end}, past the end of the file (${fileSize} bytes)`, {
          file: path, field: tensor.name, fix: "the file is truncated: re-create or re-download it",
        });
      }
    }
    return { version, metadata, tensors, alignment, dataOffset, fileSize };
  } finally {
    closeSync(fd);
  }
}
