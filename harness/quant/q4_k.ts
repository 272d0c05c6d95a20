import { checkBlockCount, type QuantCodec } from "./codec.js";
import { chunkSteps, quantizeAffineSuperBlock, writeAffineHead } from "./k-scales.js";

/**
 * Q4_K: super-blocks of 256 values, 144 bytes = fp16 d, fp16 dmin, 12-byte scale/min table,
 * 128 bytes of nibbles. Each 64-value chunk uses 32 bytes: low nibbles are its first 32 values,
 * high nibbles its next 32. x = (d·scale)·q − (dmin·min).
 */
export const q4_K: QuantCodec = {
  name: "Q4_K",
  blockElements: 256,
  blockBytes: 144,

  encode(values: Float32Array): Uint8Array {
    const blocks = checkBlockCount(this, values.length, "values");
    const out = new Uint8Array(blocks * 144);
    for (let b = 0; b < blocks; b++) {
      const at = b * 144;
      const block = quantizeAffineSuperBlock(values.subarray(b * 256, b * 256 + 256), 15);
      writeAffineHead(out, at, block);
      for (let chunk = 0; chunk < 4; chunk++) {
        for (let l = 0; l < 32; l++) {
          out[at + 16 + chunk * 32 + l] = block.quants[chunk * 64 + l] | (block.quants[chunk * 64 + 32 + l] << 4);
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
      const at = b * 144;
      for (let chunk = 0; chunk < 4; chunk++) {
        const { d1, m1, d2, m2 } = chunkSteps(blocks, at, chunk);
        const q = at + 16 + chunk * 32;
        for (let l = 0; l < 32; l++) y[o++] = Math.fround(d1 * (blocks[q + l] & 0xf)) - m1;
        for (let l = 0; l < 32; l++) y[o++] = Math.fround(d2 * (blocks[q + l] >> 4)) - m2;
      }
    }
    return y;
  },
};
