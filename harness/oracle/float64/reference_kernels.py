"""Kernels served over the runner protocol: how a bring-up's Python kernels (ttnn, say) plug into
the kernel suites without a C plugin. The `kernel` method gets the op's name, its encoding, its
attributes and tensor descriptors ({name, dtype, shape, data: base64 little-endian}), the same ones
a C plugin gets (docs/kernel-ops.md), and answers each output's bytes. These references compute in
float64 with numpy and store float32: a few ops, enough to show the shape of such a runner.

Usage: a kernel suite arm {"label": "python kernels", "runner": ["python3", "{bench}/harness/oracle/float64/reference_kernels.py"], "gate": "required"}
"""
import base64
import os
import sys
import time

import numpy as np

# bench_runner (scripts/runners/) is the runner protocol as every Python runner speaks it, this oracle too.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts", "runners"))

from bench_runner import Unsupported, serve  # noqa: E402 (after the path above)
from reference.ops import rms_norm

NUMPY = {"F32": "<f4", "F16": "<f2", "I32": "<i4"}


def tensor(t):
    """A descriptor's values as a numpy array of its shape (F32, F16, BF16, I32 and Q8_0 blocks)."""
    raw = base64.b64decode(t["data"])
    if t["dtype"] in NUMPY:
        return np.frombuffer(raw, NUMPY[t["dtype"]]).reshape(t["shape"]).astype(np.float64 if t["dtype"] != "I32" else np.int64)
    if t["dtype"] == "BF16":
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view("<f4").reshape(t["shape"]).astype(np.float64)
    if t["dtype"] == "Q8_0":
        blocks = np.frombuffer(raw, np.uint8).reshape(-1, 34)
        d = blocks[:, :2].copy().view("<f2").astype(np.float32)
        q = blocks[:, 2:].view(np.int8).astype(np.float32)
        # One float32 product per value, as ggml's dequantize_row_q8_0 does.
        return (d * q).reshape(t["shape"]).astype(np.float64)
    raise ValueError(f"this runner cannot read {t['dtype']} tensors")


def softmax(x, scale):
    e = np.exp(np.float32(scale) * x - np.max(np.float32(scale) * x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


OPS = {
    ("dequantize", "Q8_0:F32"): lambda i, a: [i["x"]],
    ("matvec", "F32:F32"): lambda i, a: [i["w"] @ i["x"]],
    ("matvec", "Q8_0:F32"): lambda i, a: [i["w"] @ i["x"]],
    ("embedding_gather", "F32:F32"): lambda i, a: [i["table"][i["ids"]]],
    ("embedding_gather", "F16:F32"): lambda i, a: [i["table"][i["ids"]]],
    ("embedding_gather", "BF16:F32"): lambda i, a: [i["table"][i["ids"]]],
    ("rms_norm", "F32:F32"): lambda i, a: [rms_norm(i["x"], i["w"], np.float32(a["eps"]))],
    ("silu_mul", "F32:F32"): lambda i, a: [i["gate"] / (1 + np.exp(-i["gate"])) * i["up"]],
    ("softmax", "F32:F32"): lambda i, a: [softmax(i["x"], a["scale"])],
}


def run(params):
    compute = OPS.get((params["op"], params["encoding"]))
    if compute is None:
        raise Unsupported(f"this runner does not register {params['op']} {params['encoding']}")
    outputs = compute({t["name"]: tensor(t) for t in params["inputs"]}, params["attrs"])
    return {"outputs": [{"name": o["name"], "data": base64.b64encode(np.asarray(y, np.float32).tobytes()).decode()} for o, y in zip(params["outputs"], outputs)]}


class Kernels:
    @staticmethod
    def kernel(params):
        return run(params)

    @staticmethod
    def kernel_time(params):
        """Per-call nanoseconds of the whole method (decode, compute, encode), batches of about 1 ms."""
        plan = params["timing"]
        start = time.perf_counter_ns()
        warmups = 0
        while warmups == 0 or time.perf_counter_ns() - start < plan["warmup_ms"] * 1e6:
            run(params)
            warmups += 1
        batch = max(1, round(1e6 / ((time.perf_counter_ns() - start) / warmups)))
        samples = []
        start = time.perf_counter_ns()
        while len(samples) < max(1, plan["max_samples"]) and (len(samples) < plan["min_samples"] or time.perf_counter_ns() - start < plan["min_time_ms"] * 1e6):
            before = time.perf_counter_ns()
            for _ in range(batch):
                run(params)
            samples.append((time.perf_counter_ns() - before) / batch)
        return {"host_ns": base64.b64encode(np.asarray(samples, "<f8").tobytes()).decode(), "calls_per_sample": batch}


if __name__ == "__main__":
    serve(Kernels, "reference_kernels.py (numpy float64, float32 outputs)", kernel_ops=[{"op": op, "encoding": encoding} for op, encoding in OPS])
