/* silu_mul (ggml's swiglu: silu(gate) · up) and a row softmax with a scale, in float32. */
#include <math.h>

#include "ops.h"

KERNEL(op_silu_mul) {
  (void)encoding, (void)attrs;
  if (n_in != 2 || n_out != 1) return fail("silu_mul takes two inputs (gate, up) and one output (y)");
  const bb_tensor *gate = &in[0], *up = &in[1];
  bb_tensor *y = &out[0];
  if (expect(gate, 2, TYPE_BIT(BB_TYPE_F32)) || expect(up, 2, TYPE_BIT(BB_TYPE_F32)) || expect(y, 2, OUT_TYPES) || expect_shape(up, 2, gate->shape) || expect_shape(y, 2, gate->shape)) return 1;
  const float *g = gate->data, *u = up->data;
  for (int64_t i = 0; i < elements(gate); i++) store(y, i, g[i] / (1.0f + expf(-g[i])) * u[i]);
  return 0;
}

KERNEL(op_softmax) {
  (void)encoding;
  if (n_in != 1 || n_out != 1) return fail("softmax takes one input (x) and one output (y)");
  const bb_tensor *x = &in[0];
  bb_tensor *y = &out[0];
  double scale;
  if (expect(x, 2, TYPE_BIT(BB_TYPE_F32)) || expect(y, 2, OUT_TYPES) || expect_shape(y, 2, x->shape) || need_number(attrs, "scale", &scale)) return 1;
  const int64_t rows = x->shape[0], n = x->shape[1];
  for (int64_t r = 0; r < rows; r++) {
    const float *row = (const float *)x->data + r * n;
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) max = fmaxf(max, (float)scale * row[i]);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += expf((float)scale * row[i] - max);
    for (int64_t i = 0; i < n; i++) store(y, r * n + i, expf((float)scale * row[i] - max) / sum);
  }
  return 0;
}
