"""FAKE runners for the runner-protocol tests: each mode breaks the protocol, or answers part of it,
in a way a real runner does not on demand. `partial` wraps the real reference forward, keeps only
tokenize and greedy, and reports a made-up trace-region demand (no CPU engine captures a graph).

Usage: python3 fake_runner.py MODE MODEL.gguf
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "runners"))
from bench_runner import send, serve  # noqa: E402

mode, model_path = sys.argv[1], sys.argv[2]

if mode == "dies-at-boot":
    print("device 3 did not answer: check the board", file=sys.stderr)
    sys.exit(3)
if mode == "logs-on-stdout":
    print("loading weights ...")
    sys.exit(0)
if mode == "version-2":
    send({"protocol": "bringup-bench-runner", "version": 2, "capabilities": []})
    sys.stdin.read()
    sys.exit(0)

from reference.gguf import GgufFile  # noqa: E402
from reference.llama import Llama  # noqa: E402
from reference.runner import ReferenceRunner  # noqa: E402

gguf = GgufFile(model_path)
reference = ReferenceRunner(gguf, Llama(gguf, set(), {}), [])


class Partial:
    tokenize = staticmethod(reference.tokenize)
    greedy = staticmethod(reference.greedy)

    @staticmethod
    def trace_demand(params):
        return {"captures": [{"capture": "decode", "demand_bytes": 7340032, "region_bytes": 16777216, "region_semantics": "fixed-per-bank"}]}


class DiesInGreedy:
    tokenize = staticmethod(reference.tokenize)

    @staticmethod
    def greedy(params):
        print("fabric timeout on chip 2", file=sys.stderr)
        os._exit(5)


serve({"partial": Partial, "dies-in-greedy": DiesInGreedy}[mode], f"fake runner ({mode})")
