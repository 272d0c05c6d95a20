import { checkBlockCount, type QuantCodec } from "./codec.js";
import { f16ToF32, f32ToF16 } from "./fp16.js";

/**
 * Q6_K: super-blocks of 256 values, 210 bytes = 128 bytes low nibbles (ql), 64 bytes of 2-bit
 * highs (qh), 16 int8 scales (one per 16 values), fp16 d. x = (d·scale)·(q − 32).
 * Each 128-value half uses 64 ql bytes, 32 qh bytes and 8 scales; within a half, value
 * l + 32k (k = 0..3) takes its nibble from ql[l + 32(k&1)] (low nibble for k < 2) and its top
 * bits from qh[l] bits 2k..2k+1.
 */
export const q6_K: QuantCodec = {
  name: "Q6_K",
  blockElements: 256,
  blockBytes: 210,

  encode(values: Float32Array): Uint8Array {
    const blocks = checkBlockCount(this, values.length, "values");
    const out = new Uint8Array(blocks * 210);
    const view = new DataView(out.buffer);
    for (let b = 0; b < blocks; b++) {
      const at = b * 210;
      const x = values.subarray(b * 256, b * 256 + 256);
      const subScale = new Float64Array(16);
      for (let j = 0; j < 16; j++) {
        let absMax = 0;
        for (let i = 0; i < 16; i++) absMax = Math.max(absMax, Math.abs(x[j * 16 + i]));
        subScale[j] = absMax / 31;
      }
      const dBits = f32ToF16(Math.max(...subScale) / 127);
      const d = f16ToF32(dBits);
      view.setUint16(at + 208, dBits, true);
      const quants = new Uint8Array(256);
      for (let j = 0; j < 16; j++) {
        const scale = d > 0 ? Math.min(127, Math.ceil(subScale[j] / d)) : 0;
        view.setInt8(at + 192 + j, scale);
        const step = d * scale;
        for (let i = 0; i < 16; i++) {
          quants[j * 16 + i] = 32 + (step === 0 ? 0 : Math.max(-32, Math.min(31, Math.round(x[j * 16 + i] / step))));
        }
      }
      for (let half = 0; half < 2; half++) {
        const ql = at + half * 64;
        const qh = at + 128 + half * 32;
        for (let l = 0; l < 32; l++) {
          const [q1, q2, q3, q4] = [0, 1, 2, 3].map((k) => quants[half * 128 + l + 32 * k]);
          out[ql + l] = (q1 & 0xf) | ((q3 & 0xf) << 4);
          out[ql + l + 32] = (q2 & 0xf) | ((q4 & 0xf) << 4);
          out[qh + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
        }
      }
    }
    return out;
  },

  decode(blocks: Uint8Array, out?: Float32Array): Float32Array {
    const count = checkBlockCount(this, blocks.length, "bytes");
    const y = out ?? new Float32Array(count * 256);
    const view = new DataView(blocks.buffer, blocks.byteOffset, blocks.byteLength);
    for (let b = 0; b < count; b++) {
      const at = b * 210;
      const d = f16ToF32(view.getUint16(at + 208, true));
      for (let half = 0; half < 2; half++) {
        const ql = at + half * 64;
        const qh = at + 128 + half * 32;
        const sc = at + 192 + half * 8;
        const o = b * 256 + half * 128;
        for (let l = 0; l < 32; l++) {
          const is = l >> 4;
          const q1 = ((blocks[ql + l] & 0xf) | (((blocks[qh + l] >> 0) & 3) << 4)) - 32;
          const q2 = ((blocks[ql + l + 32] & 0xf) | (((blocks[qh + l] >> 2) & 3) << 4)) - 32;
          const q3 = ((blocks[ql + l] >> 4) | (((blocks[qh + l] >> 4) & 3) << 4)) - 32;
          const q4 = ((blocks[ql + l + 32] >> 4) | (((blocks[qh + l] >> 6) & 3) << 4)) - 32;
          y[o + l] = Math.fround(Math.fround(d * view.getInt8(sc + is)) * q1);
          y[o + l + 32] = Math.fround(Math.fround(d * view.getInt8(sc + is + 2)) * q2);
          y[o + l + 64] = Math.fround(Math.fround(d * view.getInt8(sc + is + 4)) * q3);
          y[o + l + 96] = Math.fround(Math.fround(d * view.getInt8(sc + is + 6)) * q4);
        }
      }
    }
    return y;
  },
};
