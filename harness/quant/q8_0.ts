import { checkBlockCount, type QuantCodec } from "./codec.js";
import { f16ToF32, f32ToF16 } from "./fp16.js";

/** Q8_0: blocks of 32 values = fp16 scale d, then 32 int8 quants; x = d * q. */
export const q8_0: QuantCodec = {
  name: "Q8_0",
  blockElements: 32,
  blockBytes: 34,

  encode(values: Float32Array): Uint8Array {
    const blocks = checkBlockCount(this, values.length, "values");
    const out = new Uint8Array(blocks * 34);
    const view = new DataView(out.buffer);
    for (let b = 0; b < blocks; b++) {
      const x = values.subarray(b * 32, b * 32 + 32);
      let absMax = 0;
      for (let i = 0; i < 32; i++) absMax = Math.max(absMax, Math.abs(x[i]));
      const d = Math.fround(absMax / 127);
      const inverse = d === 0 ? 0 : 1 / d;
      view.setUint16(b * 34, f32ToF16(d), true);
      for (let i = 0; i < 32; i++) view.setInt8(b * 34 + 2 + i, Math.max(-127, Math.min(127, Math.round(x[i] * inverse))));
    }
    return out;
  },

  decode(blocks: Uint8Array, out?: Float32Array): Float32Array {
    const count = checkBlockCount(this, blocks.length, "bytes");
    const y = out ?? new Float32Array(count * 32);
    const view = new DataView(blocks.buffer, blocks.byteOffset, blocks.byteLength);
    for (let b = 0; b < count; b++) {
      const d = f16ToF32(view.getUint16(b * 34, true));
      for (let i = 0; i < 32; i++) y[b * 32 + i] = Math.fround(view.getInt8(b * 34 + 2 + i) * d);
    }
    return y;
  },
};
