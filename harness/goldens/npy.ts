import { readFileSync } from "node:fs";
import { dump } from "npyjs";
import { BenchError } from "../errors.js";

/** The two encodings the goldens contract allows: `<i4` ids and `<f4` log-probs. */
export type NpyDtype = "<i4" | "<f4";

export interface NpyInt32 { readonly dtype: "<i4"; readonly shape: readonly number[]; readonly data: Int32Array }
export interface NpyFloat32 { readonly dtype: "<f4"; readonly shape: readonly number[]; readonly data: Float32Array }

/** Serialises a C-order little-endian .npy v1.0 array. */
export function encodeNpy(data: Int32Array | Float32Array, shape: readonly number[]): Uint8Array {
  const elements = shape.reduce((a, b) => a * b, 1);
  if (elements !== data.length) throw new Error(`npy: shape [${shape.join(", ")}] holds ${elements} values, ${data.length} given`);
  return new Uint8Array(dump(data, [...shape]));
}

const major = (bytes: Uint8Array): number => bytes[6];
const headerLength = (bytes: Uint8Array): number =>
  major(bytes) === 1 ? bytes[8] | (bytes[9] << 8) : bytes[8] | (bytes[9] << 8) | (bytes[10] << 16) | (bytes[11] << 24);

/**
 * Reads the .npy header ourselves before handing the bytes to npyjs, because the goldens contract
 * is strict where npyjs is lenient: exactly `descr`, C order, and the expected rank.
 */
function readHeader(bytes: Uint8Array, path: string): { descr: string; fortranOrder: boolean; shape: number[] } {
  const magic = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59];
  if (bytes.length < 10 || magic.some((b, i) => bytes[i] !== b)) {
    throw new BenchError("not a .npy file (bad magic)", { file: path, fix: "write the array with numpy.save" });
  }
  if (major(bytes) < 1 || major(bytes) > 3) {
    throw new BenchError(`unknown .npy format version ${major(bytes)}`, { file: path, fix: "write the array with numpy.save (format 1.0, 2.0 or 3.0)" });
  }
  const headerStart = major(bytes) === 1 ? 10 : 12;
  const header = Buffer.from(bytes.subarray(headerStart, headerStart + headerLength(bytes))).toString("latin1");
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order':\s*(True|False)/.exec(header)?.[1];
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (descr === undefined || fortran === undefined || shapeText === undefined) {
    throw new BenchError(`unreadable .npy header ${JSON.stringify(header.trim())}`, { file: path, fix: "write the array with numpy.save" });
  }
  const dims = shapeText.split(",").map((s) => s.trim()).filter((s) => s !== "");
  if (!dims.every((d) => /^\d{1,9}$/.test(d))) {
    throw new BenchError(`shape (${shapeText}) is not a tuple of whole numbers`, { file: path, field: "shape", fix: "write the array with numpy.save" });
  }
  const shape = dims.map(Number);
  return { descr, fortranOrder: fortran === "True", shape };
}

function readChecked(path: string, dtype: NpyDtype, rank: number): { shape: number[]; buffer: ArrayBuffer } {
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(readFileSync(path));
  } catch (error) {
    throw new BenchError(`cannot read (${(error as NodeJS.ErrnoException).code ?? String(error)})`, { file: path, fix: "make the goldens with `bench goldens make`" });
  }
  const header = readHeader(bytes, path);
  if (header.descr !== dtype) {
    const hint = header.descr.slice(1) === dtype.slice(1) ? "byte order is big-endian" : `dtype is ${header.descr}`;
    throw new BenchError(`${hint}, the goldens contract needs ${dtype}`, { file: path, field: "descr", fix: `save it as numpy.asarray(x, dtype="${dtype}")` });
  }
  if (header.fortranOrder) {
    throw new BenchError("array is in Fortran order", { file: path, field: "fortran_order", fix: "save numpy.ascontiguousarray(x)" });
  }
  if (header.shape.length !== rank) {
    throw new BenchError(`array has shape (${header.shape.join(", ")}), rank ${rank} expected`, { file: path, field: "shape", fix: "check which file this is" });
  }
  // npyjs reads as many values as the bytes hold: a truncated file would come back short, silently.
  const dataStart = (major(bytes) === 1 ? 10 : 12) + headerLength(bytes);
  const expectedBytes = header.shape.reduce((a, b) => a * b, 1) * 4;
  if (bytes.length - dataStart !== expectedBytes) {
    throw new BenchError(`holds ${bytes.length - dataStart} data bytes, its header's shape (${header.shape.join(", ")}) needs ${expectedBytes} (truncated or padded file)`, {
      file: path, field: "shape", fix: "re-write the array with numpy.save",
    });
  }
  // A copy starting at the data: numpy pads headers to 64 bytes, but a file that does not would
  // put the data at an offset a typed array cannot start at.
  return { shape: header.shape, buffer: bytes.slice(dataStart).buffer };
}

/** The data as 4-byte little-endian values, whatever the host's byte order. */
function littleEndian<T extends Int32Array | Float32Array>(buffer: ArrayBuffer, read: (view: DataView, at: number) => number, TypedArray: new (length: number) => T): T {
  const view = new DataView(buffer);
  const values = new TypedArray(buffer.byteLength / 4);
  for (let i = 0; i < values.length; i++) values[i] = read(view, i * 4);
  return values;
}

export function readNpyInt32(path: string, rank: number): NpyInt32 {
  const { shape, buffer } = readChecked(path, "<i4", rank);
  return { dtype: "<i4", shape, data: littleEndian(buffer, (view, at) => view.getInt32(at, true), Int32Array) };
}

export function readNpyFloat32(path: string, rank: number): NpyFloat32 {
  const { shape, buffer } = readChecked(path, "<f4", rank);
  return { dtype: "<f4", shape, data: littleEndian(buffer, (view, at) => view.getFloat32(at, true), Float32Array) };
}
