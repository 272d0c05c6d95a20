import { BenchError } from "../../errors.js";
import type { GgufModel } from "../gguf-model.js";
import { asTorch, outputHead, permuteRows, tokenizerConfig, type HfModel } from "../hf-model.js";
import { float } from "../config-json.js";

/**
 * llama's GGUF rotates adjacent pairs; transformers' LlamaAttention rotates halves (rotate_half).
 * llama.cpp's converter interleaves each head's q/k rows for that; this undoes it: HF row
 * h·d + j·d/2 + i comes from GGUF row h·d + 2i + j.
 */
export function halvesFromPairs(heads: number, headDim: number): number[] {
  const source: number[] = [];
  for (let h = 0; h < heads; h++) {
    for (let j = 0; j < 2; j++) {
      for (let i = 0; i < headDim / 2; i++) source.push(h * headDim + 2 * i + j);
    }
  }
  return source;
}

/** LlamaForCausalLM. */
export function exportLlama(model: GgufModel): HfModel {
  if (model.has("rope_freqs.weight")) {
    throw new BenchError("per-pair RoPE factors (rope_freqs.weight) have no LlamaConfig equivalent", { file: model.path, field: "rope_freqs.weight", fix: "export a fixture without rope factors" });
  }
  const layers = model.number("block_count");
  const hidden = model.number("embedding_length");
  const heads = model.number("attention.head_count");
  const kvHeads = model.number("attention.head_count_kv", heads);
  const headDim = model.number("attention.key_length", hidden / heads);
  const head = outputHead(model);
  const tensors = [asTorch("model.embed_tokens.weight", model.tensor("token_embd.weight"))];
  for (let il = 0; il < layers; il++) {
    const g = (name: string) => model.tensor(`blk.${il}.${name}.weight`);
    const p = `model.layers.${il}.`;
    const q = g("attn_q");
    const k = g("attn_k");
    tensors.push(
      asTorch(`${p}input_layernorm.weight`, g("attn_norm")),
      asTorch(`${p}self_attn.q_proj.weight`, q, permuteRows(q.values, q.dims[0], halvesFromPairs(heads, headDim))),
      asTorch(`${p}self_attn.k_proj.weight`, k, permuteRows(k.values, k.dims[0], halvesFromPairs(kvHeads, headDim))),
      asTorch(`${p}self_attn.v_proj.weight`, g("attn_v")),
      asTorch(`${p}self_attn.o_proj.weight`, g("attn_output")),
      asTorch(`${p}post_attention_layernorm.weight`, g("ffn_norm")),
      asTorch(`${p}mlp.gate_proj.weight`, g("ffn_gate")),
      asTorch(`${p}mlp.up_proj.weight`, g("ffn_up")),
      asTorch(`${p}mlp.down_proj.weight`, g("ffn_down")),
    );
  }
  tensors.push(asTorch("model.norm.weight", model.tensor("output_norm.weight")), ...head.tensors);
  const ropeTheta = model.number("rope.freq_base", 10000);
  return {
    config: {
      architectures: ["LlamaForCausalLM"],
      model_type: "llama",
      ...tokenizerConfig(model),
      hidden_size: hidden,
      intermediate_size: model.number("feed_forward_length"),
      num_hidden_layers: layers,
      num_attention_heads: heads,
      num_key_value_heads: kvHeads,
      head_dim: headDim,
      hidden_act: "silu",
      max_position_embeddings: model.number("context_length"),
      rms_norm_eps: float(model.number("attention.layer_norm_rms_epsilon")),
      rope_theta: float(ropeTheta),
      rope_parameters: { rope_type: "default", rope_theta: float(ropeTheta) },
      attention_bias: false,
      mlp_bias: false,
      tie_word_embeddings: head.tie_word_embeddings,
      dtype: "float32",
    },
    tensors,
  };
}
