/*
 * moe_topk: the router's k experts per token. Probabilities are a float32 softmax or sigmoid of the
 * logits; experts are picked by probability, descending, ties to the lower index (what llama.cpp's
 * argsort gives for routers of up to 16 experts; the contract for any E); their weights are
 * divided by their sum when `norm`, then multiplied by `scale`.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

KERNEL(op_moe_topk) {
  (void)encoding;
  if (n_in != 1 || n_out != 2) return fail("moe_topk takes one input (logits) and two outputs (ids, weights)");
  const bb_tensor *logits = &in[0];
  bb_tensor *ids = &out[0], *weights = &out[1];
  if (expect(logits, 2, TYPE_BIT(BB_TYPE_F32)) || expect(ids, 2, TYPE_BIT(BB_TYPE_I32)) || expect(weights, 2, TYPE_BIT(BB_TYPE_F32))) return 1;
  int64_t k;
  double norm, scale;
  char gating[16];
  if (need_int(attrs, "k", &k) || need_number(attrs, "norm", &norm) || need_number(attrs, "scale", &scale)) return 1;
  const int found = attr_string(attrs, "gating", gating, sizeof gating);
  if (found <= 0) return found == 0 ? fail("attribute gating is required") : 1;
  const int sigmoid = strcmp(gating, "sigmoid") == 0;
  if (!sigmoid && strcmp(gating, "softmax") != 0) return fail("attribute gating: \"%s\" is neither \"softmax\" nor \"sigmoid\"", gating);
  const int64_t tokens = logits->shape[0], experts = logits->shape[1];
  if (k < 1 || k > experts) return fail("attribute k: %lld is not between 1 and the %lld experts", (long long)k, (long long)experts);
  const int64_t out_shape[2] = {tokens, k};
  if (expect_shape(ids, 2, out_shape) || expect_shape(weights, 2, out_shape)) return 1;
  float *p = malloc((size_t)experts * sizeof *p);
  if (p == NULL) return fail("out of memory");
  for (int64_t t = 0; t < tokens; t++) {
    const float *row = (const float *)logits->data + t * experts;
    if (sigmoid) {
      for (int64_t e = 0; e < experts; e++) p[e] = 1.0f / (1.0f + expf(-row[e]));
    } else {
      float max = -INFINITY, total = 0.0f;
      for (int64_t e = 0; e < experts; e++) max = fmaxf(max, row[e]);
      for (int64_t e = 0; e < experts; e++) total += p[e] = expf(row[e] - max);
      for (int64_t e = 0; e < experts; e++) p[e] /= total;
    }
    int32_t *chosen = (int32_t *)ids->data + t * k;
    float *w = (float *)weights->data + t * k;
    float picked = 0.0f;
    for (int64_t slot = 0; slot < k; slot++) {
      int64_t best = -1;
      for (int64_t e = 0; e < experts; e++) {
        int taken = 0;
        for (int64_t s = 0; !taken && s < slot; s++) taken = chosen[s] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      chosen[slot] = (int32_t)best;
      w[slot] = p[best];
      picked += p[best];
    }
    for (int64_t slot = 0; slot < k; slot++) w[slot] = (norm != 0.0 ? w[slot] / picked : w[slot]) * (float)scale;
  }
  free(p);
  return 0;
}
