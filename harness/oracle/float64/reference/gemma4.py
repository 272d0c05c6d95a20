"""gemma4 (src/models/gemma4.cpp): sliding-window and global attention layers.

- Embeddings scaled by √n_embd. Each block: attn_out = x + post_attention_norm(attention(attn_norm(x)));
  x = attn_out + post_ffw_norm(ffn(ffn_norm(attn_out))) (with routed experts: shared MLP and experts
  each with their own norms, summed before post_ffw_norm); optional per-layer embeddings and a
  per-layer output scale; final logit softcapping when the key is set.
- Attention scale 1.0 (q_norm and k_norm carry it); V is RMS-normalised without a weight; NEOX RoPE
  on n_rot dims. Sliding-window layers (`attention.sliding_window_pattern`) use head size
  key_length_swa, rope.dimension_count_swa, rope.freq_base_swa (default 10000), and see key position
  p0 from query p1 only when p1 − p0 < sliding_window (llama_hparams::is_masked_swa, STANDARD).
  Global layers use rope_freqs.weight as frequency divisors.
- Layers at or after block_count − attention.shared_kv_layers reuse the KV cache of layer
  n_kv_from_start − 2 (sliding) or − 1 (global).
- FFN: GEGLU with the tanh GELU. llama.cpp's CPU GELU goes through an fp16 table
  (`--gelu ggml-fp16-table` reproduces that; the default computes it exactly).
"""
import math

import numpy as np

from .gguf import GgufError
from .head_faults import HEAD_SCALE, scaled_head
from .ops import (AttentionState, attend, gelu_ggml_table, gelu_tanh, rms_norm, rope_angles, rope_neox,
                  route_experts, softmax)
from .trace import Eager, StepInputs, host_read

FAULTS = {"swa-off-by-one", "moe-topk-minus-one", "moe-no-renorm", "trace-position-frozen"} | set(HEAD_SCALE)


def faults_for(architecture):
    return FAULTS


