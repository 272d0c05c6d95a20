/*
 * One decode step of the three recurrent layers whose state a bring-up carries between tokens:
 * gated delta net (ggml gated_delta_net, scalar gate), the causal conv1d state update (ggml
 * ssm_conv) and Mamba-2's SSD scan (ggml ssm_scan, scalar A per head). state_in is read-only;
 * state_out is written whole. Accumulation is float32 in index order.
 */
#include <math.h>
#include <string.h>

#include "ops.h"

static int all_f32(const bb_tensor *tensors, size_t n, const uint32_t *n_dims) {
  for (size_t i = 0; i < n; i++) {
    if (expect(&tensors[i], n_dims[i], TYPE_BIT(BB_TYPE_F32))) return 1;
  }
  return 0;
}

/* gdn_decode: q, k [Hk, S], v [H, S], g, beta [H], state_in [H, S, S] -> o [H, S], state_out [H, S, S]. */
KERNEL(op_gdn_decode) {
  (void)encoding, (void)attrs;
  if (n_in != 6 || n_out != 2) return fail("gdn_decode takes six inputs (q, k, v, g, beta, state_in) and two outputs (o, state_out)");
  static const uint32_t in_dims[6] = {2, 2, 2, 1, 1, 3}, out_dims[2] = {2, 3};
  if (all_f32(in, 6, in_dims) || all_f32(out, 2, out_dims)) return 1;
  const bb_tensor *q = &in[0], *k = &in[1], *v = &in[2], *g = &in[3], *beta = &in[4], *state_in = &in[5];
  const int64_t heads = v->shape[0], s = v->shape[1], qk_heads = q->shape[0];
  const int64_t qk_shape[2] = {qk_heads, s}, state_shape[3] = {heads, s, s};
  if (expect_shape(k, 2, qk_shape) || expect_shape(q, 2, qk_shape) || expect_shape(g, 1, &heads) || expect_shape(beta, 1, &heads) || expect_shape(state_in, 3, state_shape) || expect_shape(&out[0], 2, v->shape) || expect_shape(&out[1], 3, state_shape)) return 1;
  if (qk_heads == 0 || heads % qk_heads != 0) return fail("tensor v: %lld heads are not a multiple of q's %lld", (long long)heads, (long long)qk_heads);
  const float scale = 1.0f / sqrtf((float)s);
  for (int64_t h = 0; h < heads; h++) {
    /* the state is stored transposed, as llama.cpp stores it: m[j * s + i] = S[i][j] */
    float *m = (float *)out[1].data + h * s * s;
    memcpy(m, (const float *)state_in->data + h * s * s, (size_t)(s * s) * sizeof *m);
    const float *qh = (const float *)q->data + (h % qk_heads) * s, *kh = (const float *)k->data + (h % qk_heads) * s;
    const float *vh = (const float *)v->data + h * s;
    const float decay = expf(((const float *)g->data)[h]), b = ((const float *)beta->data)[h];
    for (int64_t i = 0; i < s * s; i++) m[i] *= decay;
    for (int64_t j = 0; j < s; j++) {
      float *column = m + j * s;
      float dot = 0.0f;
      for (int64_t i = 0; i < s; i++) dot += column[i] * kh[i];
      const float delta = (vh[j] - dot) * b;
      for (int64_t i = 0; i < s; i++) column[i] += kh[i] * delta;
    }
    for (int64_t j = 0; j < s; j++) {
      const float *column = m + j * s;
      float dot = 0.0f;
      for (int64_t i = 0; i < s; i++) dot += column[i] * qh[i];
      ((float *)out[0].data)[h * s + j] = dot * scale;
    }
  }
  return 0;
}

