/*
 * matmul_bt_quant_grouped: y[p, n] = Σ_k W[ids[p], n, k] · a[Pa == 1 ? 0 : p, k], the grouped
 * (mixture-of-experts) quantized matmul with the weights transposed, as llama.cpp's mul_mat_id
 * computes it, except that the activation stays float32 (docs/kernel-ops.md). Each weight row is
 * decoded once and applied to every row routed to its expert; the dot product accumulates in
 * float32 in index order and the output is rounded once when stored (bf16 outputs).
 */
#include <stdlib.h>

#include "ops.h"

KERNEL(op_matmul_bt_quant_grouped) {
  (void)encoding, (void)attrs;
  if (n_in != 3 || n_out != 1) return fail("matmul_bt_quant_grouped takes three inputs (w, a, ids) and one output (y)");
  const bb_tensor *w = &in[0], *a = &in[1], *ids = &in[2];
  bb_tensor *y = &out[0];
  if (expect(w, 3, BLOCK_TYPES) || expect(a, 2, TYPE_BIT(BB_TYPE_F32)) || expect(ids, 1, TYPE_BIT(BB_TYPE_I32)) || expect(y, 2, OUT_TYPES)) return 1;
  const int64_t experts = w->shape[0], n_cols = w->shape[1], k = w->shape[2], rows = ids->shape[0];
  const int64_t y_shape[2] = {rows, n_cols};
  if (expect_shape(y, 2, y_shape)) return 1;
  if (a->shape[1] != k || (a->shape[0] != 1 && a->shape[0] != rows)) return fail("tensor a: shape [%lld, %lld], this op needs [1 or %lld, %lld]", (long long)a->shape[0], (long long)a->shape[1], (long long)rows, (long long)k);
  for (int64_t p = 0; p < rows; p++) {
    const int32_t e = load_i32(ids, p);
    if (e < 0 || e >= experts) return fail("ids[%lld] = %d is not one of the %lld experts", (long long)p, e, (long long)experts);
  }
  const codec *c = codec_for(w->dtype);
  const int64_t stride = row_bytes(c, k);
  float *row = malloc((size_t)k * sizeof *row);
  if (row == NULL) return fail("out of memory");
  const float *activations = a->data;
  for (int64_t e = 0; e < experts; e++) {
    int used = 0;
    for (int64_t p = 0; !used && p < rows; p++) used = load_i32(ids, p) == e;
    if (!used) continue;
    for (int64_t n = 0; n < n_cols; n++) {
      decode_row(c, (const uint8_t *)w->data + (e * n_cols + n) * stride, k, row);
      for (int64_t p = 0; p < rows; p++) {
        if (load_i32(ids, p) != e) continue;
        const float *x = activations + (a->shape[0] == 1 ? 0 : p) * k;
        float sum = 0.0f;
        for (int64_t i = 0; i < k; i++) sum += row[i] * x[i];
        store(y, p * n_cols + n, sum);
      }
    }
  }
  free(row);
  return 0;
}
