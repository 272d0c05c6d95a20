#!/usr/bin/env bash
# Run inside a bundle from prepare-hf-oracle-check.sh on a machine with torch and transformers:
#   bash hf-oracle-check.sh OUT_DIR [--prompts 4,5]
# Prints the versions, then checks every family in families/ at once (3 CPU threads each: the
# fixtures are tiny and hf_oracle.py runs on the CPU). Session files and the summary go to OUT_DIR.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"; shift
mkdir -p "$out"
python3 -c 'import sys, platform; print("python", platform.python_version())'
python3 -c 'import torch; print("torch", torch.__version__)' 2>&1
python3 -c 'import transformers; print("transformers", transformers.__version__)' 2>&1
command -v node >/dev/null && echo "node $(node --version)" || echo "node: not installed"
export OMP_NUM_THREADS=3 PYTHONUNBUFFERED=1
python3 "$here/hf_oracle_check.py" --runners "$here/runners" --suite "$here/parity16.json" --out "$out" "$@" "$here"/families/*
