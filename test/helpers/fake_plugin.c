/*
 * FAKE kernel plugins for the kernel-suite tests, built from the reference plugin with one planted
 * fault each (a real kernel's bugs cannot be produced on demand):
 *   -DFAKE_WRONG_Q4_K  one decoded Q4_K value off by 2^-10, and a Q4_K matvec that drops each row's
 *                      last column (an off-by-one loop bound)
 *   -DFAKE_ABI_2       reports plugin ABI version 2
 *   -DFAKE_NO_MATVEC   exports no bb_matvec
 *   -DFAKE_CRASH       bb_matvec writes through a null pointer (the host process dies of SIGSEGV)
 *   -DFAKE_NO_Q6_K     has no Q6_K kernels: both return BB_UNSUPPORTED_TYPE for Q6_K
 */
#define bb_plugin_info_get reference_info_get
#define bb_dequantize reference_dequantize
#define bb_matvec reference_matvec
#define bb_last_error reference_last_error
#include "../../native/reference-plugin/reference_plugin.c"
#undef bb_plugin_info_get
#undef bb_dequantize
#undef bb_matvec
#undef bb_last_error

const bb_plugin_info *bb_plugin_info_get(void) {
#ifdef FAKE_ABI_2
  static const bb_plugin_info info = {2, "fake", "0", "cpu"};
  return &info;
#else
  static const bb_plugin_info info = {BB_PLUGIN_ABI_VERSION, "fake", "0", "cpu"};
  return &info;
#endif
}

const char *bb_last_error(void) { return reference_last_error(); }

int bb_dequantize(uint32_t type, const void *blocks, size_t n_values, float *out) {
#ifdef FAKE_NO_Q6_K
  if (type == BB_TYPE_Q6_K) return fail_with(BB_UNSUPPORTED_TYPE, "this plugin has no Q6_K kernel");
#endif
  const int status = reference_dequantize(type, blocks, n_values, out);
#ifdef FAKE_WRONG_Q4_K
  if (type == BB_TYPE_Q4_K && n_values > 300) out[300] += 1.0f / 1024;
#endif
  return status;
}

#ifndef FAKE_NO_MATVEC
int bb_matvec(uint32_t type, const void *weights, size_t rows, size_t cols, const float *x, float *y) {
#ifdef FAKE_CRASH
  *(volatile int *)0 = 0;
#endif
#ifdef FAKE_NO_Q6_K
  if (type == BB_TYPE_Q6_K) return fail_with(BB_UNSUPPORTED_TYPE, "this plugin has no Q6_K kernel");
#endif
  const int status = reference_matvec(type, weights, rows, cols, x, y);
#ifdef FAKE_WRONG_Q4_K
  if (type == BB_TYPE_Q4_K) {
    float *row = malloc(cols * sizeof *row);
    for (size_t r = 0; r < rows; r++) {
      reference_dequantize(type, (const uint8_t *)weights + r * (cols / 256 * 144), cols, row);
      y[r] -= row[cols - 1] * x[cols - 1];
    }
    free(row);
  }
#endif
  return status;
}
#endif
