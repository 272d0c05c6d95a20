"""A second, independent forward pass for the harness's F32 fixtures of every family (llama, qwen35,
qwen35moe, gemma4, nemotron_h_moe), in numpy float64, served over the runner protocol: what a
bring-up's own forward looks like to the harness.
`bench run --runner "python3 {bench}/harness/oracle/float64/reference_forward.py {model}"` holds it to the
llama.cpp goldens. One token at a time: meant for a few short prompts, not long context.

Usage: python3 reference_forward.py MODEL.gguf [--fault NAME]... [--gelu exact|ggml-fp16-table] [--trace-region BYTES]
  --fault NAME   plant a FAULT (tests show the harness catches it); see reference/runner.py FAULTS
  Every family's decode step is written as operations, so each also runs traced: greedy with
  "mode": "traced" captures the step and replays it (reference/trace.py), and trace_demand reports its buffers.
  --trace-region BYTES  the fixed trace region the captured decode must fit, as a device states one
                 (trace_demand reports it as fixed-total; without it the region is dynamic)
  BENCH_REFERENCE_FAULT=NAME:SIZE,...  plant sized FAULTs behind identity (reference/sized_faults.py)
  --gelu         ggml-fp16-table reproduces llama.cpp's CPU GELU lookup table instead of the exact tanh GELU
"""
import argparse
import os
import sys

# bench_runner (scripts/runners/) is the runner protocol as every Python runner speaks it, this oracle too.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "scripts", "runners"))

from bench_runner import refuse, serve  # noqa: E402 (after the path above)
from reference import gemma4, llama, nemotron_h, qwen35
from reference.gguf import GgufError, GgufFile
from reference.runner import FAULTS, TRACE_FAULTS, ReferenceRunner
from reference.sized_faults import ENV, FaultedGgufFile, describe, parse

# Each family module has faults_for(architecture) (the FAULTs it can carry) and Family (its forward pass).
FAMILIES = {"llama": llama, "qwen35": qwen35, "qwen35moe": qwen35, "gemma4": gemma4, "nemotron_h_moe": nemotron_h}


def main(argv):
    parser = argparse.ArgumentParser(prog="reference_forward.py", description="float64 reference forward over the runner protocol")
    parser.add_argument("model")
    parser.add_argument("--fault", action="append", default=[], choices=sorted(FAULTS))
    parser.add_argument("--gelu", choices=["exact", "ggml-fp16-table"], default="exact")
    parser.add_argument("--trace-region", type=region_bytes, metavar="BYTES")
    args = parser.parse_args(argv)
    try:
        sized = parse(os.environ.get(ENV, ""))
        gguf = FaultedGgufFile(args.model, sized) if sized else GgufFile(args.model)
        arch = gguf.architecture
        if arch not in FAMILIES:
            raise GgufError(f"{args.model}: architecture {arch!r}; the reference runs {', '.join(FAMILIES)}")
        family_module = FAMILIES[arch]
        allowed = family_module.faults_for(arch) | (TRACE_FAULTS if callable(getattr(family_module.Family, "forward", None)) else set())
        unknown = [f for f in args.fault if f not in allowed]
        if unknown:
            raise GgufError(f"--fault {unknown[0]}: does not apply to {arch} (it takes: {', '.join(sorted(allowed)) or 'none'})")
        family = family_module.Family(gguf, set(args.fault), {"gelu": args.gelu})
        if sized:
            gguf.check_touched(family.new_state(None))
    except (GgufError, OSError) as error:
        refuse(str(error))
        return
    for fault in args.fault:
        print(FAULTS[fault], file=sys.stderr)
    if sized:
        print(f"FAULT {ENV}={describe(sized)}: the file is read as it is, the forward computes with these quantities wrong", file=sys.stderr)
    engine = f"reference_forward.py (numpy float64, {arch})" + "".join(f" FAULT {f}" for f in args.fault) + (f" FAULT {describe(sized)}" if sized else "")
    settings = {"precision": "float64", "architecture": arch, "faults": args.fault + [f"{name}:{size:g}" for name, size in sized.items()]}
    if arch == "gemma4":
        settings["gelu"] = args.gelu
    if args.trace_region is not None:
        settings["trace_region_bytes"] = args.trace_region
    serve(ReferenceRunner(gguf, family, args.fault, sized, args.trace_region), engine, settings, model_path=args.model)


def region_bytes(text):
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size in bytes; give a whole number above 0, e.g. 262144")
    return int(text)


if __name__ == "__main__":
    main(sys.argv[1:])
