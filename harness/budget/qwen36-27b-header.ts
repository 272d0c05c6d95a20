import { gguf, encodeGgufHeader, type TensorShape } from "../gguf/write.js";
import { GgmlType, GgufValueType } from "../gguf/types.js";

/**
 * Qwen3.6-27B's public shapes (hybrid: every 4th layer gated attention, the rest gated delta net),
 * as a header-only GGUF: 64 layers, hidden 5120, FFN 17408, vocabulary 248320, untied head;
 * attention 24 heads of 256 with 4 KV heads; delta net 16 key heads and 48 value heads of 128,
 * convolution kernel 4. The tensor-type mix is a stated Q4_K_M-like one (see docs/memory-budget.md):
 * Q6_K for the head, attn_v and every other ffn_down; Q5_K for the delta-net output projections;
 * Q4_K for the rest of the projections and the embedding; F32 for norms, gates and kernels.
 */
export const QWEN36_27B = {
  layers: 64, hidden: 5120, ffn: 17408, vocabulary: 248320, attentionInterval: 4,
  heads: 24, kvHeads: 4, headDim: 256, keyHeads: 16, valueHeads: 48, deltaHeadDim: 128, convKernel: 4,
} as const;

export function qwen36_27bTensors(): TensorShape[] {
  const s = QWEN36_27B;
  const tensors: TensorShape[] = [
    { name: "token_embd.weight", dims: [s.hidden, s.vocabulary], type: GgmlType.Q4_K },
    { name: "output_norm.weight", dims: [s.hidden], type: GgmlType.F32 },
    { name: "output.weight", dims: [s.hidden, s.vocabulary], type: GgmlType.Q6_K },
  ];
  const keyDim = s.keyHeads * s.deltaHeadDim;
  const valueDim = s.valueHeads * s.deltaHeadDim;
  for (let l = 0; l < s.layers; l++) {
    const b = `blk.${l}`;
    tensors.push({ name: `${b}.attn_norm.weight`, dims: [s.hidden], type: GgmlType.F32 }, { name: `${b}.post_attention_norm.weight`, dims: [s.hidden], type: GgmlType.F32 });
    if ((l + 1) % s.attentionInterval === 0) {
      tensors.push(
        { name: `${b}.attn_q.weight`, dims: [s.hidden, 2 * s.heads * s.headDim], type: GgmlType.Q4_K },
        { name: `${b}.attn_k.weight`, dims: [s.hidden, s.kvHeads * s.headDim], type: GgmlType.Q4_K },
        { name: `${b}.attn_v.weight`, dims: [s.hidden, s.kvHeads * s.headDim], type: GgmlType.Q6_K },
        { name: `${b}.attn_output.weight`, dims: [s.heads * s.headDim, s.hidden], type: GgmlType.Q4_K },
        { name: `${b}.attn_q_norm.weight`, dims: [s.headDim], type: GgmlType.F32 },
        { name: `${b}.attn_k_norm.weight`, dims: [s.headDim], type: GgmlType.F32 },
      );
    } else {
      tensors.push(
        { name: `${b}.attn_qkv.weight`, dims: [s.hidden, 2 * keyDim + valueDim], type: GgmlType.Q4_K },
        { name: `${b}.attn_gate.weight`, dims: [s.hidden, valueDim], type: GgmlType.Q4_K },
        { name: `${b}.ssm_conv1d.weight`, dims: [s.convKernel, 2 * keyDim + valueDim], type: GgmlType.F32 },
        { name: `${b}.ssm_dt.bias`, dims: [s.valueHeads], type: GgmlType.F32 },
        { name: `${b}.ssm_a`, dims: [s.valueHeads], type: GgmlType.F32 },
        { name: `${b}.ssm_beta.weight`, dims: [s.hidden, s.valueHeads], type: GgmlType.F32 },
        { name: `${b}.ssm_alpha.weight`, dims: [s.hidden, s.valueHeads], type: GgmlType.F32 },
        { name: `${b}.ssm_norm.weight`, dims: [s.deltaHeadDim], type: GgmlType.F32 },
        { name: `${b}.ssm_out.weight`, dims: [valueDim, s.hidden], type: GgmlType.Q5_K },
      );
    }
    tensors.push(
      { name: `${b}.ffn_gate.weight`, dims: [s.hidden, s.ffn], type: GgmlType.Q4_K },
      { name: `${b}.ffn_up.weight`, dims: [s.hidden, s.ffn], type: GgmlType.Q4_K },
      { name: `${b}.ffn_down.weight`, dims: [s.ffn, s.hidden], type: l % 2 === 0 ? GgmlType.Q6_K : GgmlType.Q4_K },
    );
  }
  return tensors;
}

/** The header-only file's bytes: metadata a budget reads (shapes, delta-net sizes), no tokenizer. */
export function encodeQwen36_27bHeader(): Uint8Array {
  const s = QWEN36_27B;
  const a = "qwen35";
  return encodeGgufHeader([
    ["general.architecture", gguf.str(a)],
    ["general.name", gguf.str("Qwen3.6-27B (header only, public shapes)")],
    [`${a}.block_count`, gguf.u32(s.layers)],
    [`${a}.context_length`, gguf.u32(262144)],
    [`${a}.embedding_length`, gguf.u32(s.hidden)],
    [`${a}.feed_forward_length`, gguf.u32(s.ffn)],
    [`${a}.attention.head_count`, gguf.u32(s.heads)],
    [`${a}.attention.head_count_kv`, gguf.u32(s.kvHeads)],
    [`${a}.attention.key_length`, gguf.u32(s.headDim)],
    [`${a}.attention.value_length`, gguf.u32(s.headDim)],
    [`${a}.full_attention_interval`, gguf.u32(s.attentionInterval)],
    [`${a}.ssm.conv_kernel`, gguf.u32(s.convKernel)],
    [`${a}.ssm.inner_size`, gguf.u32(s.valueHeads * s.deltaHeadDim)],
    [`${a}.ssm.state_size`, gguf.u32(s.deltaHeadDim)],
    [`${a}.ssm.time_step_rank`, gguf.u32(s.valueHeads)],
    [`${a}.ssm.group_count`, gguf.u32(s.keyHeads)],
    [`${a}.vocab_size`, gguf.u32(s.vocabulary)],
    ["tokenizer.ggml.model", { type: GgufValueType.STRING, value: "gpt2" }],
  ], qwen36_27bTensors());
}
