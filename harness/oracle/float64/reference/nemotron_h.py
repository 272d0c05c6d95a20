"""nemotron_h_moe (src/models/nemotron-h.cpp, mamba-base.cpp build_mamba2_layer).

Every block is x += mixer(attn_norm(x)) with one mixer per layer, chosen from the per-layer arrays:
attention.head_count_kv[il] == 0 and feed_forward_length[il] == 0 -> Mamba2; feed_forward_length[il]
== 0 -> attention (no RoPE, no q/k norms); otherwise an FFN, routed when the layer has experts.

Mamba2, per token: in_proj gives z | xBC | dt; xBC goes through the causal conv (with bias) and
SiLU; then per head h (group g = h // (heads / groups), as ssm_scan's repeat_interleave):

    dt' = softplus(dt + dt_bias);  S_h ← S_h·exp(dt'·A_h) + (x_h·dt') B_gᵀ;  y_h = S_h C_g + D_h·x_h

and y·SiLU(z) goes through a grouped RMS norm (groups of d_inner / n_group) and out_proj.

Routed experts: sigmoid router; the choice ranks sigmoid + exp_probs_b, the weights are the sigmoids
(renormalised when expert_weights_norm, times expert_weights_scale); experts and the shared expert are
up -> relu² -> down (no gate).
"""
import math

import numpy as np

from .head_faults import HEAD_SCALE, scaled_head
from .ops import KvCache, attend, causal_conv_step, relu_squared, rms_norm, route_experts, sigmoid, silu, softplus

FAULTS = {"state-not-cleared", "conv-state-not-shifted", "moe-topk-minus-one", "moe-no-renorm"} | set(HEAD_SCALE)


def faults_for(architecture):
    return FAULTS


class State:
    def __init__(self, model, carried):
        self.pos = 0
        self.kv, self.conv, self.ssm = {}, {}, {}
        for il, kind in enumerate(model.kinds):
            if kind == "mamba2":
                # A carried state is the FAULT state-not-cleared: the previous request's recurrent memory.
                self.conv[il] = carried.conv[il].copy() if carried else np.zeros((model.conv_kernel - 1, model.conv_dim))
                self.ssm[il] = carried.ssm[il].copy() if carried else np.zeros((model.n_ssm_head, model.ssm_head_dim, model.d_state))
            elif kind == "attention":
                self.kv[il] = KvCache()


