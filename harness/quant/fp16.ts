/** IEEE half precision, as ggml stores block scales (`ggml_half`). */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** float32 -> float16 bits, round to nearest even (what F16C's vcvtps2ph does). */
export function f32ToF16(value: number): number {
  f32[0] = value;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exponent = (x >>> 23) & 0xff;
  let mantissa = x & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa !== 0 ? 0x200 : 0);
  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 31) return sign | 0x7c00;
  if (halfExponent <= 0) {
    if (halfExponent < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - halfExponent;
    let half = mantissa >>> shift;
    const remainder = mantissa & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (remainder > halfway || (remainder === halfway && (half & 1) === 1)) half += 1;
    return sign | half;
  }
  let half = (halfExponent << 10) | (mantissa >>> 13);
  const remainder = mantissa & 0x1fff;
  if (remainder > 0x1000 || (remainder === 0x1000 && (half & 1) === 1)) half += 1; // a carry into the exponent is correct rounding
  return sign | half;
}

/** Every float16 bit pattern decoded once; decoding is then a table lookup. */
const F16_TABLE: Float32Array = (() => {
  const table = new Float32Array(65536);
  for (let bits = 0; bits < 65536; bits++) {
    const sign = bits & 0x8000 ? -1 : 1;
    const exponent = (bits >>> 10) & 0x1f;
    const mantissa = bits & 0x3ff;
    if (exponent === 0) table[bits] = sign * mantissa * 2 ** -24;
    else if (exponent === 31) table[bits] = mantissa === 0 ? sign * Infinity : NaN;
    else table[bits] = sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
  }
  return table;
})();

export function f16ToF32(bits: number): number {
  return F16_TABLE[bits & 0xffff];
}
