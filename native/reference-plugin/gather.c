/* embedding_gather: y[t] = decode(table[ids[t]]), ggml's get_rows; bit-exact for every table type. */
#include "ops.h"

KERNEL(op_embedding_gather) {
  (void)encoding, (void)attrs;
  if (n_in != 2 || n_out != 1) return fail("embedding_gather takes two inputs (table, ids) and one output (y)");
  const bb_tensor *table = &in[0], *ids = &in[1];
  bb_tensor *y = &out[0];
  if (expect(table, 2, BLOCK_TYPES | FLOAT_TYPES) || expect(ids, 1, TYPE_BIT(BB_TYPE_I32)) || expect(y, 2, TYPE_BIT(BB_TYPE_F32))) return 1;
  const int64_t vocabulary = table->shape[0], width = table->shape[1], tokens = ids->shape[0];
  const int64_t y_shape[2] = {tokens, width};
  if (expect_shape(y, 2, y_shape)) return 1;
  const codec *c = codec_for(table->dtype);
  for (int64_t t = 0; t < tokens; t++) {
    const int32_t id = load_i32(ids, t);
    if (id < 0 || id >= vocabulary) return fail("ids[%lld] = %d is outside the table's %lld rows", (long long)t, id, (long long)vocabulary);
    decode_row(c, (const uint8_t *)table->data + id * row_bytes(c, width), width, (float *)y->data + t * width);
  }
  return 0;
}
