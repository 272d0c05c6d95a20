/*
 * FAKE kernel plugins for the kernel-suite tests: the reference plugin with one planted fault each
 * (a real kernel's bugs cannot be produced on demand). Built by test/helpers/fake-plugin.ts with
 * -DFAKE_<fault>, linked with the reference plugin's sources; every pair the reference registers
 * stays registered (and correct) unless the fault says otherwise.
 *   DOUBLE_BF16    matmul_bt_quant_grouped *:BF16 rounds its float32 partial sum to bf16 halfway
 *                  through K, and the output again when stored
 *   UNWRITTEN_ROW  matmul_bt_quant_grouped leaves the last row of y as the caller filled it
 *   EXPERT_OFF     matmul_bt_quant_grouped reads expert (ids[p] + 1) mod E
 *   WINDOW_OFF     sdpa_decode attends one key past a sliding window (window w acts as w + 1)
 *   NO_STATE       gdn_decode, conv1d_update and ssd_decode return state_in as state_out
 *   EPS_AFTER_SQRT rms_norm scales by 1/(√mean(x²) + eps) instead of 1/√(mean(x²) + eps)
 *   NO_MAX_SUB     softmax exponentiates s·x without subtracting the row's maximum
 *   LAST_ELEMENT   every op leaves the last element of its first output as the caller filled it
 *   HEADS_TILED    sdpa_decode maps query head h to kv head h mod Hkv (tiled) instead of
 *                  ⌊h/(H/Hkv)⌋ (grouped); gdn_decode ignores heads "grouped" (stays tiled)
 *   DK_DV_SWAPPED  sdpa_decode steps through v with k's row length (Dk where Dv is meant)
 *   UNREGISTERED   does not register matmul_bt_quant_grouped Q5_K:F32 or Q5_K:BF16
 *   HALF_ACCUM     matvec Q8_0:F32 accumulates each 32-value block's partial sum in fp16 (every
 *                  add rounded to half precision), the block sums in float32
 *   WRONG_Q4_K     one decoded Q4_K value off by 2^-10, and a Q4_K matvec that drops each row's last
 *                  column (an off-by-one loop bound)
 *   NO_MATVEC      registers no matvec pair
 *   CRASH          matvec writes through a null pointer (the host process dies of SIGSEGV)
 *   ABI_3          reports plugin ABI version 3
 *   NO_CONVENTIONS gdn_decode, sdpa_decode and conv1d_update without their optional conventions
 *                  (gdn's attributes, sdpa's qk_norm and output_gate, conv1d's silu): a case that
 *                  sets one gets BB_UNSUPPORTED_TYPE
 *   NO_OPS_EXPORT  an ABI v2 plugin that does not export bb_ops (bb_op_run and bb_last_error it does)
 *   V1             an ABI version 1 plugin (bb_dequantize and bb_matvec only) over the reference kernels
 *   V1_NO_Q6_K     V1, whose two kernels return BB_UNSUPPORTED_TYPE for Q6_K: v1's way of not
 *                  registering a pair
 */
#ifdef FAKE_V1_NO_Q6_K
#define FAKE_V1
#define FAKE_NO_Q6_K
#endif

#define bb_plugin_info_get reference_info_get
#define bb_ops reference_ops
#define bb_op_run reference_op_run
#define bb_op_time reference_op_time
#include "../../native/reference-plugin/plugin.c"
#undef bb_plugin_info_get
#undef bb_ops
#undef bb_op_run
#undef bb_op_time

#include <math.h>
#include <stdlib.h>

#ifdef FAKE_ABI_3
#define FAKE_ABI 3
#elif defined(FAKE_V1)
#define FAKE_ABI 1
#else
#define FAKE_ABI BB_PLUGIN_ABI_VERSION
#endif

const bb_plugin_info *bb_plugin_info_get(void) {
  static const bb_plugin_info info = {FAKE_ABI, "fake", "0", "cpu"};
  return &info;
}

static inline int is(const char *a, const char *b) { return strcmp(a, b) == 0; }

