import type { GgufModel } from "../gguf-model.js";
import { asTorch, mapValues, outputHead, permuteColumns, permuteRows, tokenizerConfig, type HfModel } from "../hf-model.js";
import { float } from "../config-json.js";
import type { SafetensorsTensor } from "../safetensors.js";

/**
 * GatedDeltaNet value heads: llama.cpp stores them tiled (v-head h reads k-head h mod n_k, so
 * ggml's broadcast repeats k), transformers' Qwen3.5 groups them (v-head h reads k-head
 * h div (n_v/n_k), repeat_interleave). llama.cpp's converter reorders grouped -> tiled; this is the
 * inverse: grouped head g·r + j comes from tiled head j·n_k + g (r = n_v/n_k), `width` values each.
 */
export function groupedFromTiled(kHeads: number, vHeads: number, width: number): number[] {
  const perK = vHeads / kHeads;
  const source: number[] = [];
  for (let g = 0; g < kHeads; g++) {
    for (let j = 0; j < perK; j++) {
      for (let d = 0; d < width; d++) source.push((j * kHeads + g) * width + d);
    }
  }
  return source;
}

/**
 * Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM (text). Qwen3.5's RMSNorms scale by (1 + weight), and
 * llama.cpp's converter stores 1 + weight: every norm but the GatedDeltaNet's own loses 1 here.
 * A_log = log(−ssm_a). The conv kernel goes back to [channels, 1, kernel].
 */
