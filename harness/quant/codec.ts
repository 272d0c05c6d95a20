/**
 * A GGUF tensor encoding: `encode` turns float32 rows into ggml blocks, `decode` turns blocks back
 * into float32 exactly as ggml's `dequantize_row_*` does (same float32 operation order, so the
 * results are bit-identical). Decoders are the CPU references that device kernels are held to.
 */
export interface QuantCodec {
  readonly name: string;
  /** Values per block. */
  readonly blockElements: number;
  /** Bytes per block. */
  readonly blockBytes: number;
  encode(values: Float32Array): Uint8Array;
  decode(blocks: Uint8Array, out?: Float32Array): Float32Array;
}

/** Checks shapes shared by every codec. */
export function checkBlockCount(codec: QuantCodec, values: number, what: "values" | "bytes"): number {
  const per = what === "values" ? codec.blockElements : codec.blockBytes;
  if (values % per !== 0) {
    throw new Error(`${codec.name}: ${values} ${what} is not a whole number of ${per}-${what} blocks`);
  }
  return values / per;
}