/* A dense descriptor over `data`. */
static inline bb_tensor dense_tensor(const char *name, uint32_t dtype, uint32_t n_dims, const int64_t *shape, void *data) {
  bb_tensor t = {name, dtype, n_dims, {0}, {0}, data, 0};
  const codec *c = codec_for(dtype);
  const int64_t block_values = c == NULL ? 1 : c->block_values, block_bytes = c == NULL ? 4 : c->block_bytes;
  int64_t stride = shape[n_dims - 1] / block_values * block_bytes;
  t.strides[n_dims - 1] = block_values == 1 ? block_bytes : 0;
  for (int d = (int)n_dims - 1; d >= 0; d--) {
    t.shape[d] = shape[d];
    if (d < (int)n_dims - 1) t.strides[d] = stride, stride *= shape[d];
  }
  t.n_bytes = (size_t)stride;
  return t;
}

static inline size_t output_bytes(const bb_tensor *t) { return (size_t)elements(t) * (t->dtype == BB_TYPE_BF16 ? 2 : 4); }

#ifdef FAKE_DOUBLE_BF16
/* The grouped matmul with its partial sum stored to bf16 at the block boundary nearest K / 2. */
static int double_rounded_matmul(const bb_tensor *in, bb_tensor *y) {
  const bb_tensor *w = &in[0], *a = &in[1], *ids = &in[2];
  const int64_t n_cols = w->shape[1], k = w->shape[2];
  const codec *c = codec_for(w->dtype);
  const int64_t half = k / c->block_values / 2 * c->block_values;
  float *row = malloc((size_t)k * sizeof *row);
  for (int64_t p = 0; p < ids->shape[0]; p++) {
    const float *x = (const float *)a->data + (a->shape[0] == 1 ? 0 : p) * k;
    for (int64_t n = 0; n < n_cols; n++) {
      decode_row(c, (const uint8_t *)w->data + (load_i32(ids, p) * n_cols + n) * row_bytes(c, k), k, row);
      float sum = 0.0f;
      for (int64_t i = 0; i < k; i++) {
        if (i == half) sum = round_bf16(sum);
        sum += row[i] * x[i];
      }
      store(y, p * n_cols + n, sum);
    }
  }
  free(row);
  return 0;
}
#endif

#ifdef FAKE_EPS_AFTER_SQRT
static void eps_after_sqrt(const bb_tensor *in, bb_tensor *y, const char *attrs) {
  double eps = 0;
  attr_number(attrs, "eps", &eps);
  const int64_t rows = in[0].shape[0], n = in[0].shape[1];
  for (int64_t r = 0; r < rows; r++) {
    const float *row = (const float *)in[0].data + r * n;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += row[i] * row[i];
    const float scale = 1.0f / (sqrtf(sum / (float)n) + (float)eps);
    for (int64_t i = 0; i < n; i++) store(y, r * n + i, row[i] * scale * ((const float *)in[1].data)[i]);
  }
}
#endif

#ifdef FAKE_NO_MAX_SUB
static void softmax_without_max(const bb_tensor *x, bb_tensor *y, const char *attrs) {
  double scale = 1;
  attr_number(attrs, "scale", &scale);
  const int64_t rows = x->shape[0], n = x->shape[1];
  for (int64_t r = 0; r < rows; r++) {
    const float *row = (const float *)x->data + r * n;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += expf((float)scale * row[i]);
    for (int64_t i = 0; i < n; i++) store(y, r * n + i, expf((float)scale * row[i]) / sum);
  }
}
#endif

#ifdef FAKE_HEADS_TILED
/* Query head h, moved to the slot the grouped mapping sends to kv head h mod Hkv: (h mod Hkv)·G + ⌊h/Hkv⌋. */
static int64_t tiled_slot(int64_t h, int64_t h_kv, int64_t group) { return (h % h_kv) * group + h / h_kv; }
#endif

