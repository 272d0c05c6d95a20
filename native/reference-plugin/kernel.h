/*
 * What the reference plugin's op files share: the kernel signature, failure reporting, element
 * loads and stores (the output's type decides whether a value is rounded to bf16, once, as it is
 * stored), tensor checks, ggml block decodes and the JSON attribute reader.
 */
#ifndef BB_REFERENCE_KERNEL_H
#define BB_REFERENCE_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "bringup_bench_plugin.h"

/* One op: checks its tensors and attributes against its contract (docs/kernel-ops.md), then runs. */
typedef int (*bb_kernel)(const char *encoding, const bb_tensor *in, size_t n_in, bb_tensor *out, size_t n_out, const char *attrs);

/* Records why the call failed (printf-style) and returns 1, for `return fail(...)`. */
int fail(const char *format, ...);

/* ---- numbers ---- */
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);
/* Round to nearest even; NaN stays NaN. */
uint16_t f32_to_bf16(float f);
/* The value a bf16 store would keep, as a float. */
float round_bf16(float f);

/* ---- tensors ---- */
/* "F32", "Q4_K", ...: the names encodings are spelled with. */
const char *dtype_name(uint32_t dtype);
int64_t elements(const bb_tensor *t);
/*
 * The tensor is dense row-major, has `n_dims` dimensions and one of the `types` (a bitmask of
 * (1u << type) bits, types below 32); otherwise fails naming the tensor.
 */
int expect(const bb_tensor *t, uint32_t n_dims, uint64_t types);
#define TYPE_BIT(type) (1ull << (type))
#define FLOAT_TYPES (TYPE_BIT(BB_TYPE_F32) | TYPE_BIT(BB_TYPE_F16) | TYPE_BIT(BB_TYPE_BF16))
#define BLOCK_TYPES (TYPE_BIT(BB_TYPE_Q8_0) | TYPE_BIT(BB_TYPE_Q4_K) | TYPE_BIT(BB_TYPE_Q5_K) | TYPE_BIT(BB_TYPE_Q6_K))
#define OUT_TYPES (TYPE_BIT(BB_TYPE_F32) | TYPE_BIT(BB_TYPE_BF16))
/* Fails unless the tensor's shape is exactly the n_dims values given. */
int expect_shape(const bb_tensor *t, uint32_t n_dims, const int64_t *shape);

/* Element i of a dense F32 / F16 / BF16 tensor. */
float load(const bb_tensor *t, int64_t i);
int32_t load_i32(const bb_tensor *t, int64_t i);
/* Stores v at element i of an F32 or BF16 output (BF16: the one rounding of the op). */
void store(bb_tensor *t, int64_t i, float v);

/* ---- ggml blocks (blocks.c) ---- */
typedef struct codec {
  int64_t block_values;
  int64_t block_bytes;
  void (*decode_block)(const uint8_t *block, float *y);
} codec;
/* F32, F16, BF16 and the block types; NULL for others. */
const codec *codec_for(uint32_t type);
/* Decodes n values (whole blocks) starting at `bytes`. */
void decode_row(const codec *c, const uint8_t *bytes, int64_t n, float *y);
int64_t row_bytes(const codec *c, int64_t n);

/* ---- attributes (attrs.c): one flat JSON object ---- */
/* 1 and *value set when present, 0 when absent, -1 (and fail() called) when malformed. */
int attr_number(const char *json, const char *key, double *value);
int attr_string(const char *json, const char *key, char *value, size_t size);
/* Required attributes: 0 on success, else fails naming the attribute. */
int need_number(const char *json, const char *key, double *value);
int need_int(const char *json, const char *key, int64_t *value);
/* 0 when every key of the object is one of `keys` (NULL-terminated), else fails naming the stranger. */
int attrs_only(const char *json, const char *const *keys);

#endif
