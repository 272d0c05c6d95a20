"""The runner protocol answered by Hugging Face transformers: a third oracle, independent of llama.cpp
and of the reference forward. Runs the checkpoint `bench fixtures export-hf` wrote, with
AutoModelForCausalLM, in float32 or float64; greedy and teacher-forced top-k come from the logits
(every step runs the whole sequence again: exact, and fast enough for tiny fixtures). Tokenization
is the GGUF's own character vocabulary (the same as the reference forward's).

Runs only where torch and transformers are installed; elsewhere it says so in its hello and the
harness stops with that line (exit 2).

  bench fixtures export-hf qwen35-tiny /tmp/qwen35-hf
  bench run --suite zoo --arm "qwen35 F32" \\
      --runner "python3 {bench}/scripts/runners/hf_oracle.py {model} /tmp/qwen35-hf --dtype float64"

Usage: python3 hf_oracle.py MODEL.gguf HF_DIR [--dtype float32|float64]
"""
import argparse
import json
import os
import sys

import numpy as np

# The float64 reference's GGUF reader and runner (harness/oracle/float64/reference/); appended, so a
# copy of the package beside this file (a device bundle, scripts/device/) comes first.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness", "oracle", "float64"))

from bench_runner import refuse, serve  # noqa: E402 (after the path above)
from reference.gguf import GgufError, GgufFile
from reference.runner import ReferenceRunner


class TransformersForward:
    """The family interface of reference/runner.py, computed by a transformers model."""

    def __init__(self, torch, model):
        self.torch, self.model = torch, model

    def logits(self, ids):
        torch = self.torch
        with torch.no_grad():
            out = self.model(torch.tensor([ids], dtype=torch.long)).logits[0]
        return np.asarray(out.to(torch.float64).cpu().numpy(), dtype=np.float64)

    def new_state(self, carried):
        return {"ids": []}

    def prefill(self, ids, state):
        state["ids"] = list(ids)
        return self.logits(state["ids"])[-1]

    def step(self, token, state):
        state["ids"].append(token)
        return self.logits(state["ids"])[-1]


def experts_option(hf_dir):
    """MoE checkpoints run their experts with transformers' "eager" loop: its default (grouped_mm) has no
    float64 kernel ("Expected mat_a to be Float32, BFloat16 or Float16 matrix, got Double", transformers 5.17)."""
    with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    return {"experts_implementation": "eager"} if any(key in config for key in ("num_experts", "n_routed_experts")) else {}


def loading_mismatch(loading):
    """The tensors from_pretrained could not place, from its loading info; '' when every one fits."""
    parts = []
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        names = sorted(str(name) for name in loading.get(kind) or [])
        if names:
            shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
            parts.append(f"{len(names)} {kind.replace('_', ' ')} ({shown})")
    return "; ".join(parts)


def main(argv):
    parser = argparse.ArgumentParser(prog="hf_oracle.py", description="transformers oracle over the runner protocol")
    parser.add_argument("model", help="the GGUF the checkpoint was exported from (its vocabulary tokenizes)")
    parser.add_argument("hf_dir", help="a directory written by `bench fixtures export-hf`")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    args = parser.parse_args(argv)
    try:
        gguf = GgufFile(args.model)
    except (GgufError, OSError) as error:
        refuse(str(error))
        return
    for name in ("config.json", "model.safetensors"):
        if not os.path.isfile(os.path.join(args.hf_dir, name)):
            refuse(f"{args.hf_dir}: no {name} (write the checkpoint with `bench fixtures export-hf MODEL {args.hf_dir}`)")
            return
    try:
        import torch
        import transformers
    except ImportError as error:
        refuse(f"hf_oracle.py needs torch and transformers, which are not installed here ({error}); install them (pip install torch transformers) on a machine that has them")
        return
    try:
        # `dtype` (transformers >= 4.56; `torch_dtype` before, deprecated since): the families exported need a newer one anyway.
        model, loading = transformers.AutoModelForCausalLM.from_pretrained(args.hf_dir, dtype=getattr(torch, args.dtype), output_loading_info=True, **experts_option(args.hf_dir))
    except Exception as error:  # transformers raises many kinds; the hello carries the reason
        refuse(f"{args.hf_dir}: transformers could not load the checkpoint: {type(error).__name__}: {error}")
        return
    # transformers only warns about tensors it did not place, and leaves their parameters random: fail closed instead.
    mismatch = loading_mismatch(loading)
    if mismatch:
        refuse(f"{args.hf_dir}: the checkpoint does not match {type(model).__name__}: {mismatch} (fix the names in harness/export-hf/families/)")
        return
    model.eval()
    engine = f"hf_oracle.py (transformers {transformers.__version__}, torch {torch.__version__}, {args.dtype})"
    settings = {"precision": args.dtype, "transformers": transformers.__version__, "architecture": gguf.architecture}
    serve(ReferenceRunner(gguf, TransformersForward(torch, model), []), engine, settings)


if __name__ == "__main__":
    main(sys.argv[1:])
