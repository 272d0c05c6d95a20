/*
 * Failure reporting, number formats and dense-tensor access shared by every op of the reference
 * plugin.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernel.h"

_Thread_local char bb_reference_last_error[512];

int fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(bb_reference_last_error, sizeof bb_reference_last_error, format, args);
  va_end(args);
  return 1;
}

float f16_to_f32(uint16_t h) {
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

float bf16_to_f32(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffff) > 0x7f800000) return (uint16_t)((bits >> 16) | 64); /* quiet NaN */
  return (uint16_t)((bits + (0x7fff + ((bits >> 16) & 1))) >> 16);
}

float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

int64_t elements(const bb_tensor *t) {
  int64_t n = 1;
  for (uint32_t d = 0; d < t->n_dims; d++) n *= t->shape[d];
  return n;
}

const char *dtype_name(uint32_t dtype) {
  switch (dtype) {
    case BB_TYPE_F32: return "F32";
    case BB_TYPE_F16: return "F16";
    case BB_TYPE_BF16: return "BF16";
    case BB_TYPE_I32: return "I32";
    case BB_TYPE_Q8_0: return "Q8_0";
    case BB_TYPE_Q4_K: return "Q4_K";
    case BB_TYPE_Q5_K: return "Q5_K";
    case BB_TYPE_Q6_K: return "Q6_K";
    default: return "an unknown dtype";
  }
}

/* The reference kernels index tensors as dense row-major arrays: views are refused, not misread. */
static int dense(const bb_tensor *t) {
  const codec *c = codec_for(t->dtype);
  const int64_t element_bytes = t->dtype == BB_TYPE_I32 ? 4 : c->block_values == 1 ? c->block_bytes : 0;
  const int64_t inner = t->shape[t->n_dims - 1];
  if (t->strides[t->n_dims - 1] != element_bytes) return 0;
  int64_t stride = t->dtype == BB_TYPE_I32 ? inner * 4 : row_bytes(c, inner);
  for (int d = (int)t->n_dims - 2; d >= 0; d--) {
    if (t->strides[d] != stride) return 0;
    stride *= t->shape[d];
  }
  return 1;
}

int expect(const bb_tensor *t, uint32_t n_dims, uint64_t types) {
  if (t->dtype >= 64 || (types & TYPE_BIT(t->dtype)) == 0) return fail("tensor %s: %s is not a type this op takes", t->name, dtype_name(t->dtype));
  if (t->n_dims != n_dims) return fail("tensor %s: %u dimensions, this op takes %u", t->name, t->n_dims, n_dims);
  if (!dense(t)) return fail("tensor %s: not dense row-major (the reference kernels take no views)", t->name);
  return 0;
}

int expect_shape(const bb_tensor *t, uint32_t n_dims, const int64_t *shape) {
  int same = t->n_dims == n_dims;
  for (uint32_t d = 0; same && d < n_dims; d++) same = t->shape[d] == shape[d];
  if (same) return 0;
  char want[96] = "", got[96] = "";
  for (uint32_t d = 0; d < n_dims; d++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? ", " : "", (long long)shape[d]);
  for (uint32_t d = 0; d < t->n_dims; d++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "", (long long)t->shape[d]);
  return fail("tensor %s: shape [%s], this op needs [%s]", t->name, got, want);
}

float load(const bb_tensor *t, int64_t i) {
  switch (t->dtype) {
    case BB_TYPE_F16: return f16_to_f32(((const uint16_t *)t->data)[i]);
    case BB_TYPE_BF16: return bf16_to_f32(((const uint16_t *)t->data)[i]);
    default: return ((const float *)t->data)[i];
  }
}

int32_t load_i32(const bb_tensor *t, int64_t i) { return ((const int32_t *)t->data)[i]; }

void store(bb_tensor *t, int64_t i, float v) {
  if (t->dtype == BB_TYPE_BF16) ((uint16_t *)t->data)[i] = f32_to_bf16(v);
  else ((float *)t->data)[i] = v;
}
