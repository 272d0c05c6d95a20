"""Kernels served over the runner protocol: how a bring-up's Python kernels (ttnn, say) plug into
the kernel suites without a C plugin. These are plain-Python references for F32 and Q8_0 blocks:
decodes rounded to float32 as ggml does, matvec accumulated in float64.

Usage: a kernel suite arm {"label": "python kernels", "runner": ["python3", "{bench}/scripts/runners/reference_kernels.py"], "gate": "required"}
"""
import base64
import struct
from array import array

from bench_runner import Unsupported, serve


def f16_to_f32(bits):
    return struct.unpack("<e", struct.pack("<H", bits))[0]


def decode(kind, raw, values):
    out = array("f")
    if kind == "F32":
        out.frombytes(raw[:4 * values])
    elif kind == "Q8_0":
        for block in range(values // 32):
            at = block * 34
            d = f16_to_f32(raw[at] | raw[at + 1] << 8)
            # One float32 multiply, as ggml does: exact in float64, then rounded once by the array.
            out.extend(d * q for q in struct.unpack_from("<32b", raw, at + 2))
    else:
        raise Unsupported(f"this runner has no {kind} kernel")
    return out


class Kernels:
    @staticmethod
    def dequantize(params):
        out = decode(params["type"], base64.b64decode(params["blocks"]), params["values"])
        return {"values": base64.b64encode(out.tobytes()).decode()}

    @staticmethod
    def matvec(params):
        rows, cols = params["rows"], params["cols"]
        w = decode(params["type"], base64.b64decode(params["weights"]), rows * cols)
        x = array("f")
        x.frombytes(base64.b64decode(params["x"]))
        y = array("f", (sum(w[r * cols + i] * x[i] for i in range(cols)) for r in range(rows)))
        return {"y": base64.b64encode(y.tobytes()).decode()}


if __name__ == "__main__":
    serve(Kernels, "reference_kernels.py (plain Python: F32, Q8_0)")
