"""The bringup-bench runner protocol, version 1: a system under test as a command that speaks JSON
lines over stdio (docs/runner-protocol.md). Copy this file next to your forward pass and hand
`serve` an object with the methods you have; the harness skips the checks whose methods are missing.

  hello     runner -> harness  {"protocol": "bringup-bench-runner", "version": 1, "engine": ..., "capabilities": [...],
                               "model_sha256": ..., "model_file": ...}  (the model file it loaded; optional, else "unverified")
            or, when it cannot start, {"protocol": "bringup-bench-runner", "version": 1, "error": "..."}
  request   harness -> runner  {"id": 7, "method": "greedy", "params": {...}}
  response  runner -> harness  {"id": 7, "result": {...}}  or  {"id": 7, "error": {"message": ...}}

A model with a `modes` list (["eager", "traced"]) declares it in the hello; the harness then asks for
`greedy` with `"mode": "traced"` too, and holds the traced ids to the eager ones (capture_parity).

stdout carries protocol lines only: print logs to stderr. Raise `Unsupported` when the runner has no
implementation for what was asked (a kernel for that encoding or shape): the harness skips that one case.
"""
import hashlib
import json
import os
import sys
import traceback

PROTOCOL = "bringup-bench-runner"
VERSION = 1


class Unsupported(Exception):
    """This runner has no implementation for the request (e.g. a kernel pair it does not register)."""


METHODS = ("tokenize", "detokenize", "inspect_tokens", "greedy", "batched_greedy", "teacher_forced_top_k", "trace_demand", "allocations", "kernel", "kernel_time")


def serve(model, engine, settings=None, kernel_ops=None, model_path=None):
    """Answers requests until `shutdown` or the end of stdin. `model` has any of METHODS, each taking the params dict.
    A model with `kernel` lists the (op, encoding) pairs it answers in `kernel_ops`: [{"op": ..., "encoding": ...}].
    `model_path`: the model file the forward pass loaded; its sha256 goes into the hello, so the harness can check
    that this is the artifact the goldens were made from (without it the arm's identity is "unverified")."""
    capabilities = [m for m in METHODS if callable(getattr(model, m, None))]
    if getattr(model, "tokenize_special", False) is True:
        capabilities.append("tokenize_special")  # tokenize takes add_special / parse_special, detokenize render_special
    hello = {"protocol": PROTOCOL, "version": VERSION, "engine": engine, "capabilities": capabilities, "settings": settings or {}}
    if model_path is not None:
        hello["model_sha256"] = file_sha256(model_path)
        hello["model_file"] = os.path.basename(model_path)
    if "kernel" in capabilities:
        hello["kernel_ops"] = kernel_ops or []
    if getattr(model, "modes", None):
        hello["modes"] = list(model.modes)
    send(hello)
    for method, request_id, params in requests():
        if method not in capabilities:
            send({"id": request_id, "error": {"message": f"unknown method {method!r}"}})
            continue
        try:
            send({"id": request_id, "result": getattr(model, method)(params)})
        except Unsupported as error:
            send({"id": request_id, "error": {"message": str(error), "unsupported": True}})
        except Exception as error:  # the harness records the failure; the runner keeps serving
            traceback.print_exc(file=sys.stderr)
            send({"id": request_id, "error": {"message": f"{type(error).__name__}: {error}"}})


def requests():
    """(method, id, params) of each request on stdin; a shutdown is answered here and ends them."""
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        method, request_id = request.get("method"), request.get("id")
        if method == "shutdown":
            send({"id": request_id, "result": {}})
            return
        yield method, request_id, request.get("params", {})


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def refuse(reason):
    """The hello of a runner that cannot start (no device, a model it cannot run): the harness stops with `reason`."""
    send({"protocol": PROTOCOL, "version": VERSION, "error": reason})


def send(message):
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()