class Gemma4:
    def __init__(self, gguf, faults, options):
        self.faults = faults
        self.gelu = gelu_ggml_table if options.get("gelu") == "ggml-fp16-table" else gelu_tanh
        n = self.n_layer = gguf.key("block_count")
        self.n_embd = gguf.key("embedding_length")
        self.eps = gguf.key("attention.layer_norm_rms_epsilon")
        self.swa = [bool(v) for v in gguf.per_layer("attention.sliding_window_pattern", n)]
        self.window = gguf.key("attention.sliding_window")
        self.n_head = gguf.per_layer("attention.head_count", n)
        self.n_head_kv = gguf.per_layer("attention.head_count_kv", n, gguf.key("attention.head_count"))
        head_full = gguf.key("attention.key_length", self.n_embd // self.n_head[0])
        head_swa = gguf.key("attention.key_length_swa", head_full)
        rot_full = gguf.key("rope.dimension_count", head_full)
        rot_swa = gguf.key("rope.dimension_count_swa", rot_full)
        self.head_dim = [head_swa if s else head_full for s in self.swa]
        self.n_rot = [rot_swa if s else rot_full for s in self.swa]
        self.base = [gguf.key("rope.freq_base_swa", 10000.0) if s else gguf.key("rope.freq_base", 10000.0) for s in self.swa]
        self.rope_factors = gguf.optional("rope_freqs.weight")
        self.n_kv_from_start = n - gguf.key("attention.shared_kv_layers", 0)
        self.softcap = gguf.key("final_logit_softcapping", 0.0)
        self.n_embd_per_layer = gguf.key("embedding_length_per_layer_input", 0)
        self.n_expert_used = gguf.key("expert_used_count", 0) - (1 if "moe-topk-minus-one" in faults else 0)
        self.embedding = gguf.tensor("token_embd.weight")
        self.layers = [self.load_layer(gguf, il) for il in range(n)]
        if self.n_embd_per_layer:
            self.per_layer_embedding = gguf.tensor("per_layer_token_embd.weight")
            self.per_layer_model_proj = gguf.tensor("per_layer_model_proj.weight")
            self.per_layer_proj_norm = gguf.tensor("per_layer_proj_norm.weight")
        self.output_norm = gguf.tensor("output_norm.weight")
        self.output = scaled_head(gguf.output_projection(self.embedding), faults)

    def load_layer(self, gguf, il):
        p = f"blk.{il}."
        t, o = gguf.block_tensors(il)
        layer = {name: t(name + ".weight") for name in ("attn_norm", "attn_q", "attn_output", "attn_q_norm", "post_attention_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm")}
        if il < self.n_kv_from_start:
            layer["attn_k"], layer["attn_k_norm"] = t("attn_k.weight"), t("attn_k_norm.weight")
            layer["attn_v"] = o("attn_v.weight")
        layer["out_scale"] = o("layer_output_scale.weight")
        layer["ffn_gate_inp"] = o("ffn_gate_inp.weight")
        if layer["ffn_gate_inp"] is not None:
            if gguf.has(p + "ffn_down_exps.scale"):
                raise GgufError(f"{gguf.path}: {p}ffn_down_exps.scale: per-expert output scales are not in this reference")
            layer["ffn_gate_inp_scale"] = t("ffn_gate_inp.scale")
            for name in ("pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2", "ffn_down_exps"):
                layer[name] = t(name + ".weight")
            if gguf.has(p + "ffn_gate_up_exps.weight"):
                merged = t("ffn_gate_up_exps.weight")
                half = merged.shape[1] // 2
                layer["ffn_gate_exps"], layer["ffn_up_exps"] = merged[:, :half], merged[:, half:]
            else:
                layer["ffn_gate_exps"], layer["ffn_up_exps"] = t("ffn_gate_exps.weight"), t("ffn_up_exps.weight")
        if self.n_embd_per_layer:
            for key, name in (("per_layer_inp_gate", "inp_gate"), ("per_layer_proj", "proj"), ("per_layer_post_norm", "post_norm")):
                layer[key] = t(name + ".weight")
        return layer

    def new_state(self, carried):
        return AttentionState(self.n_layer)

    def kv_layer(self, il):
        if il < self.n_kv_from_start:
            return il
        return self.n_kv_from_start - (2 if self.swa[il] else 1)

    def first_visible(self, il, pos):
        """The oldest position layer il's query at `pos` may read."""
        if not self.swa[il]:
            return 0
        wider = 1 if "swa-off-by-one" in self.faults else 0
        return max(0, pos - self.window + 1 - wider)

    def geglu(self, h, gate, up, down):
        return down @ (self.gelu(gate @ h) * (up @ h))

    # --- the decode step as operations (trace.py): position, window and KV cache read through `inputs` ---
    def step(self, token, state):
        return self.forward(Eager(), StepInputs(token, state))

    def forward(self, tape, inputs):
        """One decode step on `tape`: run at once (eager) or captured for replay."""
        x = tape.op("embed", lambda i: self.embedding[i.token] * math.sqrt(self.n_embd), inputs)
        per_layer = tape.op("per_layer_inputs", lambda i, x: self.per_layer_inputs(i.token, x), inputs, x) if self.n_embd_per_layer else None
        # One set of angles per (rotated dims, base, factors): sliding and global layers differ.
        angles = {}
        for il, layer in enumerate(self.layers):
            if self.swa[il] not in angles:
                factors = None if self.swa[il] else self.rope_factors
                angles[self.swa[il]] = tape.op("rope_angles", lambda i, il=il, f=factors: rope_angles(i.state.pos, self.n_rot[il], self.base[il], f), inputs)
            attn = self.attention(tape, inputs, layer, x, angles[self.swa[il]], il)
            x = tape.op("attn_residual", lambda x, a, n: x + rms_norm(a, n, self.eps), x, attn, layer["post_attention_norm"])
            x = tape.op("ffn_residual", lambda x, f, n: x + rms_norm(f, n, self.eps), x, self.ffn(tape, layer, x), layer["post_ffw_norm"])
            if per_layer is not None:
                x = tape.op("per_layer_residual", lambda x, p, g, w, n, il=il: x + rms_norm(w @ (self.gelu(g @ x) * p[il]), n, self.eps),
                            x, per_layer, layer["per_layer_inp_gate"], layer["per_layer_proj"], layer["per_layer_post_norm"])
            if layer["out_scale"] is not None:
                x = tape.op("out_scale", lambda x, s: x * s[0], x, layer["out_scale"])
        tape.op("advance", lambda i: setattr(i.state, "pos", i.state.pos + 1), inputs)
        return tape.op("logits", self.logits, x, self.output, self.output_norm)

    def attention(self, tape, inputs, layer, x, angles, il):
        hd = self.head_dim[il]
        h = tape.op("attn_norm", rms_norm, x, layer["attn_norm"], self.eps)
        q = tape.op("q", lambda w, h, n, a: rope_neox(rms_norm((w @ h).reshape(self.n_head[il], hd), n, self.eps), a), layer["attn_q"], h, layer["attn_q_norm"], angles)
        if il < self.n_kv_from_start:
            k_raw = tape.op("k_raw", lambda w, h: (w @ h).reshape(self.n_head_kv[il], hd), layer["attn_k"], h)
            v_raw = k_raw if layer["attn_v"] is None else tape.op("v_raw", lambda w, h: (w @ h).reshape(self.n_head_kv[il], hd), layer["attn_v"], h)
            k = tape.op("k", lambda k, n, a: rope_neox(rms_norm(k, n, self.eps), a), k_raw, layer["attn_k_norm"], angles)
            v = tape.op("v", lambda v: rms_norm(v, None, self.eps), v_raw)
            # The cache keeps copies: a replay rewrites k and v in place.
            tape.op("kv_append", lambda i, k, v: i.state.kv[il].append(k.copy(), v.copy()), inputs, k, v)
        # The window's first visible position is computed from the position the step reads, never captured.
        attended = tape.op("attend", lambda i, q: attend(q, *i.state.kv[self.kv_layer(il)].visible(self.first_visible(il, i.state.pos)), 1.0), inputs, q)
        return tape.op("attn_out", lambda w, a: w @ a.reshape(-1), layer["attn_output"], attended)

    def ffn(self, tape, layer, x):
        h = tape.op("ffn_norm", rms_norm, x, layer["ffn_norm"], self.eps)
        dense = tape.op("ffn", self.geglu, h, layer["ffn_gate"], layer["ffn_up"], layer["ffn_down"])
        if layer["ffn_gate_inp"] is None:
            return dense
        shared = tape.op("shared_norm", rms_norm, dense, layer["post_ffw_norm_1"], self.eps)
        probs = tape.op("router", lambda x, w, s: softmax(w @ (rms_norm(x, None, self.eps) / math.sqrt(self.n_embd) * s)), x, layer["ffn_gate_inp"], layer["ffn_gate_inp_scale"])
        renorm = "moe-no-renorm" not in self.faults
        chosen = tape.op("route_ids", lambda p: route_experts(p, p, self.n_expert_used, renorm, 1.0)[0], probs)
        weights = tape.op("route_weights", lambda p: route_experts(p, p, self.n_expert_used, renorm, 1.0)[1], probs)
        h = tape.op("expert_norm", rms_norm, x, layer["pre_ffw_norm_2"], self.eps)
        routed = tape.op("experts", lambda c, w, h, g, u, d: sum(we * self.geglu(h, g[e], u[e], d[e]) for e, we in zip(c, w)),
                         host_read(chosen, self.faults), weights, h, layer["ffn_gate_exps"], layer["ffn_up_exps"], layer["ffn_down_exps"])
        return tape.op("moe_sum", lambda s, r, n: s + rms_norm(r, n, self.eps), shared, routed, layer["post_ffw_norm_2"])

    def per_layer_inputs(self, token, x):
        """project_per_layer_inputs: (n_layer, n_embd_per_layer) added to each layer's output gate."""
        n, d = self.n_layer, self.n_embd_per_layer
        projected = (self.per_layer_model_proj @ x / math.sqrt(self.n_embd)).reshape(n, d)
        projected = rms_norm(projected, self.per_layer_proj_norm, self.eps)
        looked_up = self.per_layer_embedding[token].reshape(n, d) * math.sqrt(d)
        return (projected + looked_up) / math.sqrt(2.0)

    def logits(self, x, output, norm):
        logits = output @ rms_norm(x, norm, self.eps)
        if self.softcap:
            logits = np.tanh(logits / self.softcap) * self.softcap
        return logits


Family = Gemma4
