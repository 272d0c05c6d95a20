import { readFileSync } from "node:fs";
import { BenchError } from "../errors.js";
import { readGguf } from "../gguf/read.js";
import { ggmlTypeName, tensorByteSize, type GgufValue } from "../gguf/types.js";
import { codecFor } from "../quant/registry.js";

/** A GGUF tensor decoded to float32, dims in ggml order (dims[0] contiguous). */
export interface GgufFloatTensor {
  readonly dims: readonly number[];
  readonly values: Float32Array;
}

/**
 * A GGUF model in memory, every tensor decoded to float32 by the harness's codecs (bit-exact to
 * ggml's dequantization), with typed access to `<architecture>.<key>` hyper-parameters.
 */
export class GgufModel {
  readonly architecture: string;
  private readonly metadata: ReadonlyMap<string, GgufValue>;
  private readonly tensors = new Map<string, GgufFloatTensor>();

  constructor(readonly path: string) {
    const file = readGguf(path);
    const bytes = readFileSync(path);
    this.metadata = file.metadata;
    const architecture = file.metadata.get("general.architecture");
    if (architecture === undefined || typeof architecture.value !== "string") {
      throw new BenchError("general.architecture is missing", { file: path, field: "general.architecture", fix: "pass a GGUF model file" });
    }
    this.architecture = architecture.value;
    for (const info of file.tensors) {
      const elements = info.dims.reduce((a, b) => a * b, 1);
      const start = file.dataOffset + info.offset;
      const raw = bytes.subarray(start, start + tensorByteSize(info.type, elements));
      let values: Float32Array;
      try {
        values = codecFor(info.type).decode(new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength));
      } catch (error) {
        throw new BenchError(`tensor type ${ggmlTypeName(info.type)} cannot be decoded (${(error as Error).message})`, { file: path, field: info.name, fix: "export an F32 or a Q8_0/K-quant fixture" });
      }
      this.tensors.set(info.name, { dims: info.dims, values });
    }
  }

  has(name: string): boolean {
    return this.tensors.has(name);
  }

  tensor(name: string): GgufFloatTensor {
    const tensor = this.tensors.get(name);
    if (tensor === undefined) throw new BenchError(`tensor ${name} is missing`, { file: this.path, field: name, fix: "pass a complete model of this architecture" });
    return tensor;
  }

  /** `<architecture>.<key>` as a number (a one-element view of arrays is not taken: use `numbers`). */
  number(key: string, fallback?: number): number {
    const value = this.metadata.get(`${this.architecture}.${key}`);
    if (value === undefined) {
      if (fallback !== undefined) return fallback;
      throw new BenchError("required hyper-parameter is missing", { file: this.path, field: `${this.architecture}.${key}`, fix: "pass a complete model of this architecture" });
    }
    if (typeof value.value === "number" || typeof value.value === "bigint" || typeof value.value === "boolean") return Number(value.value);
    throw new BenchError("expected one number", { file: this.path, field: `${this.architecture}.${key}`, fix: "pass a complete model of this architecture" });
  }

  /** A per-layer key: an array with a value per layer, or one value for every layer. */
  numbers(key: string, layers: number, fallback?: number): number[] {
    const value = this.metadata.get(`${this.architecture}.${key}`);
    if (value !== undefined && Array.isArray(value.value)) {
      if (value.value.length < layers) throw new BenchError(`${value.value.length} values for ${layers} layers`, { file: this.path, field: `${this.architecture}.${key}`, fix: "give one value per layer" });
      return value.value.slice(0, layers).map((v) => Number(v));
    }
    return new Array<number>(layers).fill(this.number(key, fallback));
  }

  /** A top-level key (`tokenizer.ggml.bos_token_id`), or undefined. */
  raw(key: string): GgufValue | undefined {
    return this.metadata.get(key);
  }
}
