"""The runner-protocol face of a reference forward: tokenizer, greedy, teacher forcing, and the planted
FAULTs. A family module supplies `new_state(carried)`, `step(token, state) -> logits` and, for the
traced mode, the same step as operations, `forward(tape, inputs)` (trace.py); requests run
one at a time, each token fed alone (prefill included), which is mathematically what llama.cpp's
batched and chunked paths compute. A family may also offer `prefill(ids, state) -> logits` for a
whole prompt at once (the transformers oracle does)."""
import numpy as np

from .ops import log_softmax
from .sized_faults import STATE_FAULTS, apply_state_faults
from .trace import Capture, StepInputs

SPACE_MARK = "\u2581"
TOKEN_TYPE_NORMAL, TOKEN_TYPE_BYTE = 1, 6
# llama.cpp's token types as the kinds a suite asks about; user-defined and unused tokens are text.
KIND_OF_TYPE = {1: "text", 2: "unknown", 3: "control", 4: "text", 5: "text", 6: "byte"}

# Every FAULT a family can carry: planted on purpose so that tests can show the harness catches it.
FAULTS = {
    "state-not-cleared": "FAULT: recurrent and conv states carry over from the previous request (slot poisoning)",
    "conv-state-not-shifted": "FAULT: the causal-conv window is never advanced (each token convolves with zeros)",
    "gdn-gate-sign": "FAULT: GatedDeltaNet decay exp(+g) instead of exp(g)",
    "gdn-decay-twice": "FAULT: GatedDeltaNet decay applied twice per token",
    "gdn-heads-grouped": "FAULT: GatedDeltaNet value head h reads key head h div (n_v/n_k) (transformers' grouped order) on llama.cpp's tiled weights",
    "moe-topk-minus-one": "FAULT: one expert fewer than expert_used_count",
    "moe-no-renorm": "FAULT: routed expert weights not renormalised",
    "swa-off-by-one": "FAULT: sliding window one position too wide (p1 - p0 <= window)",
    "final-norm-skipped": "FAULT: the output head reads the residual stream without the final RMSNorm",
    "output-head-x0.5": "FAULT: the output head's weights scaled by 0.5 (logits halved)",
    "output-head-x1.01": "FAULT: the output head's weights scaled by 1.01 (logits 1% too large)",
    "trace-position-frozen": "FAULT: the traced decode bakes the RoPE angles of its capture step into the trace (replay never advances the position)",
    "trace-buffers-leak": "FAULT: each traced capture keeps the buffers of the captures before it (demand grows capture by capture)",
    "trace-weights-decoded": "FAULT: each weight is decoded per call inside the captured graph (every weight chain's decoded copy is a buffer of the capture)",
    "trace-routing-on-host": "FAULT: the expert ids are read back to the host inside the captured step (replay dispatches the captured step's experts)",
    "trace-state-aliased": "FAULT: the captured step binds the recurrent state array of the request it was captured in (replay updates that request's stale state)",
}

# FAULTs of the traced decode, open to a family whose step is written as operations (`forward(tape, inputs)`).
# Those that need a family's mechanism (RoPE angles, experts, recurrent state) are in that family's faults_for.
TRACE_FAULTS = {"trace-buffers-leak", "trace-weights-decoded"}


def modes_of(family):
    """eager always; traced where the family's decode step can be captured as an operation list (trace.py)."""
    return ["eager", "traced"] if callable(getattr(family, "forward", None)) else ["eager"]


