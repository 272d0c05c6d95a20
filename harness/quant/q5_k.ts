import { checkBlockCount, type QuantCodec } from "./codec.js";
import { chunkSteps, quantizeAffineSuperBlock, writeAffineHead } from "./k-scales.js";

/**
 * Q5_K: super-blocks of 256 values, 176 bytes = fp16 d, fp16 dmin, 12-byte scale/min table,
 * 32 bytes of fifth bits (qh), 128 bytes of nibbles (qs). Chunk c (64 values) takes its fifth
 * bits from qh bit 2c (first 32 values) and bit 2c+1 (next 32).
 */
export const q5_K: QuantCodec = {
  name: "Q5_K",
  blockElements: 256,
  blockBytes: 176,

  encode(values: Float32Array): Uint8Array {
    const blocks = checkBlockCount(this, values.length, "values");
    const out = new Uint8Array(blocks * 176);
    for (let b = 0; b < blocks; b++) {
      const at = b * 176;
      const block = quantizeAffineSuperBlock(values.subarray(b * 256, b * 256 + 256), 31);
      writeAffineHead(out, at, block);
      for (let chunk = 0; chunk < 4; chunk++) {
        for (let l = 0; l < 32; l++) {
          const first = block.quants[chunk * 64 + l];
          const second = block.quants[chunk * 64 + 32 + l];
          out[at + 48 + chunk * 32 + l] = (first & 0xf) | ((second & 0xf) << 4);
          out[at + 16 + l] |= ((first >> 4) << (2 * chunk)) | ((second >> 4) << (2 * chunk + 1));
        }
      }
    }
    return out;
  },

  decode(blocks: Uint8Array, out?: Float32Array): Float32Array {
    const count = checkBlockCount(this, blocks.length, "bytes");
    const y = out ?? new Float32Array(count * 256);
    let o = 0;
    for (let b = 0; b < count; b++) {
      const at = b * 176;
      const qh = at + 16;
      for (let chunk = 0; chunk < 4; chunk++) {
        const { d1, m1, d2, m2 } = chunkSteps(blocks, at, chunk);
        const u1 = 1 << (2 * chunk);
        const u2 = 2 << (2 * chunk);
        const ql = at + 48 + chunk * 32;
        for (let l = 0; l < 32; l++) y[o++] = Math.fround(d1 * ((blocks[ql + l] & 0xf) + (blocks[qh + l] & u1 ? 16 : 0))) - m1;
        for (let l = 0; l < 32; l++) y[o++] = Math.fround(d2 * ((blocks[ql + l] >> 4) + (blocks[qh + l] & u2 ? 16 : 0))) - m2;
      }
    }
    return y;
  },
};
