#!/usr/bin/env bash
# Builds llama.cpp's own `llama-server`, `llama-perplexity` and `llama-tokenize` from the exact
# source node-llama-cpp ships (the same llama.cpp our oracle runs), CPU only, into a per-user cache outside the clone, keyed by the
# bundle's sha256 so a machine builds each llama.cpp release once.
#
#   scripts/build-llama-server.sh            build if missing, print the binary's path
#   scripts/build-llama-server.sh --path     print where the binary is/would be; never build
#
# Cache root: $BENCH_BUILD_CACHE_DIR, else $XDG_CACHE_HOME/bringup-bench, else ~/.cache/bringup-bench.
# Needs git, cmake (>= 3.14), make/g++; no network. Two builds racing for the same key are
# serialised with flock; the result is moved into place only once complete.
set -euo pipefail
repo_root="$(cd "$(dirname "$0")/.." && pwd)"
bundle="$repo_root/node_modules/node-llama-cpp/llama/gitRelease.bundle"
if [ ! -f "$bundle" ]; then
  echo "build-llama-server: $bundle not found — run \`npm install\` first (node-llama-cpp ships the llama.cpp source)" >&2
  exit 2
fi
cache_root="${BENCH_BUILD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/bringup-bench}"
key="$(sha256sum "$bundle" | cut -c1-16)"
dest="$cache_root/llama-server/$key"
binary="$dest/bin/llama-server"
# One build makes every llama.cpp tool a suite compares against; a cache entry lacking one of them
# (made before it was added) is rebuilt.
tools=(llama-server llama-perplexity llama-tokenize)
complete() { local t; for t in "${tools[@]}"; do [ -x "$dest/bin/$t" ] || return 1; done; }
if [ "${1:-}" = "--path" ]; then
  echo "$binary"
  exit 0
fi
if complete; then
  echo "$binary"
  exit 0
fi
for tool in git cmake make g++; do
  command -v "$tool" >/dev/null || { echo "build-llama-server: \`$tool\` is missing — install it (Debian: apt-get install $tool)" >&2; exit 2; }
done
mkdir -p "$cache_root/llama-server"
exec 9>"$cache_root/llama-server/$key.lock"
flock 9
if complete; then
  echo "$binary"
  exit 0
fi
work="$(mktemp -d "$cache_root/llama-server/build-$key.XXXXXX")"
trap 'rm -rf "$work"' EXIT
started=$(date +%s)
jobs="${BENCH_BUILD_JOBS:-$(nproc)}"
echo "build-llama-server: building ${tools[*]} from $bundle with $jobs jobs (a few minutes; once per machine)" >&2
# advice.detachedHead: the bundle's HEAD is a tag, and git's advice about it is noise in CI logs.
git -c advice.detachedHead=false clone --quiet "$bundle" "$work/src"
# GGML_NATIVE: the oracle's prebuilt picks the best CPU variant of this machine at run time; a
# native build compiles for the same instruction set. No curl, tests or examples: offline, and
# only the tools above are built.
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DBUILD_SHARED_LIBS=OFF >"$work/cmake.log" 2>&1 || { tail -30 "$work/cmake.log" >&2; exit 2; }
cmake --build "$work/build" --target "${tools[@]}" -j "$jobs" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; exit 2; }
mkdir -p "$work/out/bin"
for t in "${tools[@]}"; do cp "$work/build/bin/$t" "$work/out/bin/"; done
(cd "$work/src" && git rev-parse HEAD) >"$work/out/source-commit"
echo "$(( $(date +%s) - started ))" >"$work/out/build-seconds"
rm -rf "$dest"
mv "$work/out" "$dest"
echo "build-llama-server: built in $(cat "$dest/build-seconds") s -> $binary" >&2
echo "$binary"
