"""llama (src/models/llama.cpp): pre-norm attention with adjacent-pair RoPE, SwiGLU FFN."""
import math

import numpy as np

from .head_faults import HEAD_SCALE
from .ops import AttentionState, attend, rms_norm, rope_angles, rope_norm, silu
from .trace import Eager, StepInputs

# Faults of the output end, which keep the argmax on most positions and move the distribution: what
# the distribution gates exist for; and the traced decode's RoPE angles frozen at capture.
FAULTS = {"final-norm-skipped", "trace-position-frozen"} | set(HEAD_SCALE)


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
        return self.forward(Eager(), StepInputs(token, state))

    def forward(self, tape, inputs):
        """One decode step as operations on `tape` (trace.py): run at once (eager) or captured for replay."""
        x = tape.op("embed", lambda i: self.embedding[i.token].copy(), inputs)
        angles = tape.op("rope_angles", lambda i: rope_angles(i.state.pos, self.n_rot, self.base, self.factors), inputs)
        scale = 1.0 / math.sqrt(self.head_dim)
        for il, layer in enumerate(self.layers):
            h = tape.op("attn_norm", rms_norm, x, layer["attn_norm"], self.eps)
            q = tape.op("q", lambda w, h, a: rope_norm((w @ h).reshape(self.n_head, self.head_dim), a), layer["attn_q"], h, angles)
            k = tape.op("k", lambda w, h, a: rope_norm((w @ h).reshape(self.n_head_kv, self.head_dim), a), layer["attn_k"], h, angles)
            v = tape.op("v", lambda w, h: (w @ h).reshape(self.n_head_kv, self.head_dim), layer["attn_v"], h)
            # The cache keeps copies: a replay rewrites k and v in place.
            tape.op("kv_append", lambda i, k, v, il=il: i.state.kv[il].append(k.copy(), v.copy()), inputs, k, v)
            attended = tape.op("attend", lambda i, q, il=il: attend(q, *i.state.kv[il].visible(0), scale).reshape(-1), inputs, q)
            x = tape.op("attn_residual", lambda x, w, a: x + w @ a, x, layer["attn_output"], attended)
            h = tape.op("ffn_norm", rms_norm, x, layer["ffn_norm"], self.eps)
            x = tape.op("ffn_residual", lambda x, h, g, u, d: x + d @ (silu(g @ h) * (u @ h)), x, h, layer["ffn_gate"], layer["ffn_up"], layer["ffn_down"])
        tape.op("advance", lambda i: setattr(i.state, "pos", i.state.pos + 1), inputs)
        return tape.op("logits", lambda x, w, n: self.head_scale * (w @ (rms_norm(x, n, self.eps) if self.final_norm else x)), x, self.output, self.output_norm)


Family = Llama
