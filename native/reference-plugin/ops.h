/* The reference plugin's kernels, one per op of docs/kernel-ops.md (registered in plugin.c). */
#ifndef BB_REFERENCE_OPS_H
#define BB_REFERENCE_OPS_H

#include "kernel.h"

#define KERNEL(name) int name(const char *encoding, const bb_tensor *in, size_t n_in, bb_tensor *out, size_t n_out, const char *attrs)

KERNEL(op_dequantize);                /* quantized.c */
KERNEL(op_matvec);                    /* quantized.c */
KERNEL(op_matmul_bt_quant_grouped);   /* matmul.c */
KERNEL(op_embedding_gather);          /* gather.c */
KERNEL(op_rms_norm);                  /* norms.c */
KERNEL(op_l2_norm);                   /* norms.c */
KERNEL(op_silu_mul);                  /* activations.c */
KERNEL(op_softmax);                   /* activations.c */
KERNEL(op_rope);                      /* rope.c */
KERNEL(op_sdpa_decode);               /* attention.c */
KERNEL(op_gdn_decode);                /* recurrent.c */
KERNEL(op_conv1d_update);             /* recurrent.c */
KERNEL(op_ssd_decode);                /* recurrent.c */
KERNEL(op_moe_topk);                  /* moe.c */

#endif
