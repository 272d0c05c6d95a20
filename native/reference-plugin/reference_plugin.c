/*
 * The reference CPU plugin: ggml's block layouts decoded in float32 as ggml's own
 * dequantize_row_* functions do, and a matvec that decodes a row and accumulates in float32,
 * the way a device kernel would. The kernel suites hold it (and any device plugin) to the
 * TypeScript references: decodes bit for bit, matvec within an analytic error envelope.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bringup_bench_plugin.h"

static _Thread_local char last_error[256];

static int fail_with(int status, const char *message) {
  snprintf(last_error, sizeof last_error, "%s", message);
  return status;
}

static int fail(const char *message) { return fail_with(1, message); }

static float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400) == 0) {
        mantissa <<= 1;
        exponent--;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3ff) << 13);
    }
  } else if (exponent == 31) {
    bits = sign | 0x7f800000 | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

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

typedef struct {
  size_t block_values;
  size_t block_bytes;
  void (*decode_block)(const uint8_t *block, float *y);
} codec;

static void decode_f32(const uint8_t *b, float *y) { memcpy(y, b, 4); }
static void decode_f16(const uint8_t *b, float *y) { y[0] = f16_to_f32(read_u16(b)); }

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

static const codec *codec_for(uint32_t type) {
  static const codec f32 = {1, 4, decode_f32}, f16 = {1, 2, decode_f16}, q8_0 = {32, 34, decode_q8_0},
                     q4_k = {256, 144, decode_q4_k}, q5_k = {256, 176, decode_q5_k}, q6_k = {256, 210, decode_q6_k};
  switch (type) {
    case BB_TYPE_F32: return &f32;
    case BB_TYPE_F16: return &f16;
    case BB_TYPE_Q8_0: return &q8_0;
    case BB_TYPE_Q4_K: return &q4_k;
    case BB_TYPE_Q5_K: return &q5_k;
    case BB_TYPE_Q6_K: return &q6_k;
    default: return NULL;
  }
}

const bb_plugin_info *bb_plugin_info_get(void) {
  static const bb_plugin_info info = {BB_PLUGIN_ABI_VERSION, "bringup-bench reference", "1.0.0", "cpu"};
  return &info;
}

const char *bb_last_error(void) { return last_error; }

int bb_dequantize(uint32_t type, const void *blocks, size_t n_values, float *out) {
  const codec *c = codec_for(type);
  if (c == NULL) return fail_with(BB_UNSUPPORTED_TYPE, "unsupported tensor type");
  if (n_values % c->block_values != 0) return fail("n_values is not a whole number of blocks");
  const uint8_t *b = blocks;
  for (size_t i = 0; i < n_values / c->block_values; i++) c->decode_block(b + i * c->block_bytes, out + i * c->block_values);
  return 0;
}

int bb_matvec(uint32_t type, const void *weights, size_t rows, size_t cols, const float *x, float *y) {
  const codec *c = codec_for(type);
  if (c == NULL) return fail_with(BB_UNSUPPORTED_TYPE, "unsupported tensor type");
  if (cols % c->block_values != 0) return fail("cols is not a whole number of blocks");
  float *row = malloc(cols * sizeof *row);
  if (row == NULL) return fail("out of memory");
  const size_t row_bytes = cols / c->block_values * c->block_bytes;
  for (size_t r = 0; r < rows; r++) {
    bb_dequantize(type, (const uint8_t *)weights + r * row_bytes, cols, row);
    float sum = 0.0f;
    for (size_t i = 0; i < cols; i++) sum += row[i] * x[i];
    y[r] = sum;
  }
  free(row);
  return 0;
}