/* conv1d_update: x [C], w [C, W], state_in [C, W-1] -> y [C], state_out [C, W-1]. */
KERNEL(op_conv1d_update) {
  (void)encoding, (void)attrs;
  if (n_in != 3 || n_out != 2) return fail("conv1d_update takes three inputs (x, w, state_in) and two outputs (y, state_out)");
  static const uint32_t in_dims[3] = {1, 2, 2}, out_dims[2] = {1, 2};
  if (all_f32(in, 3, in_dims) || all_f32(out, 2, out_dims)) return 1;
  const bb_tensor *x = &in[0], *w = &in[1], *state_in = &in[2];
  const int64_t channels = x->shape[0], width = w->shape[1];
  const int64_t w_shape[2] = {channels, width}, state_shape[2] = {channels, width - 1};
  if (width < 1 || expect_shape(w, 2, w_shape) || expect_shape(state_in, 2, state_shape) || expect_shape(&out[0], 1, x->shape) || expect_shape(&out[1], 2, state_shape)) return 1;
  for (int64_t c = 0; c < channels; c++) {
    const float *state = (const float *)state_in->data + c * (width - 1), *taps = (const float *)w->data + c * width;
    const float newest = ((const float *)x->data)[c];
    float sum = 0.0f;
    for (int64_t i = 0; i < width; i++) sum += (i < width - 1 ? state[i] : newest) * taps[i];
    ((float *)out[0].data)[c] = sum;
    float *next = (float *)out[1].data + c * (width - 1);
    for (int64_t i = 0; i < width - 1; i++) next[i] = i + 1 < width - 1 ? state[i + 1] : newest;
  }
  return 0;
}

/* ggml_compute_softplus_f32: log(1 + e^x), and x itself past 20 where the two agree in float32. */
static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* ssd_decode: x [H, P], dt, A [H], B, C [G, N], state_in [H, P, N] -> y [H, P], state_out [H, P, N]. */
KERNEL(op_ssd_decode) {
  (void)encoding, (void)attrs;
  if (n_in != 6 || n_out != 2) return fail("ssd_decode takes six inputs (x, dt, A, B, C, state_in) and two outputs (y, state_out)");
  static const uint32_t in_dims[6] = {2, 1, 1, 2, 2, 3}, out_dims[2] = {2, 3};
  if (all_f32(in, 6, in_dims) || all_f32(out, 2, out_dims)) return 1;
  const bb_tensor *x = &in[0], *dt = &in[1], *a = &in[2], *b = &in[3], *c = &in[4], *state_in = &in[5];
  const int64_t heads = x->shape[0], head_dim = x->shape[1], groups = b->shape[0], n = b->shape[1];
  const int64_t state_shape[3] = {heads, head_dim, n};
  if (expect_shape(dt, 1, &heads) || expect_shape(a, 1, &heads) || expect_shape(c, 2, b->shape) || expect_shape(state_in, 3, state_shape) || expect_shape(&out[0], 2, x->shape) || expect_shape(&out[1], 3, state_shape)) return 1;
  if (groups == 0 || heads % groups != 0) return fail("tensor x: %lld heads are not a multiple of B's %lld groups", (long long)heads, (long long)groups);
  for (int64_t h = 0; h < heads; h++) {
    const float dt_plus = softplus(((const float *)dt->data)[h]);
    const float decay = expf(dt_plus * ((const float *)a->data)[h]);
    const int64_t g = h / (heads / groups);
    const float *bg = (const float *)b->data + g * n, *cg = (const float *)c->data + g * n;
    for (int64_t p = 0; p < head_dim; p++) {
      const int64_t row = h * head_dim + p;
      const float x_dt = ((const float *)x->data)[row] * dt_plus;
      const float *s0 = (const float *)state_in->data + row * n;
      float *s = (float *)out[1].data + row * n;
      float sum = 0.0f;
      for (int64_t i = 0; i < n; i++) {
        s[i] = s0[i] * decay + bg[i] * x_dt;
        sum += s[i] * cg[i];
      }
      ((float *)out[0].data)[row] = sum;
    }
  }
  return 0;
}
