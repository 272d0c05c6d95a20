"""FAKE runners for the runner-protocol tests: each mode breaks the protocol, or answers part of it,
in a way a real runner does not on demand. `partial` wraps the real reference forward, keeps only
tokenize and greedy, and reports a made-up trace-region demand (no CPU engine captures a graph).
`hang` tokenizes, then never answers greedy and ignores SIGTERM (a wedged device call): only SIGKILL
ends it. With FAKE_RUNNER_PID_FILE set it writes its pid there when it starts to hang.
The evidence modes tokenize, then print on stderr in greedy what a tt-metal device prints when it
fails that way (the line formats of tt-metal's allocator, mesh trace and TT_FATAL; numbers made up),
and die as such a process does:

  oom                  DRAM out of memory (critical log line, then the TT_FATAL it raises); exits 1
  trace-overflow       trace buffers larger than the trace region (TT_FATAL @ mesh_trace.cpp); exits 1
  abort                a C assert() in an op, then SIGABRT
  team-oom             a team's own wording ("failing allocation ... free-at-failure ..."); exits 1

The answer-fault modes wrap the whole reference forward and spoil one kind of answer:

  short-answers        greedy returns the first half of each continuation (8 of 16 ids)
  empty-sequence       greedy returns an empty list for the first prompt of each batch
  zero-logprobs        teacher forcing returns log-prob 0 for every top-k entry
  nan-logprobs         teacher forcing returns NaN as the top log-prob of the first row
  short-rows           teacher forcing returns the first half of each continuation's rows
  rotated-logprobs     teacher forcing keeps each row's ids and log-probs well formed (finite, sorted, summing
                       to at most 1) but shifts the log-probs one id along: a distribution of the right shape
                       that belongs to other tokens, which only the numbers can catch
  hang-in-teacher-forcing  teacher forcing never answers (a wedged device call); greedy is answered
  dies-in-teacher-forcing  the process exits in the middle of teacher forcing, as a crashed device runner does
  bad-trace-demand     trace_demand answers region_semantics "bogus"
  trace-demand-error   trace_demand answers with an error
  trace-over-region    trace_demand reports a capture needing 80 MB of a fixed 64 MiB region
  allocations-over     answers correctly, and allocations reports made-up bytes on one device "tt0" for 1 slot of
                       64 tokens: its weights at the F32 file's size, a KV cache of 1 GiB, no activations
  bad-allocations      answers correctly, and allocations names a group the memory gate does not know ("kv")
  allocations-twin     answers correctly, and allocations reports the weights with a bf16 twin of each (1.5x the file)
  allocations-transient-held  answers correctly, and allocations reports a 1 GiB decode transient held steady
  anonymous            answers correctly, but its hello does not say which model file it loaded
  error-on-prompt:N    greedy raises for the prompt whose ids are parity16's prompt N
  hang-on-prompt:N     greedy never answers a batch holding parity16's prompt N (a device call wedged by one
                       input); every other request is answered. With FAKE_RUNNER_PID_FILE set it appends its
                       pid there, one line per runner started
  unknown-mode         a hello declaring a decode mode the protocol does not know ("graph")
  first-kernel-methods a runner written for the first kernel suites: its hello offers dequantize and matvec, not kernel

Usage: python3 fake_runner.py MODE MODEL.gguf
"""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "runners"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "harness", "oracle", "float64"))
from bench_runner import send, serve  # noqa: E402

mode, model_path = sys.argv[1], sys.argv[2]

if mode == "dies-at-boot":
    print("device 3 did not answer: check the board", file=sys.stderr)
    sys.exit(3)
if mode == "logs-on-stdout":
    print("loading weights ...")
    sys.exit(0)
if mode == "unknown-mode":
    send({"protocol": "bringup-bench-runner", "version": 1, "capabilities": ["greedy"], "modes": ["eager", "graph"]})
    sys.stdin.read()
    sys.exit(0)
