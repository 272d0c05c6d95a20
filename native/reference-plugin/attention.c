/*
 * sdpa_decode: one query token against a KV cache, per head. GQA (query head h reads kv head
 * h / (H / Hkv)), causal (slot j holds position j; j ≤ pos) and sliding window (pos − j < window,
 * llama.cpp's is_masked_swa). Scores, softmax and the weighted sum of values are float32.
 */
#include <math.h>
#include <stdlib.h>

#include "ops.h"

KERNEL(op_sdpa_decode) {
  (void)encoding;
  if (n_in != 3 || n_out != 1) return fail("sdpa_decode takes three inputs (q, k, v) and one output (o)");
  const bb_tensor *q = &in[0], *k = &in[1], *v = &in[2];
  bb_tensor *o = &out[0];
  const uint64_t cache_types = TYPE_BIT(BB_TYPE_F32) | TYPE_BIT(BB_TYPE_F16);
  if (expect(q, 2, TYPE_BIT(BB_TYPE_F32)) || expect(k, 3, cache_types) || expect(v, 3, cache_types) || expect(o, 2, OUT_TYPES)) return 1;
  if (v->dtype != k->dtype) return fail("tensor v: its dtype differs from k's");
  const int64_t heads = q->shape[0], dk = q->shape[1], kv_heads = k->shape[0], length = k->shape[1], dv = v->shape[2];
  const int64_t k_shape[3] = {kv_heads, length, dk}, v_shape[3] = {kv_heads, length, dv}, o_shape[2] = {heads, dv};
  if (expect_shape(k, 3, k_shape) || expect_shape(v, 3, v_shape) || expect_shape(o, 2, o_shape)) return 1;
  if (kv_heads == 0 || heads % kv_heads != 0) return fail("tensor q: %lld heads are not a multiple of k's %lld", (long long)heads, (long long)kv_heads);
  double scale;
  int64_t pos, window;
  if (need_number(attrs, "scale", &scale) || need_int(attrs, "pos", &pos) || need_int(attrs, "window", &window)) return 1;
  if (pos < 0 || pos >= length) return fail("attribute pos: %lld is outside the cache's %lld slots", (long long)pos, (long long)length);
  if (window < 0) return fail("attribute window: %lld is negative", (long long)window);
  float *weights = malloc((size_t)length * sizeof *weights);
  float *sum = malloc((size_t)dv * sizeof *sum);
  if (weights == NULL || sum == NULL) {
    free(weights), free(sum);
    return fail("out of memory");
  }
  const int64_t first = window == 0 || pos - window + 1 < 0 ? 0 : pos - window + 1;
  for (int64_t h = 0; h < heads; h++) {
    const int64_t g = h / (heads / kv_heads);
    const float *query = (const float *)q->data + h * dk;
    float max = -INFINITY;
    for (int64_t j = first; j <= pos; j++) {
      float dot = 0.0f;
      for (int64_t i = 0; i < dk; i++) dot += query[i] * load(k, (g * length + j) * dk + i);
      weights[j] = (float)scale * dot;
      max = fmaxf(max, weights[j]);
    }
    float total = 0.0f;
    for (int64_t i = 0; i < dv; i++) sum[i] = 0.0f;
    for (int64_t j = first; j <= pos; j++) {
      const float e = expf(weights[j] - max);
      total += e;
      for (int64_t i = 0; i < dv; i++) sum[i] += e * load(v, (g * length + j) * dv + i);
    }
    for (int64_t i = 0; i < dv; i++) store(o, h * dv + i, sum[i] / total);
  }
  free(weights), free(sum);
  return 0;
}
