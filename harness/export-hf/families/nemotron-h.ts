import { BenchError } from "../../errors.js";
import type { GgufModel } from "../gguf-model.js";
import { asTorch, mapValues, outputHead, tokenizerConfig, type HfModel } from "../hf-model.js";
import { float } from "../config-json.js";
import type { SafetensorsTensor } from "../safetensors.js";

/**
 * NemotronHForCausalLM. The layer kinds become `hybrid_override_pattern` (M Mamba2, * attention,
 * E routed experts, - dense MLP), read from the per-layer arrays as llama.cpp does. A_log =
 * log(−ssm_a); the Mamba2 norm [n_group, d_inner/n_group] flattens to [d_inner]; the router's
 * selection bias is `gate.e_score_correction_bias`.
 */
export function exportNemotronH(model: GgufModel): HfModel {
  const layers = model.number("block_count");
  const hidden = model.number("embedding_length");
  const heads = model.numbers("attention.head_count", layers);
  const kvHeads = model.numbers("attention.head_count_kv", layers, heads[0]);
  const ff = model.numbers("feed_forward_length", layers);
  const attentionHeads = Math.max(...heads);
  const headDim = model.number("attention.key_length", hidden / attentionHeads);
  const kinds = Array.from({ length: layers }, (_, il) => {
    if (kvHeads[il] === 0 && ff[il] === 0) return "M";
    if (ff[il] === 0) return "*";
    return model.has(`blk.${il}.ffn_gate_inp.weight`) ? "E" : "-";
  });
  if (model.has("blk.0.ffn_latent_down.weight") || kinds.some((k, il) => k === "E" && model.has(`blk.${il}.ffn_latent_down.weight`))) {
    throw new BenchError("latent MoE projections are not exported", { file: model.path, fix: "export a fixture without ffn_latent_down/up" });
  }
  const nGroup = model.number("ssm.group_count");
  const dInner = model.number("ssm.inner_size");
  const mambaHeads = model.number("ssm.time_step_rank");
  const head = outputHead(model);
  const tensors: SafetensorsTensor[] = [asTorch("backbone.embeddings.weight", model.tensor("token_embd.weight"))];
  for (let il = 0; il < layers; il++) tensors.push(...layerTensors(model, il, kinds[il], hidden));
  tensors.push(asTorch("backbone.norm_f.weight", model.tensor("output_norm.weight")), ...head.tensors);
  const moeLayer = kinds.indexOf("E");
  const mlpLayer = kinds.indexOf("-");
  return {
    config: {
      architectures: ["NemotronHForCausalLM"],
      model_type: "nemotron_h",
      ...tokenizerConfig(model),
      hidden_size: hidden,
      num_hidden_layers: layers,
      hybrid_override_pattern: kinds.join(""),
      num_attention_heads: attentionHeads,
      num_key_value_heads: Math.max(...kvHeads),
      head_dim: headDim,
      attention_head_dim: headDim,
      mamba_num_heads: mambaHeads,
      mamba_head_dim: dInner / mambaHeads,
      ssm_state_size: model.number("ssm.state_size"),
      n_groups: nGroup,
      conv_kernel: model.number("ssm.conv_kernel"),
      expand: dInner / hidden,
      use_conv_bias: kinds.some((k, il) => k === "M" && model.has(`blk.${il}.ssm_conv1d.bias`)),
      mamba_hidden_act: "silu",
      intermediate_size: mlpLayer < 0 ? 0 : ff[mlpLayer],
      mlp_hidden_act: "relu2",
      ...(moeLayer < 0 ? {} : {
        n_routed_experts: model.number("expert_count"),
        num_experts_per_tok: model.number("expert_used_count"),
        moe_intermediate_size: model.number("expert_feed_forward_length", ff[moeLayer]),
        moe_shared_expert_intermediate_size: model.number("expert_shared_feed_forward_length"),
        n_shared_experts: 1,
        norm_topk_prob: model.number("expert_weights_norm", 0) !== 0,
        routed_scaling_factor: float(model.number("expert_weights_scale", 0) || 1),
        n_group: 1,
        topk_group: 1,
      }),
      layer_norm_epsilon: float(model.number("attention.layer_norm_rms_epsilon")),
      max_position_embeddings: model.number("context_length"),
      attention_bias: false,
      mlp_bias: false,
      use_bias: false,
      residual_in_fp32: false,
      tie_word_embeddings: head.tie_word_embeddings,
      dtype: "float32",
    },
    tensors,
  };
}

