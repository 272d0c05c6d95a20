"""Sized FAULTs behind the identity check: the runner loads the goldens' own file, reports it in hello,
and computes with one quantity wrong by a chosen size — what a device kernel with a slightly wrong
constant looks like. Chosen by the environment, so a suite's own arm command carries them:

    BENCH_REFERENCE_FAULT=rope_base:1.001,norm_eps:10 python3 reference_forward.py MODEL.gguf

Every fault is a view of the file as the forward reads it (a metadata key or a tensor changed on the
way in); the file itself is untouched. A fault that touches nothing the family reads is refused.
"""
import zlib

import numpy as np

from .gguf import REQUIRED, GgufError, GgufFile

ENV = "BENCH_REFERENCE_FAULT"

# name: what SIZE does. Every size is a number; 1 (or 0 for the additive window) is the clean model.
SIZED_FAULTS = {
    "weights_noise": "Gaussian noise of standard deviation SIZE × the tensor's RMS added to every weight matrix (seeded by name)",
    "rope_base": "every RoPE base (rope.freq_base, rope.freq_base_swa) × SIZE",
    "norm_eps": "the RMS-norm epsilon × SIZE (every norm that reads it, L2 norms included)",
    "ssm_decay": "the recurrent decay rate (ssm_a: GatedDeltaNet's A, Mamba2's A) × SIZE",
    "conv_taps": "every causal-conv tap but the newest × SIZE (the window's history weighted wrong)",
    "router_temp": "router logits ÷ SIZE (ffn_gate_inp.weight / SIZE: a temperature on the expert choice and weights)",
    "window": "the sliding window + SIZE positions",
    "state_reset": "the recurrent state (GatedDeltaNet or Mamba2, and its conv window) zeroed after every SIZE tokens fed: a prefill that loses it at each chunk boundary",
    "kv_wrap": "every attention layer's KV cache holds SIZE cells and a position past them overwrites the oldest (a cache index that wraps)",
}

# Faults of a request's state, applied by the runner as it feeds tokens, not by a view of the file.
STATE_FAULTS = {"state_reset", "kv_wrap"}


def parse(text, source=ENV):
    """`name:size,name:size` -> {name: size}; bad input names the variable, the item and the fix."""
    faults = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, size = item.partition(":")
        if name not in SIZED_FAULTS:
            raise GgufError(f"{source}: {name!r} is not a sized fault; use one of {', '.join(SIZED_FAULTS)} as NAME:SIZE")
        try:
            faults[name] = float(size)
        except ValueError:
            raise GgufError(f"{source}: {item!r} needs a number after the colon, e.g. {name}:1.001") from None
    return faults


def describe(faults):
    return ", ".join(f"{name}:{size:g}" for name, size in faults.items())


class FaultedGgufFile(GgufFile):
    """The file as a faulted forward reads it; `touched` records which faults changed something."""

    def __init__(self, path, faults):
        super().__init__(path)
        self.faults = faults
        self.touched = set()

    def key(self, name, default=REQUIRED):
        value = super().key(name, default)
        if "rope_base" in self.faults and name.startswith("rope.freq_base"):
            self.touched.add("rope_base")
            return value * self.faults["rope_base"]
        if "norm_eps" in self.faults and name == "attention.layer_norm_rms_epsilon":
            self.touched.add("norm_eps")
            return value * self.faults["norm_eps"]
        if "window" in self.faults and name == "attention.sliding_window":
            self.touched.add("window")
            return value + int(self.faults["window"])
        return value

    def tensor(self, name):
        values = super().tensor(name)
        if name.rsplit(".", 1)[-1] == "ssm_a" and "ssm_decay" in self.faults:
            self.touched.add("ssm_decay")
            values = values * self.faults["ssm_decay"]
        if name.endswith("ssm_conv1d.weight") and "conv_taps" in self.faults:
            # (channels, taps), the newest tap last (ops.causal_conv_step).
            self.touched.add("conv_taps")
            values = values.copy()
            values[:, :-1] *= self.faults["conv_taps"]
        if name.endswith("ffn_gate_inp.weight") and "router_temp" in self.faults:
            self.touched.add("router_temp")
            values = values / self.faults["router_temp"]
        if "weights_noise" in self.faults and values.ndim >= 2 and name.endswith(".weight"):
            self.touched.add("weights_noise")
            rng = np.random.default_rng(zlib.crc32(name.encode()))
            rms = np.sqrt(np.mean(values * values))
            values = values + rng.standard_normal(values.shape) * (self.faults["weights_noise"] * rms)
        return values

    def check_touched(self, state):
        """Fail closed: a fault the family never read would pass for a caught-nothing clean run. `state`
        is a fresh request state of the family: what the state faults would change."""
        if "state_reset" in self.faults and getattr(state, "ssm", None):
            self.touched.add("state_reset")
        if "kv_wrap" in self.faults and kv_caches(state):
            self.touched.add("kv_wrap")
        untouched = [name for name in self.faults if name not in self.touched]
        if untouched:
            raise GgufError(f"{ENV}: {untouched[0]} does not apply to {self.architecture} ({self.path} has nothing it changes); remove it for this model")


def kv_caches(state):
    """Every attention layer's cache of a request state (a list for all-attention families, a dict by layer for the hybrids)."""
    kv = getattr(state, "kv", None)
    return list(kv.values()) if isinstance(kv, dict) else list(kv or [])


def apply_state_faults(faults, state):
    """What the state faults do to a request's state once a token was fed (`state.pos` tokens so far)."""
    every = int(faults.get("state_reset", 0))
    if every > 0 and state.pos % every == 0:
        for memory in (state.conv, state.ssm):
            for il in memory:
                memory[il] = np.zeros_like(memory[il])
    cells = int(faults.get("kv_wrap", 0))
    if cells > 0:
        for cache in kv_caches(state):
            if cache.rows > cells:
                cache.drop_oldest(cache.rows - cells)
