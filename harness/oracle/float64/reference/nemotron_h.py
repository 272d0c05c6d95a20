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
from .trace import Eager, StepInputs, host_read

FAULTS = {"state-not-cleared", "conv-state-not-shifted", "moe-topk-minus-one", "moe-no-renorm", "trace-routing-on-host", "trace-state-aliased"} | set(HEAD_SCALE)


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

    # --- the decode step as operations (trace.py): every read of the request's state goes through `inputs` ---
    def step(self, token, state):
        return self.forward(Eager(), StepInputs(token, state))

    def forward(self, tape, inputs):
        """One decode step on `tape`: run at once (eager) or captured for replay."""
        x = tape.op("embed", lambda i: self.embedding[i.token].copy(), inputs)
        for il, layer in enumerate(self.layers):
            h = tape.op("attn_norm", rms_norm, x, layer["attn_norm"], self.eps)
            kind = self.kinds[il]
            if kind == "mamba2":
                mixed = self.mamba2(tape, inputs, layer, h, il)
            elif kind == "attention":
                mixed = self.attention(tape, inputs, layer, h, il)
            else:
                mixed = self.ffn(tape, layer, h, il)
            x = tape.op("residual", np.add, x, mixed)
        tape.op("advance", lambda i: setattr(i.state, "pos", i.state.pos + 1), inputs)
        return tape.op("logits", lambda x, w, n: w @ rms_norm(x, n, self.eps), x, self.output, self.output_norm)

    def mamba2(self, tape, inputs, layer, h, il):
        projected = tape.op("ssm_in", np.matmul, layer["ssm_in.weight"], h)
        conv = tape.op("conv", lambda i, p, w, b: self.conv_step(i.state, il, p, w, b), inputs, projected, layer["ssm_conv1d.weight"], layer["ssm_conv1d.bias"])
        dt = tape.op("dt", lambda p, b: softplus(p[self.d_inner + self.conv_dim:] + b), projected, layer["ssm_dt.bias"])
        if "trace-state-aliased" in self.faults:
            # FAULT: the SSM state bound as it is now, the capturing request's array, not read through inputs.
            y = tape.op("ssm_scan", self.scan, inputs.state.ssm[il], conv, dt, layer["ssm_a"], layer["ssm_d"])
        else:
            y = tape.op("ssm_scan", lambda i, c, dt, a, d: self.scan(i.state.ssm[il], c, dt, a, d), inputs, conv, dt, layer["ssm_a"], layer["ssm_d"])
        y = tape.op("ssm_norm", lambda y, p, n: rms_norm((y.reshape(-1) * silu(p[: self.d_inner])).reshape(self.n_group, -1), n.reshape(self.n_group, -1), self.eps),
                    y, projected, layer["ssm_norm.weight"])
        return tape.op("ssm_out", lambda w, y: w @ y.reshape(-1), layer["ssm_out.weight"], y)

    def conv_step(self, state, il, projected, weight, bias):
        xbc = projected[self.d_inner: self.d_inner + self.conv_dim]
        conv, shifted = causal_conv_step(state.conv[il], xbc, weight, bias)
        if "conv-state-not-shifted" not in self.faults:
            state.conv[il] = shifted
        return silu(conv)

    def scan(self, ssm, conv, dt, a, d):
        """The Mamba2 state update for one token, updating `ssm` (heads, head_dim, d_state) in place."""
        x = conv[: self.d_inner].reshape(self.n_ssm_head, self.ssm_head_dim)
        b = conv[self.d_inner: self.d_inner + self.n_group * self.d_state].reshape(self.n_group, self.d_state)
        c = conv[self.d_inner + self.n_group * self.d_state:].reshape(self.n_group, self.d_state)
        heads_per_group = self.n_ssm_head // self.n_group
        y = np.empty((self.n_ssm_head, self.ssm_head_dim))
        for head in range(self.n_ssm_head):
            g = head // heads_per_group
            s = ssm[head] * math.exp(dt[head] * a[head]) + np.outer(x[head] * dt[head], b[g])
            ssm[head] = s
            y[head] = s @ c[g] + d[head] * x[head]
        return y

    def attention(self, tape, inputs, layer, h, il):
        q = tape.op("q", lambda w, h: (w @ h).reshape(self.n_head[il], self.head_dim), layer["attn_q"], h)
        k = tape.op("k", lambda w, h: (w @ h).reshape(self.n_head_kv[il], self.head_dim), layer["attn_k"], h)
        v = tape.op("v", lambda w, h: (w @ h).reshape(self.n_head_kv[il], self.head_dim), layer["attn_v"], h)
        # The cache keeps copies: a replay rewrites k and v in place.
        tape.op("kv_append", lambda i, k, v: i.state.kv[il].append(k.copy(), v.copy()), inputs, k, v)
        attended = tape.op("attend", lambda i, q: attend(q, *i.state.kv[il].visible(0), 1.0 / math.sqrt(self.head_dim)), inputs, q)
        bias = layer["attn_output.bias"]
        return tape.op("attn_out", lambda w, a: w @ a.reshape(-1) if bias is None else w @ a.reshape(-1) + bias, layer["attn_output"], attended)

    def ffn(self, tape, layer, h, il):
        if "ffn_gate_inp.weight" not in layer:
            return tape.op("ffn", self.dense_ffn, h, layer["ffn_up.weight"], layer["ffn_down.weight"], layer["ffn_up.bias"], layer["ffn_down.bias"])
        probs = tape.op("router", lambda w, h: sigmoid(w @ h), layer["ffn_gate_inp.weight"], h)
        chosen = tape.op("route_ids", lambda p, b: self.route(p, b, il)[0], probs, layer["exp_probs_b.bias"])
        weights = tape.op("route_weights", lambda p, b: self.route(p, b, il)[1], probs, layer["exp_probs_b.bias"])
        latent = h if layer["ffn_latent_down.weight"] is None else tape.op("latent_down", np.matmul, layer["ffn_latent_down.weight"], h)
        routed = tape.op("experts", lambda c, w, x, u, d: sum(we * (d[e] @ relu_squared(u[e] @ x)) for e, we in zip(c, w)),
                         host_read(chosen, self.faults), weights, latent, layer["ffn_up_exps.weight"], layer["ffn_down_exps.weight"])
        if layer["ffn_latent_up.weight"] is not None:
            routed = tape.op("latent_up", np.matmul, layer["ffn_latent_up.weight"], routed)
        return tape.op("shared_expert", lambda r, h, u, d: r + d @ relu_squared(u @ h), routed, h, layer["ffn_up_shexp.weight"], layer["ffn_down_shexp.weight"])

    def route(self, probs, bias, il):
        """The choice ranks the sigmoids plus the bias; the weights are the sigmoids."""
        return route_experts(probs + bias, probs, self.n_expert_used[il], self.weights_norm, self.weights_scale)

    @staticmethod
    def dense_ffn(h, up_w, down_w, up_b, down_b):
        up = up_w @ h
        if up_b is not None:
            up = up + up_b
        out = down_w @ relu_squared(up)
        return out if down_b is None else out + down_b


Family = NemotronH
