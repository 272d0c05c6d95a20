/*
 * The reference CPU plugin (ABI v2): every op of docs/kernel-ops.md in C with float32
 * accumulation, plus bf16-output variants that round once, at the store. This file is its
 * registry: the (op, encoding) pairs, their kernels, the attributes each op takes, and the two
 * entries that run them (bb_op_run) and time them in a tight loop (bb_op_time).
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kernel.h"
#include "ops.h"

extern _Thread_local char bb_reference_last_error[512];

typedef struct registered_op {
  bb_op_pair pair;
  bb_kernel kernel;
  /* Which input and output the encoding's <IN> and <OUT> name (docs/kernel-ops.md). */
  int principal_input;
  int principal_output;
  /* The attributes the op takes; any other is an error. NULL-terminated. */
  const char *const *attributes;
} registered_op;

static const char *const NO_ATTRS[] = {NULL};
static const char *const EPS[] = {"eps", NULL};
static const char *const SOFTMAX_ATTRS[] = {"scale", NULL};
static const char *const ROPE_ATTRS[] = {"mode", "n_dims", "freq_base", "freq_scale", NULL};
static const char *const SDPA_ATTRS[] = {"scale", "pos", "window", "qk_norm", "qk_norm_eps", "output_gate", NULL};
static const char *const TOPK_ATTRS[] = {"k", "gating", "norm", "scale", NULL};
static const char *const CONV_ATTRS[] = {"silu", NULL};
static const char *const GDN_ATTRS[] = {"scale", "heads", "qk_l2_norm", "gating", NULL};

#define OP(name, encoding, kernel, input, output, attributes) {{name, encoding}, kernel, input, output, attributes}

static const registered_op REGISTRY[] = {
    OP("dequantize", "Q8_0:F32", op_dequantize, 0, 0, NO_ATTRS),
    OP("dequantize", "Q4_K:F32", op_dequantize, 0, 0, NO_ATTRS),
    OP("dequantize", "Q5_K:F32", op_dequantize, 0, 0, NO_ATTRS),
    OP("dequantize", "Q6_K:F32", op_dequantize, 0, 0, NO_ATTRS),
    OP("matvec", "F32:F32", op_matvec, 0, 0, NO_ATTRS),
    OP("matvec", "Q8_0:F32", op_matvec, 0, 0, NO_ATTRS),
    OP("matvec", "Q4_K:F32", op_matvec, 0, 0, NO_ATTRS),
    OP("matvec", "Q5_K:F32", op_matvec, 0, 0, NO_ATTRS),
    OP("matvec", "Q6_K:F32", op_matvec, 0, 0, NO_ATTRS),
    OP("matmul_bt_quant_grouped", "Q4_K:F32", op_matmul_bt_quant_grouped, 0, 0, NO_ATTRS),
    OP("matmul_bt_quant_grouped", "Q5_K:F32", op_matmul_bt_quant_grouped, 0, 0, NO_ATTRS),
    OP("matmul_bt_quant_grouped", "Q6_K:F32", op_matmul_bt_quant_grouped, 0, 0, NO_ATTRS),
    OP("matmul_bt_quant_grouped", "Q8_0:F32", op_matmul_bt_quant_grouped, 0, 0, NO_ATTRS),
    OP("matmul_bt_quant_grouped", "Q4_K:BF16", op_matmul_bt_quant_grouped, 0, 0, NO_ATTRS),
    OP("matmul_bt_quant_grouped", "Q5_K:BF16", op_matmul_bt_quant_grouped, 0, 0, NO_ATTRS),
    OP("matmul_bt_quant_grouped", "Q6_K:BF16", op_matmul_bt_quant_grouped, 0, 0, NO_ATTRS),
    OP("matmul_bt_quant_grouped", "Q8_0:BF16", op_matmul_bt_quant_grouped, 0, 0, NO_ATTRS),
    OP("embedding_gather", "F32:F32", op_embedding_gather, 0, 0, NO_ATTRS),
    OP("embedding_gather", "F16:F32", op_embedding_gather, 0, 0, NO_ATTRS),
    OP("embedding_gather", "BF16:F32", op_embedding_gather, 0, 0, NO_ATTRS),
    OP("embedding_gather", "Q8_0:F32", op_embedding_gather, 0, 0, NO_ATTRS),
    OP("embedding_gather", "Q4_K:F32", op_embedding_gather, 0, 0, NO_ATTRS),
    OP("embedding_gather", "Q5_K:F32", op_embedding_gather, 0, 0, NO_ATTRS),
    OP("embedding_gather", "Q6_K:F32", op_embedding_gather, 0, 0, NO_ATTRS),
    OP("rms_norm", "F32:F32", op_rms_norm, 0, 0, EPS),
    OP("rms_norm", "F32:BF16", op_rms_norm, 0, 0, EPS),
    OP("l2_norm", "F32:F32", op_l2_norm, 0, 0, EPS),
    OP("silu_mul", "F32:F32", op_silu_mul, 0, 0, NO_ATTRS),
    OP("silu_mul", "F32:BF16", op_silu_mul, 0, 0, NO_ATTRS),
    OP("softmax", "F32:F32", op_softmax, 0, 0, SOFTMAX_ATTRS),
    OP("rope", "F32:F32", op_rope, 0, 0, ROPE_ATTRS),
    OP("sdpa_decode", "F32:F32", op_sdpa_decode, 1, 0, SDPA_ATTRS),
    OP("sdpa_decode", "F32:BF16", op_sdpa_decode, 1, 0, SDPA_ATTRS),
    OP("sdpa_decode", "F16:F32", op_sdpa_decode, 1, 0, SDPA_ATTRS),
    OP("gdn_decode", "F32:F32", op_gdn_decode, 0, 0, GDN_ATTRS),
    OP("conv1d_update", "F32:F32", op_conv1d_update, 0, 0, CONV_ATTRS),
    OP("ssd_decode", "F32:F32", op_ssd_decode, 0, 0, NO_ATTRS),
    OP("moe_topk", "F32:F32", op_moe_topk, 0, 1, TOPK_ATTRS),
};

