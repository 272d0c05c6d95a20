"""qwen35 and qwen35moe (src/models/qwen35.cpp, qwen35moe.cpp, delta-net-base.cpp).

Layers are GatedDeltaNet (linear attention with a causal conv and a recurrent state per head) or
gated full attention, in the pattern `(il + 1) % full_attention_interval != 0` -> GatedDeltaNet
(or the `attention.recurrent_layers` array). Each block: x += mixer(attn_norm(x));
x += ffn(post_attention_norm(x)). The FFN is SwiGLU (qwen35) or routed experts plus a sigmoid-gated
shared expert (qwen35moe).

llama.cpp runs a prompt through the GatedDeltaNet with its fused op, which walks the tokens one by
one on CPU (ggml_compute_forward_gated_delta_net); its chunked graph (build_delta_net_chunking,
chunks of 64, a triangular solve inside each chunk) is an exact rewriting of the same recurrence.
So this reference runs the recurrence token by token for prompts and decode alike:

    S ← S·exp(g);   d = β·(v − S k);   S ← S + d kᵀ;   o = S q / √d_k

with g = softplus(alpha·x + dt_bias)·A (A = −exp(A_log), stored as ssm_a), β = sigmoid(beta·x),
q and k L2-normalised (eps = the RMS eps), and v-head h reading k-head h mod n_k_heads.
"""
import math

import numpy as np

from .head_faults import HEAD_SCALE, scaled_head
from .ops import (KvCache, attend, causal_conv_step, l2_norm, rms_norm, rope_angles, rope_neox,
                  route_experts, sigmoid, silu, softmax, softplus)

DENSE_FAULTS = {"state-not-cleared", "conv-state-not-shifted", "gdn-gate-sign", "gdn-decay-twice", "gdn-heads-grouped"} | set(HEAD_SCALE)


def faults_for(architecture):
    """The FAULTs a model of `architecture` can carry (routing faults need qwen35moe's experts)."""
    return DENSE_FAULTS | {"moe-topk-minus-one", "moe-no-renorm"} if architecture == "qwen35moe" else DENSE_FAULTS


class State:
    def __init__(self, model, carried):
        self.pos = 0
        self.kv, self.conv, self.ssm = {}, {}, {}
        for il in range(model.n_layer):
            if model.recurrent[il]:
                # A carried state is the FAULT state-not-cleared: the previous request's recurrent memory.
                self.conv[il] = carried.conv[il].copy() if carried else np.zeros((model.conv_kernel - 1, model.conv_dim))
                self.ssm[il] = carried.ssm[il].copy() if carried else np.zeros((model.n_v_heads, model.head_v_dim, model.head_k_dim))
            else:
                self.kv[il] = KvCache()