if mode == "first-kernel-methods":
    send({"protocol": "bringup-bench-runner", "version": 1, "engine": "kernels of the first suites", "capabilities": ["dequantize", "matvec"]})
    for line in sys.stdin:
        request = json.loads(line)
        send({"id": request["id"], "result": {}} if request["method"] == "shutdown" else {"id": request["id"], "error": {"message": "unknown method"}})
        if request["method"] == "shutdown":
            break
    sys.exit(0)
if mode == "version-2":
    send({"protocol": "bringup-bench-runner", "version": 2, "capabilities": []})
    sys.stdin.read()
    sys.exit(0)

from reference.gguf import GgufFile  # noqa: E402
from reference.llama import Llama  # noqa: E402
from reference.runner import ReferenceRunner  # noqa: E402

if os.environ.get("FAKE_RUNNER_PID_FILE") and mode.startswith("hang-on-prompt:"):
    with open(os.environ["FAKE_RUNNER_PID_FILE"], "a") as pids:
        pids.write(f"{os.getpid()}\n")

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


class HangsInGreedy:
    tokenize = staticmethod(reference.tokenize)

    @staticmethod
    def greedy(params):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pid_file = os.environ.get("FAKE_RUNNER_PID_FILE")
        if pid_file:
            with open(pid_file, "w") as f:
                f.write(str(os.getpid()))
        print("waiting for the device", file=sys.stderr, flush=True)
        while True:
            time.sleep(3600)


