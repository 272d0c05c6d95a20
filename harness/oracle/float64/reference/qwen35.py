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
from .trace import Eager, StepInputs, host_read

DENSE_FAULTS = {"state-not-cleared", "conv-state-not-shifted", "gdn-gate-sign", "gdn-decay-twice", "gdn-heads-grouped", "trace-position-frozen", "trace-state-aliased"} | set(HEAD_SCALE)


def faults_for(architecture):
    """The FAULTs a model of `architecture` can carry (routing faults need qwen35moe's experts)."""
    return DENSE_FAULTS | {"moe-topk-minus-one", "moe-no-renorm", "trace-routing-on-host"} if architecture == "qwen35moe" else DENSE_FAULTS


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

    # --- the decode step as operations (trace.py): every read of the request's state goes through `inputs` ---
    def step(self, token, state):
        return self.forward(Eager(), StepInputs(token, state))

    def forward(self, tape, inputs):
        """One decode step on `tape`: run at once (eager) or captured for replay."""
        x = tape.op("embed", lambda i: self.embedding[i.token].copy(), inputs)
        angles = tape.op("rope_angles", lambda i: rope_angles(i.state.pos, self.n_rot, self.base), inputs)
        for il, layer in enumerate(self.layers):
            h = tape.op("attn_norm", rms_norm, x, layer["attn_norm"], self.eps)
            mixed = self.gated_delta_net(tape, inputs, layer, h, il) if self.recurrent[il] else self.attention(tape, inputs, layer, h, angles, il)
            x = tape.op("mixer_residual", np.add, x, mixed)
            h = tape.op("post_norm", rms_norm, x, layer["post_norm"], self.eps)
            x = tape.op("ffn_residual", np.add, x, self.moe_ffn(tape, layer, h) if self.moe else tape.op("ffn", swiglu, h, layer["ffn_gate"], layer["ffn_up"], layer["ffn_down"]))
        tape.op("advance", lambda i: setattr(i.state, "pos", i.state.pos + 1), inputs)
        return tape.op("logits", lambda x, w, n: w @ rms_norm(x, n, self.eps), x, self.output, self.output_norm)

    def attention(self, tape, inputs, layer, h, angles, il):
        hd = self.head_dim
        both = tape.op("q_gate", lambda w, h: (w @ h).reshape(self.n_head, 2 * hd), layer["attn_q.weight"], h)
        q = tape.op("q", lambda b, n, a: rope_neox(rms_norm(b[:, :hd], n, self.eps), a), both, layer["attn_q_norm.weight"], angles)
        k = tape.op("k", lambda w, h, n, a: rope_neox(rms_norm((w @ h).reshape(self.n_head_kv, hd), n, self.eps), a), layer["attn_k.weight"], h, layer["attn_k_norm.weight"], angles)
        v = tape.op("v", lambda w, h: (w @ h).reshape(self.n_head_kv, hd), layer["attn_v.weight"], h)
        # The cache keeps copies: a replay rewrites k and v in place.
        tape.op("kv_append", lambda i, k, v: i.state.kv[il].append(k.copy(), v.copy()), inputs, k, v)
        out = tape.op("attend", lambda i, q, b: attend(q, *i.state.kv[il].visible(0), 1.0 / math.sqrt(hd)) * sigmoid(b[:, hd:]), inputs, q, both)
        return tape.op("attn_out", lambda w, o: w @ o.reshape(-1), layer["attn_output.weight"], out)

    def gated_delta_net(self, tape, inputs, layer, h, il):
        mixed = tape.op("qkv", np.matmul, layer["attn_qkv.weight"], h)
        z = tape.op("z", lambda w, h: (w @ h).reshape(self.n_v_heads, self.head_v_dim), layer["attn_gate.weight"], h)
        beta = tape.op("beta", lambda w, h: sigmoid(w @ h), layer["ssm_beta.weight"], h)
        g = tape.op("decay", self.decay, layer["ssm_alpha.weight"], h, layer["ssm_dt.bias"], layer["ssm_a"])
        conv = tape.op("conv", lambda i, m, w: self.conv_step(i.state, il, m, w), inputs, mixed, layer["ssm_conv1d.weight"])
        if "trace-state-aliased" in self.faults:
            # FAULT: the recurrent state bound as it is now, the capturing request's array, not read through inputs.
            out = tape.op("delta_rule", self.delta_rule, inputs.state.ssm[il], conv, g, beta)
        else:
            out = tape.op("delta_rule", lambda i, c, g, b: self.delta_rule(i.state.ssm[il], c, g, b), inputs, conv, g, beta)
        out = tape.op("ssm_norm", lambda o, n, z: rms_norm(o, n, self.eps) * silu(z), out, layer["ssm_norm.weight"], z)
        return tape.op("ssm_out", lambda w, o: w @ o.reshape(-1), layer["ssm_out.weight"], out)

    def decay(self, alpha, h, dt_bias, a):
        g = softplus(alpha @ h + dt_bias) * a
        return -g if "gdn-gate-sign" in self.faults else g

    def conv_step(self, state, il, mixed, weight):
        conv, shifted = causal_conv_step(state.conv[il], mixed, weight)
        if "conv-state-not-shifted" not in self.faults:
            state.conv[il] = shifted
        return silu(conv)

    def delta_rule(self, ssm, conv, g, beta):
        """The GatedDeltaNet recurrence for one token, updating `ssm` (heads, value, key) in place."""
        q = l2_norm(conv[: self.key_dim].reshape(self.n_k_heads, self.head_k_dim), self.eps)
        k = l2_norm(conv[self.key_dim: 2 * self.key_dim].reshape(self.n_k_heads, self.head_k_dim), self.eps)
        v = conv[2 * self.key_dim:].reshape(self.n_v_heads, self.head_v_dim)
        out = np.empty((self.n_v_heads, self.head_v_dim))
        scale = 1.0 / math.sqrt(self.head_k_dim)
        grouped = "gdn-heads-grouped" in self.faults
        for head in range(self.n_v_heads):
            key_head = head // (self.n_v_heads // self.n_k_heads) if grouped else head % self.n_k_heads
            kh, qh = k[key_head], q[key_head]
            s = ssm[head] * math.exp(g[head])  # s[j, i]: value row j, key column i
            if "gdn-decay-twice" in self.faults:
                s = s * math.exp(g[head])
            delta = beta[head] * (v[head] - s @ kh)
            s = s + np.outer(delta, kh)
            ssm[head] = s
            out[head] = (s @ qh) * scale
        return out

    # --- routed experts: the choice is an operation whose output the expert operation reads ---------------
    def moe_ffn(self, tape, layer, h):
        probs = tape.op("router", lambda w, h: softmax(w @ h), layer["ffn_gate_inp"], h)
        renorm = "moe-no-renorm" not in self.faults
        chosen = tape.op("route_ids", lambda p: route_experts(p, p, self.n_expert_used, renorm, 0.0)[0], probs)
        weights = tape.op("route_weights", lambda p: route_experts(p, p, self.n_expert_used, renorm, 0.0)[1], probs)
        routed = tape.op("experts", self.experts, host_read(chosen, self.faults), weights, h, layer["ffn_gate_exps"], layer["ffn_up_exps"], layer["ffn_down_exps"])
        if layer["ffn_up_shexp"] is None:
            return routed
        return tape.op("shared_expert", lambda r, h, g, u, d, s: r + swiglu(h, g, u, d) * sigmoid(s @ h), routed, h,
                       layer["ffn_gate_shexp"], layer["ffn_up_shexp"], layer["ffn_down_shexp"], layer["ffn_gate_inp_shexp"])

    def experts(self, chosen, weights, h, gate, up, down):
        out = np.zeros(self.n_embd)
        for e, w in zip(chosen, weights):
            out += w * (down[e] @ (silu(gate[e] @ h) * (up[e] @ h)))
        return out


def swiglu(h, gate, up, down):
    return down @ (silu(gate @ h) * (up @ h))


Family = Qwen35
