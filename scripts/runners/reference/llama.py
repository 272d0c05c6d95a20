"""llama (src/models/llama.cpp): pre-norm attention with adjacent-pair RoPE, SwiGLU FFN."""
import math

import numpy as np

from .ops import AttentionState, attend, rms_norm, rope_angles, rope_norm, silu

# Faults of the output end, which keep the argmax on most positions and move the distribution: what
# the distribution gates exist for.
FAULTS = {"final-norm-skipped", "output-head-x0.5", "output-head-x1.01"}
HEAD_SCALE = {"output-head-x0.5": 0.5, "output-head-x1.01": 1.01}


def faults_for(architecture):
    return FAULTS


class Llama:
    def __init__(self, gguf, faults, options):
        self.n_layer = gguf.key("block_count")
        n_embd = gguf.key("embedding_length")
        self.n_head = gguf.key("attention.head_count")
        self.n_head_kv = gguf.key("attention.head_count_kv", self.n_head)
        self.head_dim = gguf.key("attention.key_length", n_embd // self.n_head)
        self.n_rot = gguf.key("rope.dimension_count", self.head_dim)
        self.eps = gguf.key("attention.layer_norm_rms_epsilon")
        self.base = gguf.key("rope.freq_base", 10000.0)
        self.factors = gguf.optional("rope_freqs.weight")
        self.embedding = gguf.tensor("token_embd.weight")
        self.layers = []
        for il in range(self.n_layer):
            t = lambda name: gguf.tensor(f"blk.{il}.{name}.weight")  # noqa: E731 — one prefix per layer
            self.layers.append({name: t(name) for name in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")})
        self.output_norm = gguf.tensor("output_norm.weight")
        self.output = gguf.output_projection(self.embedding)
        self.final_norm = "final-norm-skipped" not in faults
        self.head_scale = next((HEAD_SCALE[f] for f in faults if f in HEAD_SCALE), 1.0)

    def new_state(self, carried):
        return AttentionState(self.n_layer)

    def step(self, token, state):
        x = self.embedding[token].copy()
        angles = rope_angles(state.pos, self.n_rot, self.base, self.factors)
        for layer, kv in zip(self.layers, state.kv):
            h = rms_norm(x, layer["attn_norm"], self.eps)
            q = rope_norm((layer["attn_q"] @ h).reshape(self.n_head, self.head_dim), angles)
            k = rope_norm((layer["attn_k"] @ h).reshape(self.n_head_kv, self.head_dim), angles)
            kv.append(k, (layer["attn_v"] @ h).reshape(self.n_head_kv, self.head_dim))
            keys, values = kv.visible(0)
            x = x + layer["attn_output"] @ attend(q, keys, values, 1.0 / math.sqrt(self.head_dim)).reshape(-1)
            h = rms_norm(x, layer["ffn_norm"], self.eps)
            x = x + layer["ffn_down"] @ (silu(layer["ffn_gate"] @ h) * (layer["ffn_up"] @ h))
        state.pos += 1
        h = rms_norm(x, self.output_norm, self.eps) if self.final_norm else x
        return self.head_scale * (self.output @ h)


Family = Llama
