"""A second, independent forward pass for the harness's F32 llama fixtures, in plain Python (float64,
no packages), served over the runner protocol. It is what a bring-up's own forward looks like to
the harness: `bench run --runner "python3 scripts/runners/reference_llama.py {model}"` holds it to
the llama.cpp goldens. Slow (tens of milliseconds a token): meant for a few prompts.

Usage: python3 reference_llama.py MODEL.gguf
"""
import math
import operator
import struct
import sys
from array import array

from bench_runner import serve

GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
GGUF_STRING, GGUF_ARRAY, GGML_F32 = 8, 9, 0
SPACE_MARK = "\u2581"


class GgufFile:
    """Metadata and F32 tensors of a GGUF v3 file (the harness's fixtures: F32 only)."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        self.pos = 0
        if self.data[:4] != b"GGUF":
            raise SystemExit(f"{path}: not a GGUF file")
        self.pos = 4
        version, n_tensors, n_kv = self.read("<I"), self.read("<Q"), self.read("<Q")
        if version != 3:
            raise SystemExit(f"{path}: GGUF version {version}; this runner reads version 3")
        self.metadata = {}
        for _ in range(n_kv):
            key = self.string()
            self.metadata[key] = self.value(self.read("<I"))
        infos = []
        for _ in range(n_tensors):
            name, n_dims = self.string(), self.read("<I")
            dims = [self.read("<Q") for _ in range(n_dims)]
            infos.append((name, dims, self.read("<I"), self.read("<Q")))
        alignment = self.metadata.get("general.alignment", 32)
        start = (self.pos + alignment - 1) // alignment * alignment
        self.tensors = {}
        for name, dims, kind, offset in infos:
            if kind != GGML_F32:
                raise SystemExit(f"{path}: tensor {name} is ggml type {kind}; this runner reads F32 models (use the :F32 fixture)")
            count = math.prod(dims)
            values = array("f")
            values.frombytes(self.data[start + offset:start + offset + 4 * count])
            self.tensors[name] = (dims, values.tolist())

    def read(self, fmt):
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self):
        length = self.read("<Q")
        text = self.data[self.pos:self.pos + length].decode("utf-8")
        self.pos += length
        return text

    def value(self, kind):
        if kind == GGUF_STRING:
            return self.string()
        if kind == GGUF_ARRAY:
            item_kind, count = self.read("<I"), self.read("<Q")
            return [self.value(item_kind) for _ in range(count)]
        return self.read(GGUF_SCALARS[kind])

    def rows(self, name):
        """A [inputs, outputs] ggml matrix as `outputs` rows of `inputs` values."""
        (inputs, outputs), values = self.tensors[name]
        return [values[o * inputs:(o + 1) * inputs] for o in range(outputs)]


def matvec(rows, x):
    return [sum(map(operator.mul, row, x)) for row in rows]


def rms_norm(x, weight, eps):
    scale = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * scale * w for v, w in zip(x, weight)]


def log_softmax(logits):
    top = max(logits)
    log_total = top + math.log(sum(math.exp(v - top) for v in logits))
    return [v - log_total for v in logits]


class ReferenceLlama:
    def __init__(self, path):
        gguf = GgufFile(path)
        meta = gguf.metadata
        if meta.get("general.architecture") != "llama":
            raise SystemExit(f"{path}: architecture {meta.get('general.architecture')!r}; this runner runs llama")
        self.d = meta["llama.embedding_length"]
        self.heads = meta["llama.attention.head_count"]
        self.kv_heads = meta.get("llama.attention.head_count_kv", self.heads)
        self.head_dim = self.d // self.heads
        self.eps = meta["llama.attention.layer_norm_rms_epsilon"]
        base = meta.get("llama.rope.freq_base", 10000.0)
        factors = gguf.tensors["rope_freqs.weight"][1] if "rope_freqs.weight" in gguf.tensors else [1.0] * (self.head_dim // 2)
        # llama's RoPE rotates adjacent pairs (x[2i], x[2i+1]) by pos · base^(−2i/head_dim) / factor_i.
        self.inv_freq = [base ** (-2 * i / self.head_dim) / factors[i] for i in range(self.head_dim // 2)]
        self.vocab = meta["tokenizer.ggml.tokens"]
        self.types = meta["tokenizer.ggml.token_type"]
        self.ids = {piece: i for i, piece in enumerate(self.vocab)}
        self.bos = meta["tokenizer.ggml.bos_token_id"]
        (d, _), self.embedding = gguf.tensors["token_embd.weight"]
        self.layers = []
        for b in range(meta["llama.block_count"]):
            blk = f"blk.{b}."
            self.layers.append({name: gguf.rows(blk + name + ".weight") for name in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")})
            self.layers[-1]["attn_norm"] = gguf.tensors[blk + "attn_norm.weight"][1]
            self.layers[-1]["ffn_norm"] = gguf.tensors[blk + "ffn_norm.weight"][1]
        self.output_norm = gguf.tensors["output_norm.weight"][1]
        self.output = gguf.rows("output.weight")

    # --- the forward pass -------------------------------------------------------------------
    def rope(self, x, pos):
        out = list(x)
        for head in range(len(x) // self.head_dim):
            base = head * self.head_dim
            for i, inv in enumerate(self.inv_freq):
                angle = pos * inv
                c, s = math.cos(angle), math.sin(angle)
                a, b = x[base + 2 * i], x[base + 2 * i + 1]
                out[base + 2 * i], out[base + 2 * i + 1] = a * c - b * s, a * s + b * c
        return out

    def step(self, token, cache):
        """Feeds one token at position len(cache[0]); returns the next-token log-probs."""
        pos = len(cache[0]["k"])
        x = self.embedding[token * self.d:(token + 1) * self.d]
        group = self.heads // self.kv_heads
        for layer, kv in zip(self.layers, cache):
            h = rms_norm(x, layer["attn_norm"], self.eps)
            q = self.rope(matvec(layer["attn_q"], h), pos)
            kv["k"].append(self.rope(matvec(layer["attn_k"], h), pos))
            kv["v"].append(matvec(layer["attn_v"], h))
            attended = []
            for head in range(self.heads):
                lo, hi = head * self.head_dim, (head + 1) * self.head_dim
                kv_lo, kv_hi = (head // group) * self.head_dim, (head // group + 1) * self.head_dim
                qh = q[lo:hi]
                scores = [sum(map(operator.mul, qh, k[kv_lo:kv_hi])) / math.sqrt(self.head_dim) for k in kv["k"]]
                weights = [math.exp(s) for s in log_softmax(scores)]
                attended.extend(sum(w * v[kv_lo + j] for w, v in zip(weights, kv["v"])) for j in range(self.head_dim))
            x = [a + b for a, b in zip(x, matvec(layer["attn_output"], attended))]
            h = rms_norm(x, layer["ffn_norm"], self.eps)
            gate, up = matvec(layer["ffn_gate"], h), matvec(layer["ffn_up"], h)
            hidden = [g / (1.0 + math.exp(-g)) * u for g, u in zip(gate, up)]
            x = [a + b for a, b in zip(x, matvec(layer["ffn_down"], hidden))]
        return log_softmax(matvec(self.output, rms_norm(x, self.output_norm, self.eps)))

    def prefill(self, ids):
        cache = [{"k": [], "v": []} for _ in self.layers]
        for token in ids:
            logprobs = self.step(token, cache)
        return cache, logprobs

    # --- the runner protocol's methods --------------------------------------------------------
    def tokenize(self, params):
        """SentencePiece as llama.cpp does it for a one-character vocab: a leading space, spaces as ▁, byte fallback."""
        out = []
        for text in params["texts"]:
            ids = [self.bos]
            for ch in " " + text:
                piece = SPACE_MARK if ch == " " else ch
                if piece in self.ids:
                    ids.append(self.ids[piece])
                else:
                    ids.extend(self.ids[f"<0x{byte:02X}>"] for byte in ch.encode("utf-8"))
            out.append(ids)
        return {"ids": out}

    def detokenize(self, params):
        texts = []
        for ids in params["sequences"]:
            raw = bytearray()
            for i in ids:
                piece, kind = self.vocab[i], self.types[i]
                if kind == 6:
                    raw.append(int(piece[3:5], 16))
                elif kind == 1:
                    raw.extend(piece.replace(SPACE_MARK, " ").encode("utf-8"))
            texts.append(raw.decode("utf-8", errors="replace").removeprefix(" "))
        return {"texts": texts}

    def greedy(self, params):
        results = []
        for request in params["requests"]:
            cache, logprobs = self.prefill(request["prompt_ids"])
            out = []
            for _ in range(request["max_tokens"]):
                out.append(max(range(len(logprobs)), key=lambda i: (logprobs[i], -i)))
                if len(out) < request["max_tokens"]:
                    logprobs = self.step(out[-1], cache)
            results.append(out)
        return {"ids": results}

    def batched_greedy(self, params):
        """One request at a time: this runner has no batch, so its batch is trivially invariant."""
        return self.greedy(params)

    def teacher_forced_top_k(self, params):
        results = []
        for request in params["requests"]:
            cache, logprobs = self.prefill(request["prompt_ids"])
            rows = []
            for position, token in enumerate(request["continuation_ids"]):
                best = sorted(range(len(logprobs)), key=lambda i: (-logprobs[i], i))[:request["k"]]
                rows.append({"ids": best, "logprobs": [logprobs[i] for i in best]})
                if position + 1 < len(request["continuation_ids"]):
                    logprobs = self.step(token, cache)
            results.append(rows)
        return {"top_k": results}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: reference_llama.py MODEL.gguf")
    serve(ReferenceLlama(sys.argv[1]), "reference_llama.py (plain Python, float64)", {"precision": "float64"})
