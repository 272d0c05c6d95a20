"""Checks a `bench fixtures export-hf` directory against its GGUF the other way round: reads
model.safetensors with its own reader, converts every tensor back the way llama.cpp's
convert_hf_to_gguf does (names, 1 + weight norms, A = −exp(A_log), tiled value heads, q/k pair
interleave, stacked experts) and compares with the GGUF tensors. Prints one JSON object.

Usage: python3 check_hf_export.py MODEL.gguf EXPORT_DIR
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "runners"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "harness", "oracle", "float64"))
from reference.gguf import GgufFile  # noqa: E402


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + length])
    metadata = header.pop("__metadata__", {})
    tensors, end = {}, 0
    for name, info in header.items():
        assert info["dtype"] == "F32", f"{name}: dtype {info['dtype']}"
        begin, stop = info["data_offsets"]
        assert stop - begin == 4 * int(np.prod(info["shape"])), f"{name}: offsets do not match the shape"
        tensors[name] = np.frombuffer(data, dtype="<f4", count=(stop - begin) // 4, offset=8 + length + begin).reshape(info["shape"])
        end = max(end, stop)
    assert 8 + length + end == len(data), "data section length does not match the header"
    return length, metadata, tensors


def tiled(x, n_k, per_k, width, axis=0):
    """llama.cpp's value-head order from transformers' grouped order along `axis`."""
    x = np.moveaxis(x, axis, 0)
    shape = x.shape
    x = x.reshape(n_k, per_k, width, *shape[1:]).swapaxes(0, 1).reshape(shape)
    return np.moveaxis(x, 0, axis)


def pairs_from_halves(w, heads):
    """The converter's q/k permute for llama: rotate_half rows to adjacent pairs."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def to_gguf(arch, config, hf):
    """transformers name -> (GGUF name, float32 array in reversed-ggml shape), as the converter writes them."""
    out = {}
    used = set()

    def take(name):
        used.add(name)
        return hf[name]

    if arch == "llama":
        out["token_embd.weight"] = take("model.embed_tokens.weight")
        out["output_norm.weight"] = take("model.norm.weight")
        for il in range(config["num_hidden_layers"]):
            p = f"model.layers.{il}."
            b = f"blk.{il}."
            out[b + "attn_norm.weight"] = take(p + "input_layernorm.weight")
            out[b + "attn_q.weight"] = pairs_from_halves(take(p + "self_attn.q_proj.weight"), config["num_attention_heads"])
            out[b + "attn_k.weight"] = pairs_from_halves(take(p + "self_attn.k_proj.weight"), config["num_key_value_heads"])
            for gg, hn in (("attn_v", "self_attn.v_proj"), ("attn_output", "self_attn.o_proj"), ("ffn_norm", "post_attention_layernorm"), ("ffn_gate", "mlp.gate_proj"), ("ffn_up", "mlp.up_proj"), ("ffn_down", "mlp.down_proj")):
                out[b + gg + ".weight"] = take(p + hn + ".weight")
    elif arch in ("qwen35", "qwen35moe"):
        n_k, n_v = config["linear_num_key_heads"], config["linear_num_value_heads"]
        per_k, hv, hk = n_v // n_k, config["linear_value_head_dim"], config["linear_key_head_dim"]
        plus_one = lambda name: take(name) + np.float32(1)  # noqa: E731
        out["token_embd.weight"] = take("model.embed_tokens.weight")
        out["output_norm.weight"] = plus_one("model.norm.weight")
        for il, kind in enumerate(config["layer_types"]):
            p, b = f"model.layers.{il}.", f"blk.{il}."
            out[b + "attn_norm.weight"] = plus_one(p + "input_layernorm.weight")
            out[b + "post_attention_norm.weight"] = plus_one(p + "post_attention_layernorm.weight")
            if kind == "linear_attention":
                qkv = take(p + "linear_attn.in_proj_qkv.weight")
                keys = 2 * hk * n_k
                out[b + "attn_qkv.weight"] = np.concatenate([qkv[:keys], tiled(qkv[keys:], n_k, per_k, hv)])
                out[b + "attn_gate.weight"] = tiled(take(p + "linear_attn.in_proj_z.weight"), n_k, per_k, hv)
                out[b + "ssm_beta.weight"] = tiled(take(p + "linear_attn.in_proj_b.weight"), n_k, per_k, 1)
                out[b + "ssm_alpha.weight"] = tiled(take(p + "linear_attn.in_proj_a.weight"), n_k, per_k, 1)
                out[b + "ssm_dt.bias"] = tiled(take(p + "linear_attn.dt_bias"), n_k, per_k, 1)
                out[b + "ssm_a"] = tiled(-np.exp(take(p + "linear_attn.A_log")), n_k, per_k, 1)
                conv = take(p + "linear_attn.conv1d.weight").squeeze(1)
                out[b + "ssm_conv1d.weight"] = np.concatenate([conv[:keys], tiled(conv[keys:], n_k, per_k, hv)])
                out[b + "ssm_norm.weight"] = take(p + "linear_attn.norm.weight")
                out[b + "ssm_out.weight"] = tiled(take(p + "linear_attn.out_proj.weight"), n_k, per_k, hv, axis=1)
            else:
                for gg, hn in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj"), ("attn_output", "o_proj")):
                    out[b + gg + ".weight"] = take(p + f"self_attn.{hn}.weight")
                out[b + "attn_q_norm.weight"] = plus_one(p + "self_attn.q_norm.weight")
                out[b + "attn_k_norm.weight"] = plus_one(p + "self_attn.k_norm.weight")
            if arch == "qwen35moe":
                gate_up = take(p + "mlp.experts.gate_up_proj")
                ff = gate_up.shape[1] // 2
                out[b + "ffn_gate_exps.weight"], out[b + "ffn_up_exps.weight"] = gate_up[:, :ff], gate_up[:, ff:]
                out[b + "ffn_down_exps.weight"] = take(p + "mlp.experts.down_proj")
                out[b + "ffn_gate_inp.weight"] = take(p + "mlp.gate.weight")
                out[b + "ffn_gate_inp_shexp.weight"] = take(p + "mlp.shared_expert_gate.weight").reshape(-1)
                for gg, hn in (("ffn_gate_shexp", "gate_proj"), ("ffn_up_shexp", "up_proj"), ("ffn_down_shexp", "down_proj")):
                    out[b + gg + ".weight"] = take(p + f"mlp.shared_expert.{hn}.weight")
            else:
                for gg, hn in (("ffn_gate", "gate_proj"), ("ffn_up", "up_proj"), ("ffn_down", "down_proj")):
                    out[b + gg + ".weight"] = take(p + f"mlp.{hn}.weight")
    elif arch == "gemma4":
        out["token_embd.weight"] = take("model.embed_tokens.weight")
        out["output_norm.weight"] = take("model.norm.weight")
        names = (("attn_norm", "input_layernorm"), ("attn_q", "self_attn.q_proj"), ("attn_k", "self_attn.k_proj"), ("attn_v", "self_attn.v_proj"), ("attn_output", "self_attn.o_proj"), ("attn_q_norm", "self_attn.q_norm"), ("attn_k_norm", "self_attn.k_norm"), ("post_attention_norm", "post_attention_layernorm"), ("ffn_norm", "pre_feedforward_layernorm"), ("ffn_gate", "mlp.gate_proj"), ("ffn_up", "mlp.up_proj"), ("ffn_down", "mlp.down_proj"), ("post_ffw_norm", "post_feedforward_layernorm"))
        for il in range(config["num_hidden_layers"]):
            p, b = f"model.layers.{il}.", f"blk.{il}."
            for gg, hn in names:
                out[b + gg + ".weight"] = take(p + hn + ".weight")
            if p + "layer_scalar" in hf:
                out[b + "layer_output_scale.weight"] = take(p + "layer_scalar")
        # The converter writes proportional RoPE as per-pair factors: 1 rotates, 1e30 freezes.
        full = config["rope_parameters"]["full_attention"]
        pairs = config["global_head_dim"] // 2
        rotated = int(pairs * full["partial_rotary_factor"])
        out["rope_freqs.weight"] = np.array([1.0] * rotated + [1e30] * (pairs - rotated), dtype=np.float32)
    elif arch == "nemotron_h_moe":
        out["token_embd.weight"] = take("backbone.embeddings.weight")
        out["output_norm.weight"] = take("backbone.norm_f.weight")
        for il, kind in enumerate(config["hybrid_override_pattern"]):
            p, b = f"backbone.layers.{il}.mixer.", f"blk.{il}."
            out[b + "attn_norm.weight"] = take(f"backbone.layers.{il}.norm.weight")
            if kind == "M":
                out[b + "ssm_in.weight"] = take(p + "in_proj.weight")
                out[b + "ssm_conv1d.weight"] = take(p + "conv1d.weight").squeeze(1)
                if p + "conv1d.bias" in hf:
                    out[b + "ssm_conv1d.bias"] = take(p + "conv1d.bias")
                out[b + "ssm_dt.bias"] = take(p + "dt_bias")
                out[b + "ssm_a"] = (-np.exp(take(p + "A_log"))).reshape(-1, 1)
                out[b + "ssm_d"] = take(p + "D").reshape(-1, 1)
                out[b + "ssm_norm.weight"] = take(p + "norm.weight").reshape(config["n_groups"], -1)
                out[b + "ssm_out.weight"] = take(p + "out_proj.weight")
            elif kind == "*":
                for gg, hn in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj"), ("attn_output", "o_proj")):
                    out[b + gg + ".weight"] = take(p + hn + ".weight")
            elif kind == "E":
                n = config["n_routed_experts"]
                out[b + "ffn_up_exps.weight"] = np.stack([take(p + f"experts.{e}.up_proj.weight") for e in range(n)])
                out[b + "ffn_down_exps.weight"] = np.stack([take(p + f"experts.{e}.down_proj.weight") for e in range(n)])
                out[b + "ffn_gate_inp.weight"] = take(p + "gate.weight")
                out[b + "exp_probs_b.bias"] = take(p + "gate.e_score_correction_bias")
                out[b + "ffn_up_shexp.weight"] = take(p + "shared_experts.up_proj.weight")
                out[b + "ffn_down_shexp.weight"] = take(p + "shared_experts.down_proj.weight")
    if "lm_head.weight" in hf:
        out["output.weight"] = take("lm_head.weight")
    return out, sorted(set(hf) - used)


def main(gguf_path, directory):
    gguf = GgufFile(gguf_path)
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    header_length, metadata, hf = read_safetensors(os.path.join(directory, "model.safetensors"))
    converted, unused = to_gguf(gguf.architecture, config, hf)
    mismatches, exact = [], 0
    for name, value in converted.items():
        expected = gguf.tensor(name).astype(np.float32)
        got = np.asarray(value, dtype=np.float32)
        if got.shape != expected.shape:
            mismatches.append(f"{name}: shape {list(got.shape)} vs GGUF {list(expected.shape)}")
        elif np.array_equal(got, expected):
            exact += 1
        elif not np.allclose(got, expected, rtol=1e-6, atol=0):  # exp(log(x)) round trips within float32 rounding
            mismatches.append(f"{name}: max |diff| {float(np.max(np.abs(got - expected))):.3g}")
    missing = sorted(set(gguf.infos) - set(converted))
    print(json.dumps({"architecture": gguf.architecture, "model_type": config.get("model_type"), "header_aligned": header_length % 8 == 0, "metadata": metadata,
                      "converted": len(converted), "exact": exact, "mismatches": mismatches, "missing_from_export": missing, "unused_hf_tensors": unused}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