class NemotronH:
    def __init__(self, gguf, faults, options):
        self.faults = faults
        n = self.n_layer = gguf.key("block_count")
        self.n_embd = gguf.key("embedding_length")
        self.eps = gguf.key("attention.layer_norm_rms_epsilon")
        n_head = gguf.per_layer("attention.head_count", n)
        self.n_head = n_head
        self.n_head_kv = gguf.per_layer("attention.head_count_kv", n, gguf.key("attention.head_count"))
        n_ff = gguf.per_layer("feed_forward_length", n)
        self.head_dim = gguf.key("attention.key_length", self.n_embd // max(n_head))
        self.kinds = []
        for il in range(n):
            if self.n_head_kv[il] == 0 and n_ff[il] == 0:
                self.kinds.append("mamba2")
            elif n_ff[il] == 0:
                self.kinds.append("attention")
            else:
                self.kinds.append("ffn")
        self.conv_kernel = gguf.key("ssm.conv_kernel")
        self.d_inner = gguf.key("ssm.inner_size")
        self.d_state = gguf.key("ssm.state_size")
        self.n_ssm_head = gguf.key("ssm.time_step_rank")
        self.n_group = gguf.key("ssm.group_count")
        self.ssm_head_dim = self.d_inner // self.n_ssm_head
        self.conv_dim = self.d_inner + 2 * self.n_group * self.d_state
        self.n_expert_used = [k - (1 if "moe-topk-minus-one" in faults else 0) for k in gguf.per_layer("expert_used_count", n, 0)]
        self.weights_norm = bool(gguf.key("expert_weights_norm", False)) and "moe-no-renorm" not in faults
        self.weights_scale = gguf.key("expert_weights_scale", 0.0)
        self.embedding = gguf.tensor("token_embd.weight")
        self.layers = [self.load_layer(gguf, il) for il in range(n)]
        self.output_norm = gguf.tensor("output_norm.weight")
        self.output = scaled_head(gguf.output_projection(self.embedding), faults)

    def load_layer(self, gguf, il):
        p = f"blk.{il}."
        t, o = gguf.block_tensors(il)
        layer = {"attn_norm": t("attn_norm.weight")}
        kind = self.kinds[il]
        if kind == "mamba2":
            for name in ("ssm_in.weight", "ssm_conv1d.weight", "ssm_dt.bias", "ssm_norm.weight", "ssm_out.weight"):
                layer[name] = t(name)
            layer["ssm_conv1d.bias"] = o("ssm_conv1d.bias")
            layer["ssm_a"], layer["ssm_d"] = t("ssm_a").reshape(-1), t("ssm_d").reshape(-1)
            layer["ssm_norm.weight"] = layer["ssm_norm.weight"].reshape(-1)
        elif kind == "attention":
            for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
                layer[name] = t(name + ".weight")
            layer["attn_output.bias"] = o("attn_output.bias")
        elif gguf.has(p + "ffn_gate_inp.weight"):
            for name in ("ffn_gate_inp.weight", "exp_probs_b.bias", "ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"):
                layer[name] = t(name)
            layer["ffn_latent_down.weight"], layer["ffn_latent_up.weight"] = o("ffn_latent_down.weight"), o("ffn_latent_up.weight")
        else:
            for name in ("ffn_up.weight", "ffn_down.weight"):
                layer[name] = t(name)
            layer["ffn_up.bias"], layer["ffn_down.bias"] = o("ffn_up.bias"), o("ffn_down.bias")
        return layer

    def new_state(self, carried):
        return State(self, carried)

    def mamba2(self, layer, h, state, il):
        projected = layer["ssm_in.weight"] @ h
        z = projected[: self.d_inner]
        xbc = projected[self.d_inner: self.d_inner + self.conv_dim]
        dt = projected[self.d_inner + self.conv_dim:]
        conv, shifted = causal_conv_step(state.conv[il], xbc, layer["ssm_conv1d.weight"], layer["ssm_conv1d.bias"])
        if "conv-state-not-shifted" not in self.faults:
            state.conv[il] = shifted
        conv = silu(conv)
        x = conv[: self.d_inner].reshape(self.n_ssm_head, self.ssm_head_dim)
        b = conv[self.d_inner: self.d_inner + self.n_group * self.d_state].reshape(self.n_group, self.d_state)
        c = conv[self.d_inner + self.n_group * self.d_state:].reshape(self.n_group, self.d_state)
        dt = softplus(dt + layer["ssm_dt.bias"])
        heads_per_group = self.n_ssm_head // self.n_group
        y = np.empty((self.n_ssm_head, self.ssm_head_dim))
        for head in range(self.n_ssm_head):
            g = head // heads_per_group
            s = state.ssm[il][head] * math.exp(dt[head] * layer["ssm_a"][head]) + np.outer(x[head] * dt[head], b[g])
            state.ssm[il][head] = s
            y[head] = s @ c[g] + layer["ssm_d"][head] * x[head]
        y = (y.reshape(-1) * silu(z)).reshape(self.n_group, -1)
        y = rms_norm(y, layer["ssm_norm.weight"].reshape(self.n_group, -1), self.eps)
        return layer["ssm_out.weight"] @ y.reshape(-1)

    def attention(self, layer, h, kv, il):
        q = (layer["attn_q"] @ h).reshape(self.n_head[il], self.head_dim)
        k = (layer["attn_k"] @ h).reshape(self.n_head_kv[il], self.head_dim)
        kv.append(k, (layer["attn_v"] @ h).reshape(self.n_head_kv[il], self.head_dim))
        keys, values = kv.visible(0)
        out = layer["attn_output"] @ attend(q, keys, values, 1.0 / math.sqrt(self.head_dim)).reshape(-1)
        return out if layer["attn_output.bias"] is None else out + layer["attn_output.bias"]

    def ffn(self, layer, h, il):
        if "ffn_gate_inp.weight" not in layer:
            up = layer["ffn_up.weight"] @ h
            if layer["ffn_up.bias"] is not None:
                up = up + layer["ffn_up.bias"]
            out = layer["ffn_down.weight"] @ relu_squared(up)
            return out if layer["ffn_down.bias"] is None else out + layer["ffn_down.bias"]
        probs = sigmoid(layer["ffn_gate_inp.weight"] @ h)
        chosen, weights = route_experts(probs + layer["exp_probs_b.bias"], probs, self.n_expert_used[il], self.weights_norm, self.weights_scale)
        latent = h if layer["ffn_latent_down.weight"] is None else layer["ffn_latent_down.weight"] @ h
        routed = sum(w * (layer["ffn_down_exps.weight"][e] @ relu_squared(layer["ffn_up_exps.weight"][e] @ latent)) for e, w in zip(chosen, weights))
        if layer["ffn_latent_up.weight"] is not None:
            routed = layer["ffn_latent_up.weight"] @ routed
        return routed + layer["ffn_down_shexp.weight"] @ relu_squared(layer["ffn_up_shexp.weight"] @ h)

    def step(self, token, state):
        x = self.embedding[token].copy()
        for il, layer in enumerate(self.layers):
            h = rms_norm(x, layer["attn_norm"], self.eps)
            kind = self.kinds[il]
            if kind == "mamba2":
                x = x + self.mamba2(layer, h, state, il)
            elif kind == "attention":
                x = x + self.attention(layer, h, state.kv[il], il)
            else:
                x = x + self.ffn(layer, h, il)
        state.pos += 1
        return self.output @ rms_norm(x, self.output_norm, self.eps)


Family = NemotronH