#ifndef FAKE_V1
#ifndef FAKE_NO_OPS_EXPORT
const bb_op_pair *bb_ops(size_t *n_pairs) {
  static bb_op_pair kept[N_REGISTERED];
  size_t n = 0;
  const bb_op_pair *all = reference_ops(n_pairs);
  for (size_t i = 0; i < *n_pairs; i++) {
#ifdef FAKE_UNREGISTERED
    if (is(all[i].op, "matmul_bt_quant_grouped") && strncmp(all[i].encoding, "Q5_K:", 5) == 0) continue;
#endif
#ifdef FAKE_NO_MATVEC
    if (is(all[i].op, "matvec")) continue;
#endif
    kept[n++] = all[i];
  }
  *n_pairs = n;
  return kept;
}
#endif

int bb_op_run(const char *op, const char *encoding, const bb_tensor *inputs, size_t n_inputs, bb_tensor *outputs, size_t n_outputs, const char *attrs_json) {
  bb_tensor in[8];
  if (n_inputs > 8) return fail("the fake plugin takes at most 8 inputs");
  memcpy(in, inputs, n_inputs * sizeof *in);
  const char *attrs = attrs_json;
#ifdef FAKE_NO_CONVENTIONS
  if ((is(op, "gdn_decode") || is(op, "conv1d_update")) && strcmp(attrs_json, "{}") != 0) return fail("this plugin's %s implements no attributes (got %s)", op, attrs_json), BB_UNSUPPORTED_TYPE;
  if (is(op, "sdpa_decode") && (strstr(attrs_json, "qk_norm") != NULL || strstr(attrs_json, "output_gate") != NULL)) return fail("this plugin's sdpa_decode has no q/k norm or output gate (got %s)", attrs_json), BB_UNSUPPORTED_TYPE;
#endif
#ifdef FAKE_CRASH
  if (is(op, "matvec")) *(volatile int *)0 = 0;
#endif
#ifdef FAKE_DOUBLE_BF16
  if (is(op, "matmul_bt_quant_grouped") && outputs[0].dtype == BB_TYPE_BF16) {
    const int status = reference_op_run(op, encoding, inputs, n_inputs, outputs, n_outputs, attrs_json);
    return status != 0 ? status : double_rounded_matmul(inputs, &outputs[0]);
  }
#endif
#ifdef FAKE_EXPERT_OFF
  int32_t *shifted = NULL;
  if (is(op, "matmul_bt_quant_grouped") && n_inputs == 3) {
    shifted = malloc((size_t)elements(&in[2]) * sizeof *shifted);
    for (int64_t p = 0; p < elements(&in[2]); p++) shifted[p] = (load_i32(&in[2], p) + 1) % (int32_t)in[0].shape[0];
    in[2].data = shifted;
  }
#endif
#ifdef FAKE_WINDOW_OFF
  char widened[128];
  double scale, pos, window;
  if (is(op, "sdpa_decode") && attr_number(attrs_json, "window", &window) == 1 && window > 0 && attr_number(attrs_json, "scale", &scale) == 1 && attr_number(attrs_json, "pos", &pos) == 1) {
    snprintf(widened, sizeof widened, "{\"scale\":%.17g,\"pos\":%.0f,\"window\":%.0f}", scale, pos, window + 1);
    attrs = widened;
  }
#endif
#ifdef FAKE_HEADS_TILED
  /* The reference kernel maps grouped; permuting the query heads (and back, the output rows) makes it tiled. */
  uint8_t *tiled_q = NULL, *tiled_o = NULL, *caller_o = NULL;
  if (is(op, "sdpa_decode")) {
    const int64_t heads = in[0].shape[0], h_kv = in[1].shape[0], group = heads / h_kv;
    const size_t q_row = in[0].n_bytes / (size_t)heads, o_row = output_bytes(&outputs[0]) / (size_t)heads;
    tiled_q = malloc(in[0].n_bytes), tiled_o = malloc(output_bytes(&outputs[0]));
    for (int64_t h = 0; h < heads; h++) memcpy(tiled_q + tiled_slot(h, h_kv, group) * q_row, (const uint8_t *)in[0].data + h * q_row, q_row);
    memcpy(tiled_o, outputs[0].data, output_bytes(&outputs[0]));
    in[0].data = tiled_q;
    caller_o = outputs[0].data;
    outputs[0].data = tiled_o;
  }
#endif
#ifdef FAKE_HEADS_TILED
  char tiled_attrs[256];
  const char *grouped = strstr(attrs_json, "\"grouped\"");
  if (is(op, "gdn_decode") && grouped != NULL && strlen(attrs_json) < sizeof tiled_attrs) {
    snprintf(tiled_attrs, sizeof tiled_attrs, "%.*s\"tiled\"%s", (int)(grouped - attrs_json), attrs_json, grouped + strlen("\"grouped\""));
    attrs = tiled_attrs;
  }
#endif
#ifdef FAKE_DK_DV_SWAPPED
  /* v read with k's row length: row j of head kv starts at value (kv·L + j)·Dk (wrapping past the end). */
  float *misread = NULL;
  if (is(op, "sdpa_decode") && in[2].dtype == BB_TYPE_F32 && in[1].shape[2] != in[2].shape[2]) {
    const int64_t total = elements(&in[2]), dk = in[1].shape[2], dv = in[2].shape[2], rows = in[2].shape[0] * in[2].shape[1];
    misread = malloc((size_t)total * sizeof *misread);
    for (int64_t row = 0; row < rows; row++)
      for (int64_t d = 0; d < dv; d++) misread[row * dv + d] = ((const float *)in[2].data)[(row * dk + d) % total];
    in[2].data = misread;
  }
#endif
#ifdef FAKE_LAST_ELEMENT
  uint8_t last[4];
  const size_t last_size = n_outputs > 0 ? (outputs[0].dtype == BB_TYPE_BF16 ? 2 : 4) : 0;
  if (n_outputs > 0) memcpy(last, (uint8_t *)outputs[0].data + (size_t)elements(&outputs[0]) * last_size - last_size, last_size);
#endif
#ifdef FAKE_UNWRITTEN_ROW
  uint8_t *sentinels = NULL;
  size_t row_size = 0;
  if (is(op, "matmul_bt_quant_grouped") && n_outputs == 1 && outputs[0].n_dims == 2) {
    row_size = output_bytes(&outputs[0]) / (size_t)outputs[0].shape[0];
    sentinels = malloc(row_size);
    memcpy(sentinels, (uint8_t *)outputs[0].data + output_bytes(&outputs[0]) - row_size, row_size);
  }
#endif
  const int status = reference_op_run(op, encoding, in, n_inputs, outputs, n_outputs, attrs);
#ifdef FAKE_EXPERT_OFF
  free(shifted);
#endif
#ifdef FAKE_HEADS_TILED
  if (tiled_q != NULL) {
    const int64_t heads = in[0].shape[0], h_kv = in[1].shape[0], group = heads / h_kv;
    const size_t o_row = output_bytes(&outputs[0]) / (size_t)heads;
    for (int64_t h = 0; h < heads; h++) memcpy(caller_o + h * o_row, tiled_o + tiled_slot(h, h_kv, group) * o_row, o_row);
    outputs[0].data = caller_o;
    free(tiled_q), free(tiled_o);
  }
#endif
#ifdef FAKE_DK_DV_SWAPPED
  free(misread);
#endif
#ifdef FAKE_LAST_ELEMENT
  if (status == 0 && n_outputs > 0) memcpy((uint8_t *)outputs[0].data + (size_t)elements(&outputs[0]) * last_size - last_size, last, last_size);
#endif
#ifdef FAKE_EPS_AFTER_SQRT
  if (status == 0 && is(op, "rms_norm")) eps_after_sqrt(in, &outputs[0], attrs);
#endif
#ifdef FAKE_NO_MAX_SUB
  if (status == 0 && is(op, "softmax")) softmax_without_max(&in[0], &outputs[0], attrs);
#endif
#ifdef FAKE_UNWRITTEN_ROW
  if (sentinels != NULL) memcpy((uint8_t *)outputs[0].data + output_bytes(&outputs[0]) - row_size, sentinels, row_size);
  free(sentinels);
#endif
#ifdef FAKE_NO_STATE
  if ((is(op, "gdn_decode") || is(op, "conv1d_update") || is(op, "ssd_decode")) && status == 0) memcpy(outputs[1].data, inputs[n_inputs - 1].data, output_bytes(&outputs[1]));
#endif
#ifdef FAKE_HALF_ACCUM
  if (status == 0 && is(encoding, "Q8_0:F32") && is(op, "matvec")) {
    const int64_t rows = in[0].shape[0], cols = in[0].shape[1];
    const codec *q8 = codec_for(BB_TYPE_Q8_0);
    const float *x = (const float *)in[1].data;
    float *row = malloc((size_t)cols * sizeof *row);
    for (int64_t r = 0; r < rows; r++) {
      decode_row(q8, (const uint8_t *)in[0].data + r * row_bytes(q8, cols), cols, row);
      float sum = 0.0f;
      for (int64_t b = 0; b < cols; b += q8->block_values) {
        _Float16 partial = 0;
        for (int64_t i = b; i < b + q8->block_values; i++) partial = (_Float16)((float)partial + row[i] * x[i]);
        sum += (float)partial;
      }
      ((float *)outputs[0].data)[r] = sum;
    }
    free(row);
  }
#endif
#ifdef FAKE_WRONG_Q4_K
  if (status == 0 && is(encoding, "Q4_K:F32") && is(op, "dequantize") && elements(&outputs[0]) > 300) ((float *)outputs[0].data)[300] += 1.0f / 1024;
  if (status == 0 && is(encoding, "Q4_K:F32") && is(op, "matvec")) {
    const int64_t rows = in[0].shape[0], cols = in[0].shape[1];
    float *row = malloc((size_t)cols * sizeof *row);
    for (int64_t r = 0; r < rows; r++) {
      decode_row(codec_for(BB_TYPE_Q4_K), (const uint8_t *)in[0].data + r * row_bytes(codec_for(BB_TYPE_Q4_K), cols), cols, row);
      ((float *)outputs[0].data)[r] -= row[cols - 1] * ((const float *)in[1].data)[cols - 1];
    }
    free(row);
  }
#endif
  return status;
}
#else
/* ABI v1: the two kernels, over the reference plugin's v2 entry. */
static const char *v1_encoding(uint32_t type) {
  switch (type) {
    case BB_TYPE_F32: return "F32:F32";
    case BB_TYPE_F16: return "F16:F32";
    case BB_TYPE_Q8_0: return "Q8_0:F32";
    case BB_TYPE_Q4_K: return "Q4_K:F32";
    case BB_TYPE_Q5_K: return "Q5_K:F32";
    case BB_TYPE_Q6_K: return "Q6_K:F32";
    default: return "?";
  }
}

