/*
 * bringup-bench kernel plugin ABI, version 2 (docs/kernel-plugins.md; the ops are in
 * docs/kernel-ops.md).
 *
 * A plugin is a shared library the harness loads with dlopen, in a host process of its own (a
 * plugin that crashes errors the check it was running, not the run). Every symbol is C.
 *
 * Version 2: one generic entry, bb_op_run, carries every op. An op is named by a string
 * ("rms_norm", "matmul_bt_quant_grouped", ...), its tensors are descriptors (bb_tensor), and its
 * attributes are one JSON object, so a new op needs no ABI change. The plugin lists the
 * (op, encoding) pairs it implements (bb_ops); the host refuses a pair that is not listed by name
 * and the harness reports the case SKIPPED with that reason — never passed.
 *
 * Required in v2: bb_plugin_info_get (abi_version 2), bb_ops, bb_op_run, bb_last_error.
 * Optional: bb_op_time (the plugin times its own kernel; otherwise the host times bb_op_run in a
 * tight loop).
 *
 * Version 1 (bb_dequantize and bb_matvec, no bb_ops / bb_op_run) is still hosted: the host detects the
 * version from bb_plugin_info_get and maps the v1 kernels onto the ops "dequantize" and "matvec"
 * with encodings "<type>:F32" for every v1 tensor type. v1 cannot list its types, so a v1 kernel
 * returns BB_UNSUPPORTED_TYPE for a type it has no kernel for: the harness treats that exactly as
 * an unregistered pair (that case SKIPPED by name, the other cases still run). The v1
 * declarations are kept at the end of this header.
 *
 * Conventions:
 * - Kernels return 0 on success; on failure nonzero, with bb_last_error saying why (one line).
 * - Every buffer belongs to the caller and is valid only during the call. Outputs arrive
 *   pre-filled by the caller (with sentinels): a kernel writes every output element, or the
 *   element it skipped shows.
 * - Block layouts are ggml's (ggml-common.h), the same bytes a GGUF file holds.
 * - A plugin may be called from one thread at a time; it need not be reentrant.
 */
#ifndef BRINGUP_BENCH_PLUGIN_H
#define BRINGUP_BENCH_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BB_PLUGIN_ABI_VERSION 2

/* The ABI's entries stay visible when a plugin is built with -fvisibility=hidden (as it should be:
   a plugin exports these symbols and nothing else). */
#if defined(__GNUC__)
#define BB_API __attribute__((visibility("default")))
#else
#define BB_API
#endif

/* Element types, numbered as ggml numbers them in GGUF files. */
enum bb_type {
  BB_TYPE_F32 = 0,
  BB_TYPE_F16 = 1,
  BB_TYPE_Q8_0 = 8,
  BB_TYPE_Q4_K = 12,
  BB_TYPE_Q5_K = 13,
  BB_TYPE_Q6_K = 14,
  BB_TYPE_I32 = 26,
  BB_TYPE_BF16 = 30
};

typedef struct bb_plugin_info {
  uint32_t abi_version; /* BB_PLUGIN_ABI_VERSION, as the plugin was built */
  const char *name;
  const char *version;
  const char *device;   /* what runs the kernels, e.g. "cpu" or "blackhole p150 x4" */
} bb_plugin_info;

/* Required. The returned struct lives as long as the library is loaded. */
BB_API const bb_plugin_info *bb_plugin_info_get(void);

/* Why the last call on this thread failed. */
BB_API const char *bb_last_error(void);

/* ---- version 2 ---------------------------------------------------------------------------- */

#define BB_MAX_DIMS 4

/*
 * One tensor of an op. shape is outermost first (NumPy order), in elements; shape[n_dims - 1] is
 * the innermost dimension. strides[d] is the distance in bytes between consecutive indices along
 * d. For a block type (Q8_0, Q4_K, Q5_K, Q6_K) the innermost dimension is whole packed blocks and
 * its stride is 0: a row of n values takes n / block_values * block_bytes bytes. The harness
 * passes dense row-major tensors today; a plugin that needs them dense checks the strides and
 * refuses others by name.
 */
typedef struct bb_tensor {
  const char *name;              /* the op's name for it (docs/kernel-ops.md), e.g. "w", "a", "ids", "y" */
  uint32_t dtype;                /* enum bb_type */
  uint32_t n_dims;               /* 1 .. BB_MAX_DIMS */
  int64_t shape[BB_MAX_DIMS];
  int64_t strides[BB_MAX_DIMS];  /* bytes */
  void *data;                    /* inputs are read-only; outputs arrive sentinel-filled */
  size_t n_bytes;                /* the whole buffer, for the plugin's own bounds checks */
} bb_tensor;

/*
 * One (op, encoding) pair the plugin implements. The encoding is "<IN>:<OUT>", the dtype names of
 * the op's principal input and output (docs/kernel-ops.md): "Q4_K:BF16" is the grouped matmul
 * reading Q4_K weights and storing bf16.
 */
typedef struct bb_op_pair {
  const char *op;
  const char *encoding;
} bb_op_pair;

/* Required in v2. The pairs (*n_pairs of them); the array lives as long as the library is loaded. */
BB_API const bb_op_pair *bb_ops(size_t *n_pairs);

/*
 * Required in v2. Runs one registered pair. inputs and outputs are in the order the op's contract
 * lists them (their names are given too); attrs_json is one flat JSON object, never NULL ("{}"
 * for an op without attributes). Returns 0, or BB_UNSUPPORTED_TYPE (with bb_last_error naming
 * it) for an attribute or convention the plugin does not implement (gdn_decode's `heads`, say):
 * the case is then SKIPPED with that reason, never passed; any other nonzero value is an error.
 */
BB_API int bb_op_run(const char *op, const char *encoding, const bb_tensor *inputs, size_t n_inputs,
                     bb_tensor *outputs, size_t n_outputs, const char *attrs_json);

/*
 * Optional in v2: the plugin times its own kernel (a device plugin with device timestamps, say).
 * Runs the bb_op_run call `warmup` times untimed, then `repetitions` times back to back, each
 * timed alone, writing nanoseconds per call to ns_per_call[repetitions]. Without it the host times
 * bb_op_run in the same tight loop with CLOCK_MONOTONIC.
 */
BB_API int bb_op_time(const char *op, const char *encoding, const bb_tensor *inputs, size_t n_inputs,
                      bb_tensor *outputs, size_t n_outputs, const char *attrs_json, uint32_t warmup,
                      uint32_t repetitions, double *ns_per_call);

/* ---- version 1 (still hosted; the host maps these onto "dequantize" and "matvec") ----------- */

/* A v1 kernel's return value when it has no kernel for the requested tensor type, and bb_op_run's
   for an attribute it does not implement (any other nonzero value is an error). */
#define BB_UNSUPPORTED_TYPE 2

/* Decodes n_values values (a whole number of blocks) of `type` into out[n_values]. */
BB_API int bb_dequantize(uint32_t type, const void *blocks, size_t n_values, float *out);

/* y[rows] = W x: W is rows x cols values of `type`, row-major, each row a whole number of blocks. */
BB_API int bb_matvec(uint32_t type, const void *weights, size_t rows, size_t cols, const float *x, float *y);

#ifdef __cplusplus
}
#endif

#endif