#define N_REGISTERED (sizeof REGISTRY / sizeof REGISTRY[0])

const bb_plugin_info *bb_plugin_info_get(void) {
  static const bb_plugin_info info = {BB_PLUGIN_ABI_VERSION, "bringup-bench reference", "2.0.0", "cpu"};
  return &info;
}

const char *bb_last_error(void) { return bb_reference_last_error; }

const bb_op_pair *bb_ops(size_t *n_pairs) {
  static bb_op_pair pairs[N_REGISTERED];
  for (size_t i = 0; i < N_REGISTERED; i++) pairs[i] = REGISTRY[i].pair;
  *n_pairs = N_REGISTERED;
  return pairs;
}

/*
 * The registered kernel for the call, after the checks every op shares: the pair is registered,
 * the tensors the encoding names have its dtypes, and no attribute is one the op does not take.
 */
static bb_kernel resolve(const char *op, const char *encoding, const bb_tensor *inputs, size_t n_inputs, const bb_tensor *outputs, size_t n_outputs, const char *attrs, int *unknown_attribute) {
  const registered_op *entry = NULL;
  for (size_t i = 0; entry == NULL && i < N_REGISTERED; i++) {
    if (strcmp(REGISTRY[i].pair.op, op) == 0 && strcmp(REGISTRY[i].pair.encoding, encoding) == 0) entry = &REGISTRY[i];
  }
  if (entry == NULL) {
    fail("%s %s is not registered by this plugin", op, encoding);
    return NULL;
  }
  if ((size_t)entry->principal_input >= n_inputs || (size_t)entry->principal_output >= n_outputs) {
    fail("%s takes more tensors than were given", op);
    return NULL;
  }
  char expected[32];
  snprintf(expected, sizeof expected, "%s:%s", dtype_name(inputs[entry->principal_input].dtype), dtype_name(outputs[entry->principal_output].dtype));
  if (strcmp(expected, encoding) != 0) {
    fail("%s %s: the tensors are %s", op, encoding, expected);
    return NULL;
  }
  if (attrs_only(attrs, entry->attributes)) {
    *unknown_attribute = 1;
    return NULL;
  }
  return entry->kernel;
}

int bb_op_run(const char *op, const char *encoding, const bb_tensor *inputs, size_t n_inputs, bb_tensor *outputs, size_t n_outputs, const char *attrs_json) {
  int unknown_attribute = 0;
  const bb_kernel kernel = resolve(op, encoding, inputs, n_inputs, outputs, n_outputs, attrs_json, &unknown_attribute);
  // An attribute this plugin does not implement is a convention it lacks: SKIPPED by the harness, not an error.
  if (kernel == NULL) return unknown_attribute ? BB_UNSUPPORTED_TYPE : 1;
  return kernel(encoding, inputs, n_inputs, outputs, n_outputs, attrs_json);
}

static double now_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec * 1e9 + (double)now.tv_nsec;
}

/* Times the whole bb_op_run call, lookup included: the same call the harness times through the host. */
int bb_op_time(const char *op, const char *encoding, const bb_tensor *inputs, size_t n_inputs, bb_tensor *outputs, size_t n_outputs, const char *attrs_json, uint32_t warmup, uint32_t repetitions, double *ns_per_call) {
  for (uint32_t r = 0; r < warmup; r++) {
    if (bb_op_run(op, encoding, inputs, n_inputs, outputs, n_outputs, attrs_json) != 0) return 1;
  }
  for (uint32_t r = 0; r < repetitions; r++) {
    const double start = now_ns();
    const int status = bb_op_run(op, encoding, inputs, n_inputs, outputs, n_outputs, attrs_json);
    ns_per_call[r] = now_ns() - start;
    if (status != 0) return 1;
  }
  return 0;
}
