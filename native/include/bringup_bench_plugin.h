/*
 * bringup-bench kernel plugin ABI, version 1 (README, "Kernel plugins").
 *
 * A plugin is a shared library the harness loads with dlopen. It must export
 * bb_plugin_info_get; every kernel is optional (the harness skips the cases whose kernel is
 * missing). Kernels return 0 on success; on failure nonzero, with bb_last_error saying why:
 * BB_UNSUPPORTED_TYPE when the plugin has no kernel for that tensor type (the harness SKIPS that
 * case with the reason and runs the others), any other nonzero value for an error.
 * Buffers belong to the caller and are valid only during the call. Block layouts are ggml's
 * (ggml-common.h), the same bytes a GGUF file holds.
 */
#ifndef BRINGUP_BENCH_PLUGIN_H
#define BRINGUP_BENCH_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BB_PLUGIN_ABI_VERSION 1

/* A kernel's return value when it has no implementation for the requested tensor type. */
#define BB_UNSUPPORTED_TYPE 2

/* Tensor types, numbered as ggml numbers them in GGUF files. */
enum bb_type {
  BB_TYPE_F32 = 0,
  BB_TYPE_F16 = 1,
  BB_TYPE_Q8_0 = 8,
  BB_TYPE_Q4_K = 12,
  BB_TYPE_Q5_K = 13,
  BB_TYPE_Q6_K = 14
};

typedef struct bb_plugin_info {
  uint32_t abi_version; /* BB_PLUGIN_ABI_VERSION, as the plugin was built */
  const char *name;
  const char *version;
  const char *device;   /* what runs the kernels, e.g. "cpu" or "blackhole p150 x4" */
} bb_plugin_info;

/* Required. The returned struct lives as long as the library is loaded. */
const bb_plugin_info *bb_plugin_info_get(void);

/* Decodes n_values values (a whole number of blocks) of `type` into out[n_values]. */
int bb_dequantize(uint32_t type, const void *blocks, size_t n_values, float *out);

/* y[rows] = W x: W is rows x cols values of `type`, row-major, each row a whole number of blocks. */
int bb_matvec(uint32_t type, const void *weights, size_t rows, size_t cols, const float *x, float *y);

/* Why the last kernel call on this thread failed. */
const char *bb_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
