/*
 * rope, normal and neox, with partial rotary (dims at and past n_dims are copied). θ is formed as
 * llama.cpp forms it: pos · freq_scale times freq_base^(−2/n_dims) applied by repeated float32
 * multiplication, one factor per pair.
 */
#include <math.h>
#include <string.h>

#include "ops.h"

KERNEL(op_rope) {
  (void)encoding;
  if (n_in != 2 || n_out != 1) return fail("rope takes two inputs (x, pos) and one output (y)");
  const bb_tensor *x = &in[0], *pos = &in[1];
  bb_tensor *y = &out[0];
  char mode[16];
  int64_t n_dims;
  double freq_base, freq_scale;
  if (expect(x, 3, TYPE_BIT(BB_TYPE_F32)) || expect(pos, 1, TYPE_BIT(BB_TYPE_I32)) || expect(y, 3, OUT_TYPES) || expect_shape(y, 3, x->shape) || expect_shape(pos, 1, x->shape)) return 1;
  if (need_int(attrs, "n_dims", &n_dims) || need_number(attrs, "freq_base", &freq_base) || need_number(attrs, "freq_scale", &freq_scale)) return 1;
  const int found = attr_string(attrs, "mode", mode, sizeof mode);
  if (found <= 0) return found == 0 ? fail("attribute mode is required") : 1;
  const int neox = strcmp(mode, "neox") == 0;
  if (!neox && strcmp(mode, "normal") != 0) return fail("attribute mode: \"%s\" is neither \"normal\" nor \"neox\"", mode);
  const int64_t tokens = x->shape[0], heads = x->shape[1], d = x->shape[2];
  if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > d) return fail("attribute n_dims: %lld is not even and at most %lld", (long long)n_dims, (long long)d);
  const float theta_scale = powf((float)freq_base, -2.0f / (float)n_dims);
  const int64_t half = n_dims / 2;
  /* the pair (first, second) a rotation index i turns: neighbours (normal) or half a span apart (neox) */
  const int64_t stride = neox ? half : 1;
  for (int64_t t = 0; t < tokens; t++) {
    const float p = (float)load_i32(pos, t);
    for (int64_t h = 0; h < heads; h++) {
      const int64_t base = (t * heads + h) * d;
      const float *row = (const float *)x->data + base;
      float theta = p;
      for (int64_t i = 0; i < half; i++, theta *= theta_scale) {
        const float angle = (float)freq_scale * theta;
        const float cos_theta = cosf(angle), sin_theta = sinf(angle);
        const int64_t first = neox ? i : 2 * i;
        const float a = row[first], b = row[first + stride];
        store(y, base + first, a * cos_theta - b * sin_theta);
        store(y, base + first + stride, a * sin_theta + b * cos_theta);
      }
      for (int64_t i = n_dims; i < d; i++) store(y, base + i, row[i]);
    }
  }
  return 0;
}