class Qwen35:
    def __init__(self, gguf, faults, options):
        self.faults = faults
        self.moe = gguf.architecture == "qwen35moe"
        self.n_layer = gguf.key("block_count")
        self.n_embd = gguf.key("embedding_length")
        self.n_head = gguf.key("attention.head_count")
        self.n_head_kv = gguf.key("attention.head_count_kv", self.n_head)
        self.head_dim = gguf.key("attention.key_length", self.n_embd // self.n_head)
        self.n_rot = gguf.key("rope.dimension_count", self.head_dim)
        self.base = gguf.key("rope.freq_base", 10000.0)
        self.eps = gguf.key("attention.layer_norm_rms_epsilon")
        self.conv_kernel = gguf.key("ssm.conv_kernel")
        self.head_k_dim = gguf.key("ssm.state_size")
        self.n_k_heads = gguf.key("ssm.group_count")
        self.n_v_heads = gguf.key("ssm.time_step_rank")
        self.head_v_dim = gguf.key("ssm.inner_size") // self.n_v_heads
        self.key_dim = self.head_k_dim * self.n_k_heads
        self.conv_dim = 2 * self.key_dim + self.head_v_dim * self.n_v_heads
        recurrent = gguf.key("attention.recurrent_layers", [])
        if recurrent:
            self.recurrent = [bool(r) for r in recurrent[: self.n_layer]]
        else:
            interval = gguf.key("full_attention_interval", 4)
            self.recurrent = [(il + 1) % interval != 0 for il in range(self.n_layer)]
        if self.moe:
            self.n_expert_used = gguf.key("expert_used_count") - (1 if "moe-topk-minus-one" in faults else 0)
        self.embedding = gguf.tensor("token_embd.weight")
        self.layers = [self.load_layer(gguf, il) for il in range(self.n_layer)]
        self.output_norm = gguf.tensor("output_norm.weight")
        self.output = scaled_head(gguf.output_projection(self.embedding), faults)

    def load_layer(self, gguf, il):
        t, o = gguf.block_tensors(il)
        layer = {"attn_norm": t("attn_norm.weight"), "post_norm": t("post_attention_norm.weight")}
        if self.recurrent[il]:
            for name in ("attn_qkv.weight", "attn_gate.weight", "ssm_conv1d.weight", "ssm_dt.bias", "ssm_a", "ssm_beta.weight", "ssm_alpha.weight", "ssm_norm.weight", "ssm_out.weight"):
                layer[name] = t(name)
        else:
            for name in ("attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight"):
                layer[name] = t(name)
        if self.moe:
            layer["ffn_gate_inp"] = t("ffn_gate_inp.weight")
            layer["ffn_down_exps"] = t("ffn_down_exps.weight")
            if gguf.has(f"blk.{il}.ffn_gate_up_exps.weight"):
                # Merged experts: each expert's rows are [gate | up].
                merged = t("ffn_gate_up_exps.weight")
                half = merged.shape[1] // 2
                layer["ffn_gate_exps"], layer["ffn_up_exps"] = merged[:, :half], merged[:, half:]
            else:
                layer["ffn_gate_exps"], layer["ffn_up_exps"] = t("ffn_gate_exps.weight"), t("ffn_up_exps.weight")
            for name in ("ffn_gate_inp_shexp", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"):
                layer[name] = o(f"{name}.weight")
        else:
            for name in ("ffn_gate", "ffn_up", "ffn_down"):
                layer[name] = t(name + ".weight")
        return layer

    def new_state(self, carried):
        return State(self, carried)

    # --- mixers -----------------------------------------------------------------------------------
    def attention(self, layer, h, kv, pos):
        both = (layer["attn_q.weight"] @ h).reshape(self.n_head, 2 * self.head_dim)
        q, gate = both[:, : self.head_dim], both[:, self.head_dim:]
        angles = rope_angles(pos, self.n_rot, self.base)
        q = rope_neox(rms_norm(q, layer["attn_q_norm.weight"], self.eps), angles)
        k = (layer["attn_k.weight"] @ h).reshape(self.n_head_kv, self.head_dim)
        k = rope_neox(rms_norm(k, layer["attn_k_norm.weight"], self.eps), angles)
        kv.append(k, (layer["attn_v.weight"] @ h).reshape(self.n_head_kv, self.head_dim))
        keys, values = kv.visible(0)
        out = attend(q, keys, values, 1.0 / math.sqrt(self.head_dim)) * sigmoid(gate)
        return layer["attn_output.weight"] @ out.reshape(-1)

    def gated_delta_net(self, layer, h, state, il):
        mixed = layer["attn_qkv.weight"] @ h
        z = (layer["attn_gate.weight"] @ h).reshape(self.n_v_heads, self.head_v_dim)
        beta = sigmoid(layer["ssm_beta.weight"] @ h)
        g = softplus(layer["ssm_alpha.weight"] @ h + layer["ssm_dt.bias"]) * layer["ssm_a"]
        if "gdn-gate-sign" in self.faults:
            g = -g
        conv, shifted = causal_conv_step(state.conv[il], mixed, layer["ssm_conv1d.weight"])
        if "conv-state-not-shifted" not in self.faults:
            state.conv[il] = shifted
        conv = silu(conv)
        q = l2_norm(conv[: self.key_dim].reshape(self.n_k_heads, self.head_k_dim), self.eps)
        k = l2_norm(conv[self.key_dim: 2 * self.key_dim].reshape(self.n_k_heads, self.head_k_dim), self.eps)
        v = conv[2 * self.key_dim:].reshape(self.n_v_heads, self.head_v_dim)
        out = np.empty((self.n_v_heads, self.head_v_dim))
        scale = 1.0 / math.sqrt(self.head_k_dim)
        grouped = "gdn-heads-grouped" in self.faults
        for head in range(self.n_v_heads):
            key_head = head // (self.n_v_heads // self.n_k_heads) if grouped else head % self.n_k_heads
            kh, qh = k[key_head], q[key_head]
            s = state.ssm[il][head] * math.exp(g[head])  # s[j, i]: value row j, key column i
            if "gdn-decay-twice" in self.faults:
                s = s * math.exp(g[head])
            delta = beta[head] * (v[head] - s @ kh)
            s = s + np.outer(delta, kh)
            state.ssm[il][head] = s
            out[head] = (s @ qh) * scale
        out = rms_norm(out, layer["ssm_norm.weight"], self.eps) * silu(z)
        return layer["ssm_out.weight"] @ out.reshape(-1)

    # --- feed-forward ---------------------------------------------------------------------------------
    def ffn(self, layer, h):
        if not self.moe:
            return layer["ffn_down"] @ (silu(layer["ffn_gate"] @ h) * (layer["ffn_up"] @ h))
        probs = softmax(layer["ffn_gate_inp"] @ h)
        chosen, weights = route_experts(probs, probs, self.n_expert_used, "moe-no-renorm" not in self.faults, 0.0)
        out = np.zeros(self.n_embd)
        for e, w in zip(chosen, weights):
            hidden = silu(layer["ffn_gate_exps"][e] @ h) * (layer["ffn_up_exps"][e] @ h)
            out += w * (layer["ffn_down_exps"][e] @ hidden)
        if layer["ffn_up_shexp"] is not None:
            shared = layer["ffn_down_shexp"] @ (silu(layer["ffn_gate_shexp"] @ h) * (layer["ffn_up_shexp"] @ h))
            out += shared * sigmoid(layer["ffn_gate_inp_shexp"] @ h)
        return out

    def step(self, token, state):
        x = self.embedding[token].copy()
        for il, layer in enumerate(self.layers):
            h = rms_norm(x, layer["attn_norm"], self.eps)
            x = x + (self.gated_delta_net(layer, h, state, il) if self.recurrent[il] else self.attention(layer, h, state.kv[il], state.pos))
            x = x + self.ffn(layer, rms_norm(x, layer["post_norm"], self.eps))
        state.pos += 1
        return self.output @ rms_norm(x, self.output_norm, self.eps)


Family = Qwen35
