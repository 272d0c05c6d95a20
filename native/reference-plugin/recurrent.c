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

/* x / max(√Σx², 1e-6) over n values, into y: the in-kernel q/k L2 norm (as the l2_norm op). */
static void l2_normalised(const float *x, int64_t n, float *y) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; i++) sum += x[i] * x[i];
  const float scale = 1.0f / fmaxf(sqrtf(sum), 1e-6f);
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
}

/* ggml_compute_softplus_f32: log(1 + e^x), and x itself past 20 where the two agree in float32. */
static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/*
 * gdn_decode: q, k [Hk, Dk], v [H, Dv], then g, beta [H] (gating "direct") or a, b, A_log,
 * dt_bias [H] (gating "raw": g = −e^A_log·softplus(a + dt_bias), β = σ(b)), state_in [H, Dv, Dk]
 * -> o [H, Dv], state_out [H, Dv, Dk]. Attributes: scale (default 1/√Dk), heads ("tiled": q/k head
 * h mod Hk, as llama.cpp; "grouped": ⌊h/(H/Hk)⌋, as vLLM), qk_l2_norm (normalise q and k first).
 */
KERNEL(op_gdn_decode) {
  (void)encoding;
  char heads_mode[16] = "tiled", gating[16] = "direct";
  double scale_attr = 0, l2 = 0;
  if (attr_string(attrs, "heads", heads_mode, sizeof heads_mode) < 0 || attr_string(attrs, "gating", gating, sizeof gating) < 0 || attr_number(attrs, "scale", &scale_attr) < 0 || attr_number(attrs, "qk_l2_norm", &l2) < 0) return 1;
  const int grouped = strcmp(heads_mode, "grouped") == 0, raw = strcmp(gating, "raw") == 0;
  if (!grouped && strcmp(heads_mode, "tiled") != 0) return fail("attribute heads: \"%s\" is neither tiled nor grouped", heads_mode);
  if (!raw && strcmp(gating, "direct") != 0) return fail("attribute gating: \"%s\" is neither direct nor raw", gating);
  const size_t n_gates = raw ? 4 : 2;
  if (n_in != 4 + n_gates || n_out != 2) return fail(raw ? "gdn_decode with raw gating takes eight inputs (q, k, v, a, b, A_log, dt_bias, state_in) and two outputs (o, state_out)" : "gdn_decode takes six inputs (q, k, v, g, beta, state_in) and two outputs (o, state_out)");
  static const uint32_t in_dims[8] = {2, 2, 2, 1, 1, 1, 1, 3}, direct_dims[6] = {2, 2, 2, 1, 1, 3}, out_dims[2] = {2, 3};
  if (all_f32(in, n_in, raw ? in_dims : direct_dims) || all_f32(out, 2, out_dims)) return 1;
  const bb_tensor *q = &in[0], *k = &in[1], *v = &in[2], *state_in = &in[n_in - 1];
  const int64_t heads = v->shape[0], dv = v->shape[1], qk_heads = q->shape[0], dk = q->shape[1];
  const int64_t state_shape[3] = {heads, dv, dk};
  if (expect_shape(k, 2, q->shape) || expect_shape(state_in, 3, state_shape) || expect_shape(&out[0], 2, v->shape) || expect_shape(&out[1], 3, state_shape)) return 1;
  for (size_t t = 3; t < 3 + n_gates; t++) {
    if (expect_shape(&in[t], 1, &heads)) return 1;
  }
  if (qk_heads == 0 || heads % qk_heads != 0) return fail("tensor v: %lld heads are not a multiple of q's %lld", (long long)heads, (long long)qk_heads);
  const float scale = scale_attr != 0 ? (float)scale_attr : 1.0f / sqrtf((float)dk);
  float qn[dk], kn[dk];
  for (int64_t h = 0; h < heads; h++) {
    /* the state is stored transposed, as llama.cpp stores it: m[j * dk + i] = S[i][j] */
    float *m = (float *)out[1].data + h * dv * dk;
    memcpy(m, (const float *)state_in->data + h * dv * dk, (size_t)(dv * dk) * sizeof *m);
    const int64_t kh_index = grouped ? h / (heads / qk_heads) : h % qk_heads;
    const float *qh = (const float *)q->data + kh_index * dk, *kh = (const float *)k->data + kh_index * dk;
    if (l2 != 0) {
      l2_normalised(qh, dk, qn), l2_normalised(kh, dk, kn);
      qh = qn, kh = kn;
    }
    const float *vh = (const float *)v->data + h * dv;
    float log_decay, b;
    if (raw) {
      const float *a = in[3].data, *braw = in[4].data, *a_log = in[5].data, *dt_bias = in[6].data;
      log_decay = -expf(a_log[h]) * softplus(a[h] + dt_bias[h]);
      b = 1.0f / (1.0f + expf(-braw[h]));
    } else {
      log_decay = ((const float *)in[3].data)[h], b = ((const float *)in[4].data)[h];
    }
    const float decay = expf(log_decay);
    for (int64_t i = 0; i < dv * dk; i++) m[i] *= decay;
    for (int64_t j = 0; j < dv; j++) {
      float *column = m + j * dk;
      float dot = 0.0f;
      for (int64_t i = 0; i < dk; i++) dot += column[i] * kh[i];
      const float delta = (vh[j] - dot) * b;
      for (int64_t i = 0; i < dk; i++) column[i] += kh[i] * delta;
    }
    for (int64_t j = 0; j < dv; j++) {
      const float *column = m + j * dk;
      float dot = 0.0f;
      for (int64_t i = 0; i < dk; i++) dot += column[i] * qh[i];
      ((float *)out[0].data)[h * dv + j] = dot * scale;
    }
  }
  return 0;
}

/* conv1d_update: x [C], w [C, W], state_in [C, W-1] -> y [C], state_out [C, W-1]; attribute silu: y through SiLU. */
KERNEL(op_conv1d_update) {
  (void)encoding;
  double silu = 0;
  if (attr_number(attrs, "silu", &silu) < 0) return 1;
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
    ((float *)out[0].data)[c] = silu != 0 ? sum / (1.0f + expf(-sum)) : sum;
    float *next = (float *)out[1].data + c * (width - 1);
    for (int64_t i = 0; i < width - 1; i++) next[i] = i + 1 < width - 1 ? state[i + 1] : newest;
  }
  return 0;
}

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
