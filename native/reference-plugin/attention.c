/*
 * sdpa_decode: one query token against a KV cache, per head. GQA (query head h reads kv head
 * h / (H / Hkv)), causal (slot j holds position j; j ≤ pos) and sliding window (pos − j < window,
 * llama.cpp's is_masked_swa). Scores, softmax and the weighted sum of values are float32.
 * Conventions (attributes): qk_norm "w" or "1+w" RMS-normalises q and every k row read, with the
 * q_norm / k_norm weights (or 1 + them) and qk_norm_eps; output_gate multiplies o by σ(gate).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* row · (1/√(mean(row²) + eps)) · (w or 1 + w), into y. */
static void rms_normalised(const float *row, int64_t n, const float *w, int one_plus, float eps, float *y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; i++) sum += row[i] * row[i];
  const float scale = 1.0f / sqrtf(sum / (float)n + eps);
  for (int64_t i = 0; i < n; i++) y[i] = row[i] * scale * (one_plus ? 1.0f + w[i] : w[i]);
}

KERNEL(op_sdpa_decode) {
  (void)encoding;
  char norm_mode[8] = "none";
  double eps = 0, gated = 0;
  if (attr_string(attrs, "qk_norm", norm_mode, sizeof norm_mode) < 0 || attr_number(attrs, "qk_norm_eps", &eps) < 0 || attr_number(attrs, "output_gate", &gated) < 0) return 1;
  const int normed = strcmp(norm_mode, "none") != 0, one_plus = strcmp(norm_mode, "1+w") == 0;
  if (normed && !one_plus && strcmp(norm_mode, "w") != 0) return fail("attribute qk_norm: \"%s\" is none of none, w, 1+w", norm_mode);
  if ((int64_t)n_in != 3 + 2 * normed + (gated != 0) || n_out != 1) return fail("sdpa_decode takes the inputs q, k, v%s%s and one output (o)", normed ? ", q_norm, k_norm" : "", gated != 0 ? ", gate" : "");
  const bb_tensor *q = &in[0], *k = &in[1], *v = &in[2];
  bb_tensor *o = &out[0];
  const uint64_t cache_types = TYPE_BIT(BB_TYPE_F32) | TYPE_BIT(BB_TYPE_F16);
  if (expect(q, 2, TYPE_BIT(BB_TYPE_F32)) || expect(k, 3, cache_types) || expect(v, 3, cache_types) || expect(o, 2, OUT_TYPES)) return 1;
  if (v->dtype != k->dtype) return fail("tensor v: its dtype differs from k's");
  const int64_t heads = q->shape[0], dk = q->shape[1], kv_heads = k->shape[0], length = k->shape[1], dv = v->shape[2];
  const int64_t k_shape[3] = {kv_heads, length, dk}, v_shape[3] = {kv_heads, length, dv}, o_shape[2] = {heads, dv};
  if (expect_shape(k, 3, k_shape) || expect_shape(v, 3, v_shape) || expect_shape(o, 2, o_shape)) return 1;
  if (kv_heads == 0 || heads % kv_heads != 0) return fail("tensor q: %lld heads are not a multiple of k's %lld", (long long)heads, (long long)kv_heads);
  const bb_tensor *q_norm = normed ? &in[3] : NULL, *k_norm = normed ? &in[4] : NULL, *gate = gated != 0 ? &in[n_in - 1] : NULL;
  if (normed && (expect(q_norm, 1, TYPE_BIT(BB_TYPE_F32)) || expect_shape(q_norm, 1, &dk) || expect(k_norm, 1, TYPE_BIT(BB_TYPE_F32)) || expect_shape(k_norm, 1, &dk))) return 1;
  if (gate != NULL && (expect(gate, 2, TYPE_BIT(BB_TYPE_F32)) || expect_shape(gate, 2, o_shape))) return 1;
  double scale;
  int64_t pos, window;
  if (need_number(attrs, "scale", &scale) || need_int(attrs, "pos", &pos) || need_int(attrs, "window", &window)) return 1;
  if (pos < 0 || pos >= length) return fail("attribute pos: %lld is outside the cache's %lld slots", (long long)pos, (long long)length);
  if (window < 0) return fail("attribute window: %lld is negative", (long long)window);
  float *weights = malloc((size_t)length * sizeof *weights);
  float *sum = malloc((size_t)dv * sizeof *sum);
  float *qn = malloc((size_t)dk * sizeof *qn), *kn = malloc((size_t)dk * sizeof *kn), *kraw = malloc((size_t)dk * sizeof *kraw);
  if (weights == NULL || sum == NULL || qn == NULL || kn == NULL || kraw == NULL) {
    free(weights), free(sum), free(qn), free(kn), free(kraw);
    return fail("out of memory");
  }
  const int64_t first = window == 0 || pos - window + 1 < 0 ? 0 : pos - window + 1;
  for (int64_t h = 0; h < heads; h++) {
    const int64_t g = h / (heads / kv_heads);
    const float *query = (const float *)q->data + h * dk;
    if (normed) rms_normalised(query, dk, q_norm->data, one_plus, (float)eps, qn), query = qn;
    float max = -INFINITY;
    for (int64_t j = first; j <= pos; j++) {
      for (int64_t i = 0; i < dk; i++) kraw[i] = load(k, (g * length + j) * dk + i);
      if (normed) rms_normalised(kraw, dk, k_norm->data, one_plus, (float)eps, kn);
      const float *key = normed ? kn : kraw;
      float dot = 0.0f;
      for (int64_t i = 0; i < dk; i++) dot += query[i] * key[i];
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
    for (int64_t i = 0; i < dv; i++) {
      const float out_value = sum[i] / total;
      store(o, h * dv + i, gate == NULL ? out_value : out_value * (1.0f / (1.0f + expf(-((const float *)gate->data)[h * dv + i]))));
    }
  }
  free(weights), free(sum), free(qn), free(kn), free(kraw);
  return 0;
}
