/*
 * rms_norm (fused with the weight multiply, as llama.cpp's rms_norm·mul) and l2_norm, row by row.
 * Sums of squares accumulate in float32 (llama.cpp uses double; the bound is float32's).
 */
#include <math.h>

#include "ops.h"

static float sum_of_squares(const float *x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; i++) sum += x[i] * x[i];
  return sum;
}

/* x [R, N] and y [R, N] of an output type; the row count and width. */
static int rows_of(const bb_tensor *x, bb_tensor *y, uint64_t y_types) {
  if (expect(x, 2, TYPE_BIT(BB_TYPE_F32)) || expect(y, 2, y_types)) return 1;
  return expect_shape(y, 2, x->shape);
}

KERNEL(op_rms_norm) {
  (void)encoding;
  if (n_in != 2 || n_out != 1) return fail("rms_norm takes two inputs (x, w) and one output (y)");
  const bb_tensor *x = &in[0], *w = &in[1];
  bb_tensor *y = &out[0];
  double eps;
  if (rows_of(x, y, OUT_TYPES) || expect(w, 1, TYPE_BIT(BB_TYPE_F32)) || expect_shape(w, 1, &x->shape[1]) || need_number(attrs, "eps", &eps)) return 1;
  const int64_t rows = x->shape[0], n = x->shape[1];
  const float *weights = w->data;
  for (int64_t r = 0; r < rows; r++) {
    const float *row = (const float *)x->data + r * n;
    const float mean = sum_of_squares(row, n) / (float)n;
    const float scale = 1.0f / sqrtf(mean + (float)eps);
    for (int64_t i = 0; i < n; i++) store(y, r * n + i, row[i] * scale * weights[i]);
  }
  return 0;
}

KERNEL(op_l2_norm) {
  (void)encoding;
  if (n_in != 1 || n_out != 1) return fail("l2_norm takes one input (x) and one output (y)");
  const bb_tensor *x = &in[0];
  bb_tensor *y = &out[0];
  double eps;
  if (rows_of(x, y, OUT_TYPES) || need_number(attrs, "eps", &eps)) return 1;
  const int64_t rows = x->shape[0], n = x->shape[1];
  for (int64_t r = 0; r < rows; r++) {
    const float *row = (const float *)x->data + r * n;
    const float scale = 1.0f / fmaxf(sqrtf(sum_of_squares(row, n)), (float)eps);
    for (int64_t i = 0; i < n; i++) store(y, r * n + i, row[i] * scale);
  }
  return 0;
}
