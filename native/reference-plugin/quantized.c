/*
 * The ops over ggml block tensors that predate ABI v2: dequantize (decode every block, bit-exact)
 * and matvec (decode a row, accumulate in float32 in index order, the way a device kernel would).
 */
#include <stdlib.h>

#include "kernel.h"

/* dequantize: blocks [n] of the encoding's type -> y F32 [n]. */
int op_dequantize(const char *encoding, const bb_tensor *in, size_t n_in, bb_tensor *out, size_t n_out, const char *attrs) {
  (void)encoding, (void)attrs;
  if (n_in != 1 || n_out != 1) return fail("dequantize takes one input (blocks) and one output (y)");
  const bb_tensor *blocks = &in[0];
  bb_tensor *y = &out[0];
  if (expect(blocks, 1, BLOCK_TYPES | FLOAT_TYPES) || expect(y, 1, TYPE_BIT(BB_TYPE_F32)) || expect_shape(y, 1, blocks->shape)) return 1;
  decode_row(codec_for(blocks->dtype), blocks->data, blocks->shape[0], y->data);
  return 0;
}

/* matvec: w [rows, cols] of the encoding's type, x F32 [cols] -> y F32 [rows]. */
int op_matvec(const char *encoding, const bb_tensor *in, size_t n_in, bb_tensor *out, size_t n_out, const char *attrs) {
  (void)encoding, (void)attrs;
  if (n_in != 2 || n_out != 1) return fail("matvec takes two inputs (w, x) and one output (y)");
  const bb_tensor *w = &in[0], *x = &in[1];
  bb_tensor *y = &out[0];
  if (expect(w, 2, BLOCK_TYPES | FLOAT_TYPES) || expect(x, 1, TYPE_BIT(BB_TYPE_F32)) || expect(y, 1, TYPE_BIT(BB_TYPE_F32))) return 1;
  const int64_t rows = w->shape[0], cols = w->shape[1];
  if (expect_shape(x, 1, &w->shape[1]) || expect_shape(y, 1, &w->shape[0])) return 1;
  const codec *c = codec_for(w->dtype);
  float *row = malloc((size_t)cols * sizeof *row);
  if (row == NULL) return fail("out of memory");
  const float *xs = x->data;
  for (int64_t r = 0; r < rows; r++) {
    decode_row(c, (const uint8_t *)w->data + r * row_bytes(c, cols), cols, row);
    float sum = 0.0f;
    for (int64_t i = 0; i < cols; i++) sum += row[i] * xs[i];
    ((float *)y->data)[r] = sum;
  }
  free(row);
  return 0;
}
