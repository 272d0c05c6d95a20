import { BenchError } from "../../errors.js";
import type { GgufModel } from "../gguf-model.js";
import { asTorch, outputHead, tokenizerConfig, type HfModel } from "../hf-model.js";
import { float } from "../config-json.js";
import type { SafetensorsTensor } from "../safetensors.js";

/** llama.cpp's converter writes "proportional" RoPE as factor 1 (rotated pair) or 1e30 (frozen pair). */
const FROZEN_PAIR_FACTOR = 1e29;

/**
 * Gemma4ForCausalLM (text, dense). Gemma 4's norms are stored as they are used (no 1 + weight).
 * Global layers' `rope_freqs` become the "proportional" rope's partial_rotary_factor; per-layer
 * head sizes and KV heads of the global layers go in `per_layer_config`. Experts and per-layer
 * embeddings are not exported (the fixtures have neither).
 */
export function exportGemma4(model: GgufModel): HfModel {
  const layers = model.number("block_count");
  const hidden = model.number("embedding_length");
  const sliding = model.numbers("attention.sliding_window_pattern", layers).map((v) => v !== 0);
  const heads = model.numbers("attention.head_count", layers);
  const kvHeads = model.numbers("attention.head_count_kv", layers, heads[0]);
  const headFull = model.number("attention.key_length", hidden / heads[0]);
  const headSliding = model.number("attention.key_length_swa", headFull);
  const unsupported = [model.number("embedding_length_per_layer_input", 0) > 0 ? "per-layer embeddings" : "", model.number("expert_count", 0) > 0 ? "experts" : "", model.number("attention.shared_kv_layers", 0) > 0 ? "shared KV layers" : ""].filter((s) => s !== "");
  if (unsupported.length > 0 || new Set(heads).size > 1) {
    throw new BenchError(`gemma4 with ${[...unsupported, ...(new Set(heads).size > 1 ? ["per-layer head counts"] : [])].join(", ")} is not exported`, { file: model.path, fix: "export a dense gemma4 fixture" });
  }
  const slidingLayer = sliding.indexOf(true);
  const globalLayer = sliding.indexOf(false);
  const factors = model.tensor("rope_freqs.weight").values;
  const rotatedPairs = factors.findIndex((f) => f > FROZEN_PAIR_FACTOR);
  const rotated = rotatedPairs < 0 ? factors.length : rotatedPairs;
  if (factors.some((f, i) => (i < rotated ? f !== 1 : f <= FROZEN_PAIR_FACTOR))) {
    throw new BenchError("rope_freqs is not a proportional-RoPE encoding (1 for rotated pairs, then 1e30)", { file: model.path, field: "rope_freqs.weight", fix: "export a fixture whose global-layer rope factors are 1 or 1e30" });
  }
  const head = outputHead(model);
  const tensors: SafetensorsTensor[] = [asTorch("model.embed_tokens.weight", model.tensor("token_embd.weight"))];
  for (let il = 0; il < layers; il++) {
    const g = (name: string) => model.tensor(`blk.${il}.${name}.weight`);
    const p = `model.layers.${il}.`;
    tensors.push(
      asTorch(`${p}input_layernorm.weight`, g("attn_norm")),
      asTorch(`${p}self_attn.q_proj.weight`, g("attn_q")),
      asTorch(`${p}self_attn.k_proj.weight`, g("attn_k")),
      ...(model.has(`blk.${il}.attn_v.weight`) ? [asTorch(`${p}self_attn.v_proj.weight`, g("attn_v"))] : []),
      asTorch(`${p}self_attn.o_proj.weight`, g("attn_output")),
      asTorch(`${p}self_attn.q_norm.weight`, g("attn_q_norm")),
      asTorch(`${p}self_attn.k_norm.weight`, g("attn_k_norm")),
      asTorch(`${p}post_attention_layernorm.weight`, g("post_attention_norm")),
      asTorch(`${p}pre_feedforward_layernorm.weight`, g("ffn_norm")),
      asTorch(`${p}mlp.gate_proj.weight`, g("ffn_gate")),
      asTorch(`${p}mlp.up_proj.weight`, g("ffn_up")),
      asTorch(`${p}mlp.down_proj.weight`, g("ffn_down")),
      asTorch(`${p}post_feedforward_layernorm.weight`, g("post_ffw_norm")),
      ...(model.has(`blk.${il}.layer_output_scale.weight`) ? [asTorch(`${p}layer_scalar`, g("layer_output_scale"))] : []),
    );
  }
  tensors.push(asTorch("model.norm.weight", model.tensor("output_norm.weight")), ...head.tensors);
  const perLayerConfig = Object.fromEntries(sliding.flatMap((s, il) => (s ? [] : [[String(il), { head_dim: headFull, num_key_value_heads: kvHeads[il] }]])));
  const softcap = model.number("final_logit_softcapping", 0);
  return {
    config: {
      architectures: ["Gemma4ForCausalLM"],
      model_type: "gemma4_text",
      ...tokenizerConfig(model),
      hidden_size: hidden,
      intermediate_size: model.number("feed_forward_length"),
      num_hidden_layers: layers,
      num_attention_heads: heads[0],
      num_key_value_heads: slidingLayer < 0 ? kvHeads[0] : kvHeads[slidingLayer],
      head_dim: headSliding,
      global_head_dim: headFull,
      num_global_key_value_heads: globalLayer < 0 ? null : kvHeads[globalLayer],
      per_layer_config: perLayerConfig,
      layer_types: sliding.map((s) => (s ? "sliding_attention" : "full_attention")),
      sliding_window: model.number("attention.sliding_window"),
      rope_parameters: {
        sliding_attention: { rope_type: "default", rope_theta: float(model.number("rope.freq_base_swa", 10000)) },
        full_attention: { rope_type: "proportional", partial_rotary_factor: float(rotated / factors.length), rope_theta: float(model.number("rope.freq_base", 10000)) },
      },
      final_logit_softcapping: softcap === 0 ? null : float(softcap),
      hidden_activation: "gelu_pytorch_tanh",
      max_position_embeddings: model.number("context_length"),
      rms_norm_eps: float(model.number("attention.layer_norm_rms_epsilon")),
      hidden_size_per_layer_input: 0,
      num_kv_shared_layers: 0,
      attention_k_eq_v: false,
      enable_moe_block: false,
      attention_bias: false,
      tie_word_embeddings: head.tie_word_embeddings,
      dtype: "float32",
    },
    tensors,
  };
}