export function exportQwen35(model: GgufModel): HfModel {
  const moe = model.architecture === "qwen35moe";
  const layers = model.number("block_count");
  const hidden = model.number("embedding_length");
  const heads = model.number("attention.head_count");
  const headDim = model.number("attention.key_length", hidden / heads);
  const kHeads = model.number("ssm.group_count");
  const vHeads = model.number("ssm.time_step_rank");
  const headK = model.number("ssm.state_size");
  const headV = model.number("ssm.inner_size") / vHeads;
  // llama.cpp's rule: the per-layer array when given, else every interval-th layer is full attention.
  const interval = model.number("full_attention_interval", 4);
  const recurrent = model.raw(`${model.architecture}.attention.recurrent_layers`) !== undefined
    ? model.numbers("attention.recurrent_layers", layers).map((r) => r !== 0)
    : Array.from({ length: layers }, (_, il) => (il + 1) % interval !== 0);
  const minusOne = (v: number) => v - 1;
  const head = outputHead(model);
  const tensors: SafetensorsTensor[] = [asTorch("model.embed_tokens.weight", model.tensor("token_embd.weight"))];
  for (let il = 0; il < layers; il++) {
    const g = (name: string) => model.tensor(`blk.${il}.${name}`);
    const p = `model.layers.${il}.`;
    const norm = (name: string, source: string) => asTorch(p + name, g(source), mapValues(g(source).values, minusOne));
    tensors.push(norm("input_layernorm.weight", "attn_norm.weight"), norm("post_attention_layernorm.weight", "post_attention_norm.weight"));
    if (recurrent[il]) {
      tensors.push(...linearAttentionTensors(model, il, { hidden, kHeads, vHeads, headK, headV }));
    } else {
      tensors.push(
        asTorch(`${p}self_attn.q_proj.weight`, g("attn_q.weight")),
        asTorch(`${p}self_attn.k_proj.weight`, g("attn_k.weight")),
        asTorch(`${p}self_attn.v_proj.weight`, g("attn_v.weight")),
        asTorch(`${p}self_attn.o_proj.weight`, g("attn_output.weight")),
        norm("self_attn.q_norm.weight", "attn_q_norm.weight"),
        norm("self_attn.k_norm.weight", "attn_k_norm.weight"),
      );
    }
    tensors.push(...(moe ? moeTensors(model, il, p) : [
      asTorch(`${p}mlp.gate_proj.weight`, g("ffn_gate.weight")),
      asTorch(`${p}mlp.up_proj.weight`, g("ffn_up.weight")),
      asTorch(`${p}mlp.down_proj.weight`, g("ffn_down.weight")),
    ]));
  }
  const finalNorm = model.tensor("output_norm.weight");
  tensors.push(asTorch("model.norm.weight", finalNorm, mapValues(finalNorm.values, minusOne)), ...head.tensors);
  const ropeTheta = model.number("rope.freq_base", 10000);
  const sections = model.numbers("rope.dimension_sections", 4);
  return {
    config: {
      architectures: [moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM"],
      model_type: moe ? "qwen3_5_moe_text" : "qwen3_5_text",
      ...tokenizerConfig(model),
      hidden_size: hidden,
      // The MoE class has no dense FFN size (transformers 5.17 lists intermediate_size as unknown to Qwen3_5MoeTextConfig).
      ...(moe ? {} : { intermediate_size: model.number("feed_forward_length") }),
      num_hidden_layers: layers,
      num_attention_heads: heads,
      num_key_value_heads: model.number("attention.head_count_kv", heads),
      head_dim: headDim,
      hidden_act: "silu",
      max_position_embeddings: model.number("context_length"),
      rms_norm_eps: float(model.number("attention.layer_norm_rms_epsilon")),
      rope_parameters: {
        rope_type: "default",
        rope_theta: float(ropeTheta),
        partial_rotary_factor: float(model.number("rope.dimension_count", headDim) / headDim),
        mrope_section: sections.slice(0, 3),
        mrope_interleaved: true,
      },
      linear_conv_kernel_dim: model.number("ssm.conv_kernel"),
      linear_key_head_dim: headK,
      linear_value_head_dim: headV,
      linear_num_key_heads: kHeads,
      linear_num_value_heads: vHeads,
      layer_types: recurrent.map((r) => (r ? "linear_attention" : "full_attention")),
      ...(moe ? {
        num_experts: model.number("expert_count"),
        num_experts_per_tok: model.number("expert_used_count"),
        moe_intermediate_size: model.number("expert_feed_forward_length"),
        shared_expert_intermediate_size: model.number("expert_shared_feed_forward_length"),
      } : {}),
      attention_bias: false,
      tie_word_embeddings: head.tie_word_embeddings,
      dtype: "float32",
    },
    tensors,
  };
}

/**
 * Routed experts in transformers' fused layout (gate_up_proj [experts, 2·ff, hidden] with gate
 * first, down_proj [experts, hidden, ff]), the router, and the sigmoid-gated shared expert.
 */
function moeTensors(model: GgufModel, il: number, p: string): SafetensorsTensor[] {
  const g = (name: string) => model.tensor(`blk.${il}.${name}`);
  const gate = g("ffn_gate_exps.weight");
  const up = g("ffn_up_exps.weight");
  const [hidden, ff, experts] = gate.dims;
  const gateUp = new Float32Array(2 * gate.values.length);
  const perExpert = hidden * ff;
  for (let e = 0; e < experts; e++) {
    gateUp.set(gate.values.subarray(e * perExpert, (e + 1) * perExpert), 2 * e * perExpert);
    gateUp.set(up.values.subarray(e * perExpert, (e + 1) * perExpert), (2 * e + 1) * perExpert);
  }
  const sharedGate = g("ffn_gate_inp_shexp.weight");
  return [
    asTorch(`${p}mlp.gate.weight`, g("ffn_gate_inp.weight")),
    { name: `${p}mlp.experts.gate_up_proj`, shape: [experts, 2 * ff, hidden], values: gateUp },
    asTorch(`${p}mlp.experts.down_proj`, g("ffn_down_exps.weight")),
    asTorch(`${p}mlp.shared_expert.gate_proj.weight`, g("ffn_gate_shexp.weight")),
    asTorch(`${p}mlp.shared_expert.up_proj.weight`, g("ffn_up_shexp.weight")),
    asTorch(`${p}mlp.shared_expert.down_proj.weight`, g("ffn_down_shexp.weight")),
    { name: `${p}mlp.shared_expert_gate.weight`, shape: [1, sharedGate.dims[0]], values: sharedGate.values },
  ];
}

/** A GatedDeltaNet layer's projections, conv and decay in transformers' layout: its value-head rows regrouped from llama.cpp's tiled order. */
function linearAttentionTensors(model: GgufModel, il: number, shape: { hidden: number; kHeads: number; vHeads: number; headK: number; headV: number }): SafetensorsTensor[] {
  const { hidden, kHeads, vHeads, headK, headV } = shape;
  const g = (name: string) => model.tensor(`blk.${il}.${name}`);
  const p = `model.layers.${il}.`;
  const vRows = (width: number) => groupedFromTiled(kHeads, vHeads, width);
  const qkv = g("attn_qkv.weight");
  const keyRows = 2 * headK * kHeads;
  // Only the V rows of the fused projection (and of the conv channels) are per value head.
  const qkvSource = [...Array.from({ length: keyRows }, (_, r) => r), ...vRows(headV).map((r) => keyRows + r)];
  const conv = g("ssm_conv1d.weight");
  const kernel = conv.dims[0];
  return [
    asTorch(`${p}linear_attn.in_proj_qkv.weight`, qkv, permuteRows(qkv.values, hidden, qkvSource)),
    asTorch(`${p}linear_attn.in_proj_z.weight`, g("attn_gate.weight"), permuteRows(g("attn_gate.weight").values, hidden, vRows(headV))),
    asTorch(`${p}linear_attn.in_proj_b.weight`, g("ssm_beta.weight"), permuteRows(g("ssm_beta.weight").values, hidden, vRows(1))),
    asTorch(`${p}linear_attn.in_proj_a.weight`, g("ssm_alpha.weight"), permuteRows(g("ssm_alpha.weight").values, hidden, vRows(1))),
    { name: `${p}linear_attn.conv1d.weight`, shape: [conv.dims[1], 1, kernel], values: permuteRows(conv.values, kernel, qkvSource) },
    asTorch(`${p}linear_attn.dt_bias`, g("ssm_dt.bias"), permuteRows(g("ssm_dt.bias").values, 1, vRows(1))),
    asTorch(`${p}linear_attn.A_log`, g("ssm_a"), permuteRows(mapValues(g("ssm_a").values, (a) => Math.log(-a)), 1, vRows(1))),
    asTorch(`${p}linear_attn.norm.weight`, g("ssm_norm.weight")),
    asTorch(`${p}linear_attn.out_proj.weight`, g("ssm_out.weight"), permuteColumns(g("ssm_out.weight").values, headV * vHeads, vRows(headV))),
  ];
}