#ifdef FAKE_NO_Q6_K
#define REFUSE_Q6_K(type) \
  if ((type) == BB_TYPE_Q6_K) return fail("this plugin has no Q6_K kernel"), BB_UNSUPPORTED_TYPE
#else
#define REFUSE_Q6_K(type)
#endif

int bb_dequantize(uint32_t type, const void *blocks, size_t n_values, float *out) {
  REFUSE_Q6_K(type);
  const int64_t n = (int64_t)n_values;
  const bb_tensor x = dense_tensor("x", type, 1, &n, (void *)blocks);
  bb_tensor y = dense_tensor("y", BB_TYPE_F32, 1, &n, out);
  return reference_op_run("dequantize", v1_encoding(type), &x, 1, &y, 1, "{}");
}

int bb_matvec(uint32_t type, const void *weights, size_t rows, size_t cols, const float *x, float *y) {
  REFUSE_Q6_K(type);
  const int64_t shape[2] = {(int64_t)rows, (int64_t)cols};
  const bb_tensor in[2] = {dense_tensor("w", type, 2, shape, (void *)weights), dense_tensor("x", BB_TYPE_F32, 1, &shape[1], (void *)x)};
  bb_tensor out = dense_tensor("y", BB_TYPE_F32, 1, &shape[0], y);
  return reference_op_run("matvec", v1_encoding(type), in, 2, &out, 1, "{}");
}
#endif