/** One layer's tensors under their transformers names, by the layer's kind (M, *, E or -). */
function layerTensors(model: GgufModel, il: number, kind: string, hidden: number): SafetensorsTensor[] {
  const out: SafetensorsTensor[] = [];
  const flat = (name: string, t: { dims: readonly number[]; values: Float32Array }, values = t.values): SafetensorsTensor => ({ name, shape: [values.length], values });
  const g = (name: string) => model.tensor(`blk.${il}.${name}`);
  const p = `backbone.layers.${il}.`;
  out.push(asTorch(`${p}norm.weight`, g("attn_norm.weight")));
  if (kind === "M") {
    const conv = g("ssm_conv1d.weight");
    out.push(
      asTorch(`${p}mixer.in_proj.weight`, g("ssm_in.weight")),
      { name: `${p}mixer.conv1d.weight`, shape: [conv.dims[1], 1, conv.dims[0]], values: conv.values },
      ...(model.has(`blk.${il}.ssm_conv1d.bias`) ? [asTorch(`${p}mixer.conv1d.bias`, g("ssm_conv1d.bias"))] : []),
      asTorch(`${p}mixer.dt_bias`, g("ssm_dt.bias")),
      flat(`${p}mixer.A_log`, g("ssm_a"), mapValues(g("ssm_a").values, (a) => Math.log(-a))),
      flat(`${p}mixer.D`, g("ssm_d")),
      flat(`${p}mixer.norm.weight`, g("ssm_norm.weight")),
      asTorch(`${p}mixer.out_proj.weight`, g("ssm_out.weight")),
    );
  } else if (kind === "*") {
    out.push(
      asTorch(`${p}mixer.q_proj.weight`, g("attn_q.weight")),
      asTorch(`${p}mixer.k_proj.weight`, g("attn_k.weight")),
      asTorch(`${p}mixer.v_proj.weight`, g("attn_v.weight")),
      asTorch(`${p}mixer.o_proj.weight`, g("attn_output.weight")),
    );
  } else if (kind === "E") {
    const up = g("ffn_up_exps.weight");
    const down = g("ffn_down_exps.weight");
    const [, expertFf, experts] = up.dims;
    const size = hidden * expertFf;
    for (let e = 0; e < experts; e++) {
      out.push(
        { name: `${p}mixer.experts.${e}.up_proj.weight`, shape: [expertFf, hidden], values: up.values.slice(e * size, (e + 1) * size) },
        { name: `${p}mixer.experts.${e}.down_proj.weight`, shape: [hidden, expertFf], values: down.values.slice(e * size, (e + 1) * size) },
      );
    }
    out.push(
      asTorch(`${p}mixer.gate.weight`, g("ffn_gate_inp.weight")),
      asTorch(`${p}mixer.gate.e_score_correction_bias`, g("exp_probs_b.bias")),
      asTorch(`${p}mixer.shared_experts.up_proj.weight`, g("ffn_up_shexp.weight")),
      asTorch(`${p}mixer.shared_experts.down_proj.weight`, g("ffn_down_shexp.weight")),
    );
  } else {
    out.push(asTorch(`${p}mixer.up_proj.weight`, g("ffn_up.weight")), asTorch(`${p}mixer.down_proj.weight`, g("ffn_down.weight")));
  }
  return out;
}
