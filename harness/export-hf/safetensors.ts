/** One tensor of a safetensors file: torch shape (last dimension contiguous), float32 values. */
export interface SafetensorsTensor {
  readonly name: string;
  readonly shape: readonly number[];
  readonly values: Float32Array;
}

/** safetensors' header must be a multiple of 8 bytes for aligned reads; padding is spaces. */
const HEADER_ALIGNMENT = 8;

/**
 * The safetensors format: an 8-byte little-endian header length, a JSON header mapping each name
 * to `{dtype, shape, data_offsets}` (offsets relative to the data that follows) plus
 * `__metadata__` (string values only), then the raw little-endian data in header order.
 */
export function encodeSafetensors(tensors: readonly SafetensorsTensor[], metadata: Readonly<Record<string, string>>): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const tensor of tensors) {
    const elements = tensor.shape.reduce((a, b) => a * b, 1);
    if (elements !== tensor.values.length) {
      throw new Error(`safetensors: ${tensor.name} has ${tensor.values.length} values for shape [${tensor.shape.join(", ")}]`);
    }
    if (tensor.name in header) throw new Error(`safetensors: tensor ${tensor.name} written twice`);
    header[tensor.name] = { dtype: "F32", shape: tensor.shape, data_offsets: [offset, offset + 4 * elements] };
    offset += 4 * elements;
  }
  const json = JSON.stringify(header);
  const headerBytes = Buffer.from(json + " ".repeat((HEADER_ALIGNMENT - (Buffer.byteLength(json) % HEADER_ALIGNMENT)) % HEADER_ALIGNMENT), "utf8");
  const out = new Uint8Array(8 + headerBytes.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  let at = 8 + headerBytes.length;
  for (const tensor of tensors) {
    // Float32Array is platform-endian; every platform Node runs on is little-endian, as safetensors is.
    out.set(new Uint8Array(tensor.values.buffer, tensor.values.byteOffset, tensor.values.byteLength), at);
    at += tensor.values.byteLength;
  }
  return out;
}
