"""The operations the families share, in float64, with the semantics of ggml's CPU ops (named where a
choice matters). Vectors are 1-D numpy arrays; per-head tensors are (heads, head_dim)."""
import numpy as np


def rms_norm(x, weight, eps):
    """x / sqrt(mean(x²) + eps) over the last axis, times `weight` (None: no weight, as ggml_rms_norm alone)."""
    out = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return out if weight is None else out * weight


def l2_norm(x, eps):
    """ggml_l2_norm: x / max(‖x‖, eps) over the last axis."""
    return x / np.maximum(np.sqrt(np.sum(x * x, axis=-1, keepdims=True)), eps)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def softplus(x):
    """ggml's softplus: the identity above 20, log(1 + eˣ) below."""
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def gelu_tanh(x):
    """The tanh approximation of GELU that ggml_gelu computes, exactly (float64)."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * x * (1.0 + 0.044715 * x * x)))


def gelu_ggml_table(x):
    """ggml's CPU GELU as built (GGML_GELU_FP16): the input rounded to fp16, looked up in a table of
    fp16 results; ±10 and beyond pass through. Used only to show where a gap to llama.cpp comes from."""
    looked_up = gelu_tanh(x.astype(np.float16).astype(np.float32).astype(np.float64)).astype(np.float32).astype(np.float16).astype(np.float64)
    return np.where(x <= -10.0, 0.0, np.where(x >= 10.0, x, looked_up))


def relu_squared(x):
    return np.square(np.maximum(x, 0.0))


def log_softmax(logits):
    top = np.max(logits)
    return logits - (top + np.log(np.sum(np.exp(logits - top))))


def softmax(x):
    e = np.exp(x - np.max(x))
    return e / np.sum(e)


def rope_angles(pos, n_rot, base, factors=None, scale=1.0):
    """θ_i = scale · pos · base^(−2i/n_rot) / factor_i for the n_rot/2 rotated pairs (ggml_rope_cache_init, no YaRN)."""
    inv = base ** (-2.0 * np.arange(n_rot // 2) / n_rot)
    if factors is not None:
        inv = inv / factors[: n_rot // 2]
    return scale * pos * inv


def rope_neox(x, angles):
    """NEOX rotation of each head's first 2·len(angles) dims: pairs (i, i + n_rot/2); the rest pass through.
    IMROPE (qwen35) is this too for text, whose four position components are equal."""
    half = len(angles)
    out = x.copy()
    a, b = x[..., :half], x[..., half:2 * half]
    c, s = np.cos(angles), np.sin(angles)
    out[..., :half] = a * c - b * s
    out[..., half:2 * half] = a * s + b * c
    return out


def rope_norm(x, angles):
    """llama's rotation of adjacent pairs (x[2i], x[2i+1])."""
    out = x.copy()
    a, b = x[..., 0:2 * len(angles):2], x[..., 1:2 * len(angles):2]
    c, s = np.cos(angles), np.sin(angles)
    out[..., 0:2 * len(angles):2] = a * c - b * s
    out[..., 1:2 * len(angles):2] = a * s + b * c
    return out


def attend(q, keys, values, scale):
    """Softmax attention of one query position over the visible cached positions.
    q (n_head, d); keys (T, n_kv, d); values (T, n_kv, dv). Query head h reads kv head h // (n_head / n_kv),
    as ggml_mul_mat broadcasts."""
    n_head, n_kv = q.shape[0], keys.shape[1]
    grouped = q.reshape(n_kv, n_head // n_kv, q.shape[1])  # query heads h = j·group + g read kv head j
    scores = np.einsum("jgd,tjd->jgt", grouped, keys) * scale
    scores -= scores.max(axis=2, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=2, keepdims=True)
    return np.einsum("jgt,tjd->jgd", weights, values).reshape(n_head, values.shape[2])


class KvCache:
    """One attention layer's keys and values, one row per position, in arrays that double as they fill:
    a step reads its visible rows as a view, not a copy of the whole cache (at 4,000 positions the
    copy cost more than the attention)."""

    def __init__(self):
        self.keys = self.values = None
        self.rows = 0
        # Positions before the first row held: only the FAULT kv_wrap (sized_faults.py) drops rows.
        self.dropped = 0

    def append(self, k, v):
        if self.keys is None:
            self.keys, self.values = np.empty((16, *k.shape)), np.empty((16, *v.shape))
        elif self.rows == len(self.keys):
            self.keys = np.concatenate([self.keys, np.empty_like(self.keys)])
            self.values = np.concatenate([self.values, np.empty_like(self.values)])
        self.keys[self.rows], self.values[self.rows] = k, v
        self.rows += 1

    def visible(self, first):
        """The rows of positions `first` onwards that the cache still holds."""
        start = max(0, first - self.dropped)
        return self.keys[start:self.rows], self.values[start:self.rows]

    def drop_oldest(self, count):
        self.keys[:self.rows - count] = self.keys[count:self.rows]
        self.values[:self.rows - count] = self.values[count:self.rows]
        self.rows -= count
        self.dropped += count


class AttentionState:
    """A request's state for a family whose every layer is attention: the position and one KV cache per layer."""

    def __init__(self, n_layer):
        self.pos = 0
        self.kv = [KvCache() for _ in range(n_layer)]


def causal_conv_step(window_state, x, weight, bias=None):
    """ggml_ssm_conv for one new token: window_state (K−1, C) holds the previous inputs (oldest first),
    weight (C, K); returns the convolved channels and the shifted state."""
    window = np.vstack([window_state, x[None, :]])  # (K, C)
    out = np.einsum("kc,ck->c", window, weight)
    if bias is not None:
        out = out + bias
    return out, window[1:]


def route_experts(selection_scores, probs, k, normalize, scale):
    """llama.cpp's build_moe_ffn routing: the k experts with the highest selection score, weighted by
    their `probs` (renormalised to sum 1 if `normalize`, the sum clamped at 6.1e-5; times `scale` unless 0 or 1)."""
    chosen = np.argsort(-selection_scores, kind="stable")[:k]
    weights = probs[chosen]
    if normalize:
        weights = weights / max(np.sum(weights), 6.103515625e-5)
    if scale not in (0.0, 1.0):
        weights = weights * scale
    return chosen, weights