class ReferenceRunner:
    def __init__(self, gguf, family, faults, state_faults=None, trace_region=None):
        self.family = family
        # A stated trace region (bytes) the captured decode must fit, as a device's is fixed; None: dynamic.
        self.trace_region = trace_region
        self.faults = set(faults)
        # Sized faults of the request's state (sized_faults.STATE_FAULTS), applied after every token fed.
        self.state_faults = {name: size for name, size in (state_faults or {}).items() if name in STATE_FAULTS}
        meta = gguf.metadata
        self.vocab = meta["tokenizer.ggml.tokens"]
        self.types = meta["tokenizer.ggml.token_type"]
        self.ids = {piece: i for i, piece in enumerate(self.vocab)}
        self.bos = meta.get("tokenizer.ggml.bos_token_id")
        self.add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", True))
        self.tokenizer_model = meta.get("tokenizer.ggml.model")
        self.previous_state = None
        self.modes = modes_of(family)
        # The captures whose buffers are held now: the last traced batch's, or every one with trace-buffers-leak.
        self.captures = []

    # --- one request ----------------------------------------------------------------------------
    def fresh_state(self):
        carried = self.previous_state if "state-not-cleared" in self.faults else None
        return self.family.new_state(carried)

    def prefill(self, ids):
        state = self.fresh_state()
        whole_prompt = getattr(self.family, "prefill", None)
        if whole_prompt is not None:
            return state, log_softmax(whole_prompt(ids, state))
        logprobs = None
        for token in ids:
            logprobs = self.feed(token, state)
        return state, logprobs

    def feed(self, token, state):
        logits = self.family.step(token, state)
        if self.state_faults:
            apply_state_faults(self.state_faults, state)
        return log_softmax(logits)

    def finish(self, state):
        self.previous_state = state

    # --- the runner protocol's methods --------------------------------------------------------
    def tokenize(self, params):
        """SentencePiece as llama.cpp does it for a one-character vocab: a leading space, spaces as ▁, byte fallback."""
        if self.tokenizer_model != "llama":
            raise ValueError(f"tokenizer model {self.tokenizer_model!r}: this reference tokenizes SentencePiece ('llama') character vocabularies only")
        out = []
        for text in params["texts"]:
            ids = [self.bos] if self.add_bos else []
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
                if kind == TOKEN_TYPE_BYTE:
                    raw.append(int(piece[3:5], 16))
                elif kind == TOKEN_TYPE_NORMAL:
                    raw.extend(piece.replace(SPACE_MARK, " ").encode("utf-8"))
            texts.append(raw.decode("utf-8", errors="replace").removeprefix(" "))
        return {"texts": texts}

    def inspect_tokens(self, params):
        """Each id's kind from the GGUF's token types, as the harness reads them (harness/gguf/token-kinds.ts):
        what a needle suite asks before it lets a token into a haystack."""
        kinds = []
        for i in params["ids"]:
            if not 0 <= i < len(self.types):
                raise ValueError(f"id {i} is outside the vocabulary ({len(self.types)} tokens)")
            kinds.append(KIND_OF_TYPE.get(self.types[i], "text"))
        return {"kinds": kinds}

    def greedy(self, params):
        """Eager, or traced (`"mode": "traced"`): the decode step is captured on the batch's first decode
        step and replayed for every later one, of every request in the batch; the capture is released
        when the batch ends (kept, under trace-buffers-leak)."""
        mode = params.get("mode", "eager")
        if mode not in self.modes:
            raise ValueError(f"mode {mode!r}: this runner runs {', '.join(self.modes)} for its family")
        capture, inputs = None, None
        results = []
        for request in params["requests"]:
            state, logprobs = self.prefill(request["prompt_ids"])
            out = []
            for _ in range(request["max_tokens"]):
                # Highest log-prob, lowest id on a tie.
                out.append(int(np.argmax(logprobs)))
                if len(out) == request["max_tokens"]:
                    break
                if mode == "eager":
                    logprobs = self.feed(out[-1], state)
                elif capture is None:
                    capture, inputs = self.new_capture(), StepInputs(out[-1], state)
                    logits = self.family.forward(capture, inputs)
                    logprobs = log_softmax(logits)
                else:
                    inputs.token, inputs.state = out[-1], state
                    capture.replay()
                    logprobs = log_softmax(logits)
            self.finish(state)
            results.append(out)
        if capture is not None:
            self.captures = [*self.captures, capture] if "trace-buffers-leak" in self.faults else [capture]
        return {"ids": results}

    def new_capture(self):
        return Capture(frozen={"rope_angles"} if "trace-position-frozen" in self.faults else (), decode_weights="trace-weights-decoded" in self.faults)

    def batched_greedy(self, params):
        """One request at a time: this runner has no batch, so its batch is trivially invariant."""
        return self.greedy(params)

    def teacher_forced_top_k(self, params):
        results = []
        for request in params["requests"]:
            state, logprobs = self.prefill(request["prompt_ids"])
            rows = []
            for position, token in enumerate(request["continuation_ids"]):
                best = np.argsort(-logprobs, kind="stable")[:request["k"]]
                rows.append({"ids": [int(i) for i in best], "logprobs": [float(logprobs[i]) for i in best]})
                if position + 1 < len(request["continuation_ids"]):
                    logprobs = self.feed(token, state)
            self.finish(state)
            results.append(rows)
        return {"top_k": results}

    def trace_demand(self, params):
        """The decode graph's demand: the bytes the replay buffers of the captures held now take."""
        if not self.captures:
            return {"captures": []}
        demand = sum(capture.demand_bytes() for capture in self.captures)
        if self.trace_region is not None:
            return {"captures": [{"capture": "decode", "demand_bytes": int(demand), "region_bytes": self.trace_region, "region_semantics": "fixed-total"}]}
        # No fixed trace region on a CPU: the buffers are allocated as the capture needs them.
        return {"captures": [{"capture": "decode", "demand_bytes": int(demand), "region_bytes": 0, "region_semantics": "dynamic"}]}