class Faulty:
    """The reference forward with one kind of answer spoiled (the mode)."""
    tokenize = staticmethod(reference.tokenize)
    detokenize = staticmethod(reference.detokenize)
    batched_greedy = staticmethod(reference.batched_greedy)

    @staticmethod
    def greedy(params):
        requests = params["requests"]
        if mode.startswith(("error-on-prompt:", "hang-on-prompt:")):
            with open(os.path.join(os.path.dirname(__file__), "..", "..", "suites", "parity16.json")) as suite:
                text = json.load(suite)["prompts"][int(mode.split(":")[1])]
            poisoned = reference.tokenize({"texts": [text]})["ids"][0]
            if any(r["prompt_ids"] == poisoned for r in requests):
                if mode.startswith("hang-on-prompt:"):
                    print("waiting for the device", file=sys.stderr, flush=True)
                    while True:
                        time.sleep(3600)
                raise RuntimeError("kernel launch failed on this prompt")
        ids = reference.greedy(params)["ids"]
        if mode == "short-answers":
            ids = [row[: len(row) // 2] for row in ids]
        if mode == "empty-sequence":
            ids[0] = []
        return {"ids": ids}

    @staticmethod
    def teacher_forced_top_k(params):
        if mode == "hang-in-teacher-forcing":
            print("waiting for the device", file=sys.stderr, flush=True)
            while True:
                time.sleep(3600)
        if mode == "dies-in-teacher-forcing":
            print("fabric timeout on chip 2", file=sys.stderr, flush=True)
            os._exit(5)
        rows = reference.teacher_forced_top_k(params)["top_k"]
        if mode == "zero-logprobs":
            rows = [[{"ids": row["ids"], "logprobs": [0.0] * len(row["ids"])} for row in prompt] for prompt in rows]
        if mode == "nan-logprobs":
            rows[0][0]["logprobs"][0] = float("nan")
        if mode == "short-rows":
            rows = [prompt[: len(prompt) // 2] for prompt in rows]
        if mode == "rotated-logprobs":
            rows = [[{"ids": row["ids"][1:] + row["ids"][:1], "logprobs": row["logprobs"]} for row in prompt] for prompt in rows]
        return {"top_k": rows}

    @staticmethod
    def trace_demand(params):
        if mode == "trace-demand-error":
            raise RuntimeError("the profiler is not attached")
        semantics = "bogus" if mode == "bad-trace-demand" else "fixed-per-bank"
        if mode == "trace-over-region":
            return {"captures": [{"capture": "decode", "demand_bytes": 80000000, "region_bytes": 67108864, "region_semantics": "fixed-total"}]}
        return {"captures": [{"capture": "decode", "demand_bytes": 7340032, "region_bytes": 16777216, "region_semantics": semantics}]}


class Allocating(Faulty):
    """The whole reference forward, and a FAKE allocations report (a CPU numpy forward allocates nothing a device would)."""

    @staticmethod
    def allocations(params):
        weights = os.path.getsize(model_path)
        if mode == "allocations-twin":
            # The F32 file's weights and a bf16 twin of each (half their bytes again) that the policy keeps packed.
            held = {"weights": weights + weights // 2}
            return {"devices": [{"device": "tt0", "steady": held, "peak": held}], "shape": {"context_size": 64, "slots": 1, "batch_size": 32}}
        if mode == "allocations-transient-held":
            # A 1 GiB decode transient still held between requests: steady activations, not only peak.
            held = {"weights": weights, "activations": 1 << 30}
            return {"devices": [{"device": "tt0", "steady": held, "peak": held}], "shape": {"context_size": 64, "slots": 1, "batch_size": 32}}
        kv = "kv" if mode == "bad-allocations" else "kv_cache"
        held = {"weights": weights, kv: 1 << 30}
        return {"devices": [{"device": "tt0", "steady": held, "peak": held}], "shape": {"context_size": 64, "slots": 1, "batch_size": 32}}


EVIDENCE = {
    "oom": [
        "2026-11-30 14:02:11.482 | critical |          Always | TT_FATAL: Out of Memory: Not enough space to allocate 1073725440 B DRAM buffer across 12 banks, "
        "where each bank needs to store 89477120 B, but bank size is 1071821792 B (allocated: 1059129440 B, free: 12692352 B, largest free block: 6266880 B) (assert.hpp:104)",
        "Traceback (most recent call last):",
        '  File "models/tt_transformers/tt/mlp.py", line 135, in forward',
        "RuntimeError: TT_FATAL @ /project/tt_metal/impl/allocator/bank_manager.cpp:462: false",
        "info:",
        "Out of Memory: Not enough space to allocate 1073725440 B DRAM buffer across 12 banks, where each bank needs to store 89477120 B, "
        "but bank size is 1071821792 B (allocated: 1059129440 B, free: 12692352 B, largest free block: 6266880 B)",
        "backtrace:",
        " --- tt::tt_metal::BankManager::allocate_buffer(unsigned long, unsigned long, bool)",
    ],
    "trace-overflow": [
        "RuntimeError: TT_FATAL @ /project/tt_metal/distributed/mesh_trace.cpp:78: mesh_cq.device()->get_trace_buffers_size() <= trace_region_size",
        "info:",
        "Creating trace buffers of size 425754624B on MeshDevice 0, but only 52428800B is allocated for trace region.",
        "backtrace:",
        " --- tt::tt_metal::distributed::MeshTrace::populate_mesh_buffer(tt::tt_metal::distributed::MeshCommandQueue&)",
    ],
    "abort": [
        "python3: ../ttnn/cpp/ttnn/operations/matmul/matmul.cpp:1187: void ttnn::operations::matmul::validate(): Assertion `a.padded_shape()[-1] == b.padded_shape()[-2]' failed.",
    ],
    "team-oom": [
        "decode step 3: failing allocation 1,073,725,440 B (free-at-failure 12.7 MB/bank)",
    ],
}


class PrintsEvidence:
    """Tokenizes, then fails greedy as a device does: the mode's stderr lines, then its way of dying."""
    tokenize = staticmethod(reference.tokenize)

    @staticmethod
    def greedy(params):
        for line in EVIDENCE[mode]:
            print(line, file=sys.stderr)
        sys.stderr.flush()
        if mode == "abort":
            os.abort()
        os._exit(1)


modes = {"partial": Partial, "dies-in-greedy": DiesInGreedy, "hang": HangsInGreedy, "allocations-over": Allocating, "bad-allocations": Allocating, "allocations-twin": Allocating, "allocations-transient-held": Allocating, **{name: PrintsEvidence for name in EVIDENCE}}
# They answer from the reference forward on MODEL, so they report its file: a FAKE of the answers, not of the artifact.
serve(modes.get(mode, Faulty), f"fake runner ({mode})", model_path=None if mode == "anonymous" else model_path)
