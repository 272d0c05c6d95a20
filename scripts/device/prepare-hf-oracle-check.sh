#!/usr/bin/env bash
# Builds the folder scripts/device/hf-oracle-check.sh runs on a machine with transformers but no Node:
# per fixture its transformers export, a vocabulary-only copy of its GGUF (the header and metadata:
# hf_oracle.py tokenizes from them and reads no tensor), and its committed goldens; plus the runners
# (with the float64 reference package hf_oracle.py reads GGUF with)
# and the suite's prompts. Float32 weights do not compress: keep a bundle under the device's 64 MiB.
#   scripts/device/prepare-hf-oracle-check.sh BUNDLE_DIR FIXTURE...
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bundle="$1"; shift
rm -rf "$bundle" && mkdir -p "$bundle"
cp -r "$root/scripts/runners" "$bundle/runners"
cp -r "$root/harness/oracle/float64/reference" "$bundle/runners/reference"
cp "$root/scripts/device/hf_oracle_check.py" "$root/scripts/device/hf-oracle-check.sh" "$root/suites/parity16.json" "$bundle/"
for fixture in "$@"; do
  node "$root/bin/bench.js" fixtures export-hf "$fixture" "$bundle/families/$fixture/hf"
  goldens=$(ls -d "$root"/goldens/"$fixture".F32/*/ | head -1)
  cp -r "$goldens" "$bundle/families/$fixture/goldens"
  gguf=$(node --input-type=module -e "import { ensureFixture } from '$root/dist/harness/fixtures/registry.js'; console.log(await ensureFixture('$fixture', 'F32'))")
  PYTHONPATH="$root/harness/oracle/float64" python3 - "$gguf" "$bundle/families/$fixture/model.gguf" <<'PY'
import sys
from reference.gguf import GgufFile
source = GgufFile(sys.argv[1])
open(sys.argv[2], "wb").write(source.data[:source.start])
PY
done
du -sh "$bundle"
