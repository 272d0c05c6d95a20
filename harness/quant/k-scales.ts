import { f16ToF32, f32ToF16 } from "./fp16.js";

/**
 * The 12-byte scale/min table shared by Q4_K and Q5_K: eight 6-bit scales and eight 6-bit mins.
 * Sub-blocks 0..3 keep their low 6 bits in bytes 0..3 (scales) and 4..7 (mins); sub-blocks 4..7
 * keep their low 4 bits in the nibbles of bytes 8..11 and their top 2 bits in the spare top bits
 * of bytes 0..7. (ggml-common.h, get_scale_min_k4.)
 */
export function unpackScaleMin(table: Uint8Array, at: number, subBlock: number): { scale: number; min: number } {
  if (subBlock < 4) {
    return { scale: table[at + subBlock] & 63, min: table[at + subBlock + 4] & 63 };
  }
  return {
    scale: (table[at + subBlock + 4] & 0xf) | ((table[at + subBlock - 4] >> 6) << 4),
    min: (table[at + subBlock + 4] >> 4) | ((table[at + subBlock] >> 6) << 4),
  };
}

export function packScaleMin(table: Uint8Array, at: number, scales: ArrayLike<number>, mins: ArrayLike<number>): void {
  table.fill(0, at, at + 12);
  for (let j = 0; j < 8; j++) {
    const scale = scales[j];
    const min = mins[j];
    if (j < 4) {
      table[at + j] = scale;
      table[at + j + 4] = min;
    } else {
      table[at + j + 4] = (scale & 0xf) | ((min & 0xf) << 4);
      table[at + j - 4] |= (scale >> 4) << 6;
      table[at + j] |= (min >> 4) << 6;
    }
  }
}

/** One 256-value super-block of Q4_K / Q5_K, before bit packing. */
export interface AffineSuperBlock {
  /** fp16 bits of the scale of the scales, and of the scale of the mins. */
  readonly dBits: number;
  readonly dminBits: number;
  /** 6-bit codes per 32-value sub-block. */
  readonly scales: Uint8Array;
  readonly mins: Uint8Array;
  /** One quant per value, in [0, levels]. */
  readonly quants: Uint8Array;
}

/**
 * Round-to-nearest affine quantization of 256 values into 8 sub-blocks of 32 with `levels`
 * steps each: x ≈ d·scale_j·q − dmin·min_j. Quants are chosen against the scales as the decoder
 * will see them (after fp16 and 6-bit rounding), so the only error is the final rounding.
 */
export function quantizeAffineSuperBlock(x: Float32Array, levels: number): AffineSuperBlock {
  const subScale = new Float64Array(8);
  const subMin = new Float64Array(8);
  for (let j = 0; j < 8; j++) {
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 32; i++) {
      lo = Math.min(lo, x[j * 32 + i]);
      hi = Math.max(hi, x[j * 32 + i]);
    }
    subScale[j] = (hi - lo) / levels;
    subMin[j] = -lo;
  }
  const maxScale = Math.max(...subScale);
  const maxMin = Math.max(...subMin);
  const dBits = f32ToF16(maxScale / 63);
  const dminBits = f32ToF16(maxMin / 63);
  const d = f16ToF32(dBits);
  const dmin = f16ToF32(dminBits);
  const scales = new Uint8Array(8);
  const mins = new Uint8Array(8);
  const quants = new Uint8Array(256);
  for (let j = 0; j < 8; j++) {
    scales[j] = d > 0 ? Math.min(63, Math.ceil(subScale[j] / d)) : 0;
    mins[j] = dmin > 0 ? Math.min(63, Math.round(subMin[j] / dmin)) : 0;
    const step = d * scales[j];
    const offset = dmin * mins[j];
    for (let i = 0; i < 32; i++) {
      quants[j * 32 + i] = step === 0 ? 0 : Math.max(0, Math.min(levels, Math.round((x[j * 32 + i] + offset) / step)));
    }
  }
  return { dBits, dminBits, scales, mins, quants };
}

/** Writes the 16-byte head shared by Q4_K and Q5_K blocks: fp16 d, fp16 dmin, the scale/min table. */
export function writeAffineHead(out: Uint8Array, at: number, block: AffineSuperBlock): void {
  out[at] = block.dBits & 0xff;
  out[at + 1] = block.dBits >> 8;
  out[at + 2] = block.dminBits & 0xff;
  out[at + 3] = block.dminBits >> 8;
  packScaleMin(out, at + 4, block.scales, block.mins);
}

/**
 * The two (step, offset) pairs of 64-value chunk `chunk` of a Q4_K / Q5_K block at `at`, in
 * float32 exactly as ggml forms them: d1 = d·scale, m1 = dmin·min for the chunk's first 32 values,
 * d2, m2 for its next 32.
 */
export function chunkSteps(blocks: Uint8Array, at: number, chunk: number): { d1: number; m1: number; d2: number; m2: number } {
  const d = f16ToF32(blocks[at] | (blocks[at + 1] << 8));
  const dmin = f16ToF32(blocks[at + 2] | (blocks[at + 3] << 8));
  const low = unpackScaleMin(blocks, at + 4, 2 * chunk);
  const high = unpackScaleMin(blocks, at + 4, 2 * chunk + 1);
  return {
    d1: Math.fround(d * low.scale), m1: Math.fround(dmin * low.min),
    d2: Math.fround(d * high.scale), m2: Math.fround(dmin * high.min),
  };
}
