"""FAKE transformers for the hf_oracle.py tests (this machine has none): AutoModelForCausalLM for
LlamaForCausalLM only, written in numpy with transformers' own conventions — HF tensor names,
rotate_half RoPE, rms_norm_eps, GQA by repeat_interleave — reading the config.json and
model.safetensors that `bench fixtures export-hf` wrote. It makes the test check the exporter's
llama layout (q/k rows back in rotate_half order) as well as hf_oracle.py's protocol layer."""
import json
import os
import struct
from types import SimpleNamespace

import numpy as np

import torch

__version__ = "0.0-FAKE"


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + length])
    header.pop("__metadata__", None)
    return {name: np.frombuffer(data, dtype="<f4", count=(i["data_offsets"][1] - i["data_offsets"][0]) // 4, offset=8 + length + i["data_offsets"][0]).reshape(i["shape"]).astype(np.float64)
            for name, i in header.items()}


class FakeLlamaForCausalLM:
    def __init__(self, config, weights, dtype):
        self.c, self.w, self.dtype = config, weights, dtype

    def eval(self):
        return self

    def norm(self, x, name):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.c["rms_norm_eps"]) * self.w[name]

    def rope(self, x, positions):
        d = x.shape[-1]
        inv = self.c["rope_theta"] ** (-np.arange(0, d, 2) / d)
        angles = np.concatenate([positions[:, None] * inv] * 2, axis=-1)[:, None, :]
        rotated = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], axis=-1)
        return x * np.cos(angles) + rotated * np.sin(angles)

    def __call__(self, input_ids):
        c, w = self.c, self.w
        ids = np.asarray(input_ids)[0]
        n, heads, kv, d = len(ids), c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        x = w["model.embed_tokens.weight"][ids]
        positions = np.arange(n, dtype=np.float64)
        causal = np.triu(np.full((n, n), -np.inf), 1)
        for il in range(c["num_hidden_layers"]):
            p = f"model.layers.{il}."
            h = self.norm(x, p + "input_layernorm.weight")
            q = self.rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, heads, d), positions)
            k = np.repeat(self.rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, kv, d), positions), heads // kv, axis=1)
            v = np.repeat((h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, kv, d), heads // kv, axis=1)
            scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d) + causal
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            x = x + np.einsum("hqk,khd->qhd", probs, v).reshape(n, -1) @ w[p + "self_attn.o_proj.weight"].T
            h = self.norm(x, p + "post_attention_layernorm.weight")
            gate = h @ w[p + "mlp.gate_proj.weight"].T
            x = x + (gate / (1 + np.exp(-gate)) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        head = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
        logits = self.norm(x, "model.norm.weight") @ head.T
        return SimpleNamespace(logits=torch.tensor(logits[None].astype(self.dtype)))


LLAMA_LAYER_TENSORS = ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                       "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


class AutoModelForCausalLM:
    @staticmethod
    def from_pretrained(directory, dtype, output_loading_info=False):
        with open(os.path.join(directory, "config.json")) as f:
            config = json.load(f)
        if config["architectures"] != ["LlamaForCausalLM"]:
            raise ValueError(f"the FAKE transformers runs LlamaForCausalLM only, not {config['architectures']}")
        weights = read_safetensors(os.path.join(directory, "model.safetensors"))
        model = FakeLlamaForCausalLM(config, weights, dtype)
        if not output_loading_info:
            return model
        # Like transformers: a checkpoint tensor the class has no parameter for is "unexpected", a parameter
        # the checkpoint lacks is "missing" (and would be left randomly initialised, with only a warning).
        expected = {"model.embed_tokens.weight", "model.norm.weight"} | ({"lm_head.weight"} if not config.get("tie_word_embeddings") else set())
        expected |= {f"model.layers.{il}.{t}.weight" for il in range(config["num_hidden_layers"]) for t in LLAMA_LAYER_TENSORS}
        info = {"missing_keys": sorted(expected - set(weights)), "unexpected_keys": sorted(set(weights) - expected), "mismatched_keys": [], "error_msgs": []}
        return model, info
