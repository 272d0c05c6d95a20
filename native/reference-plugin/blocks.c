/*
 * ggml's block layouts (ggml-common.h) decoded in float32 the way ggml's dequantize_row_* functions
 * do: the kernel suites hold decodes to the TypeScript references bit for bit.
 */
#include <string.h>

#include "kernel.h"

static uint16_t read_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* The 6-bit scale and min of sub-block j from the 12-byte table of Q4_K / Q5_K. */
static void scale_min(int j, const uint8_t *q, uint8_t *scale, uint8_t *min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

static void decode_f32(const uint8_t *b, float *y) { memcpy(y, b, 4); }
static void decode_f16(const uint8_t *b, float *y) { y[0] = f16_to_f32(read_u16(b)); }
static void decode_bf16(const uint8_t *b, float *y) { y[0] = bf16_to_f32(read_u16(b)); }

static void decode_q8_0(const uint8_t *b, float *y) {
  const float d = f16_to_f32(read_u16(b));
  for (int i = 0; i < 32; i++) y[i] = (float)(int8_t)b[2 + i] * d;
}

static void decode_q4_k(const uint8_t *b, float *y) {
  const float d = f16_to_f32(read_u16(b));
  const float dmin = f16_to_f32(read_u16(b + 2));
  const uint8_t *q = b + 16;
  for (int chunk = 0, is = 0; chunk < 4; chunk++, is += 2, q += 32) {
    uint8_t sc, m;
    scale_min(is, b + 4, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    scale_min(is + 1, b + 4, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xf) - m1;
    for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
  }
}

static void decode_q5_k(const uint8_t *b, float *y) {
  const float d = f16_to_f32(read_u16(b));
  const float dmin = f16_to_f32(read_u16(b + 2));
  const uint8_t *qh = b + 16;
  const uint8_t *ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int chunk = 0, is = 0; chunk < 4; chunk++, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
    uint8_t sc, m;
    scale_min(is, b + 4, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    scale_min(is + 1, b + 4, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; l++) *y++ = d1 * ((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; l++) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
  }
}

static void decode_q6_k(const uint8_t *b, float *y) {
  const float d = f16_to_f32(read_u16(b + 208));
  const uint8_t *ql = b;
  const uint8_t *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, y += 128) {
    for (int l = 0; l < 32; l++) {
      const int is = l / 16;
      const int q1 = (int8_t)((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = (int8_t)((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = (int8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * sc[is] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
  }
}

const codec *codec_for(uint32_t type) {
  static const codec f32 = {1, 4, decode_f32}, f16 = {1, 2, decode_f16}, bf16 = {1, 2, decode_bf16}, q8_0 = {32, 34, decode_q8_0},
                     q4_k = {256, 144, decode_q4_k}, q5_k = {256, 176, decode_q5_k}, q6_k = {256, 210, decode_q6_k};
  switch (type) {
    case BB_TYPE_F32: return &f32;
    case BB_TYPE_F16: return &f16;
    case BB_TYPE_BF16: return &bf16;
    case BB_TYPE_Q8_0: return &q8_0;
    case BB_TYPE_Q4_K: return &q4_k;
    case BB_TYPE_Q5_K: return &q5_k;
    case BB_TYPE_Q6_K: return &q6_k;
    default: return NULL;
  }
}

int64_t row_bytes(const codec *c, int64_t n) { return n / c->block_values * c->block_bytes; }

void decode_row(const codec *c, const uint8_t *bytes, int64_t n, float *y) {
  for (int64_t i = 0; i < n / c->block_values; i++) c->decode_block(bytes + i * c->block_bytes, y + i * c->block_values);
}
