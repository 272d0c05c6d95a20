#!/usr/bin/env bash
# Where a server's time per token goes: `perf record` on the server process for 5 s while one
# closed-loop client streams greedy requests (32 prompt / 64 output tokens; bench load), then each
# thread's share of the samples and its top functions. A thread that is on a CPU all the time (a
# polling ggml worker) is a wall-clock timeline: its polling share is the time between graphs.
#
#   scripts/profile-server.sh ours|llama-server [threads=2]
#
# Needs `perf` (Debian: linux-perf); llama-server from scripts/build-llama-server.sh. Same settings as `npm run bench:server`.
set -euo pipefail
side=${1:?usage: scripts/profile-server.sh ours|llama-server [threads]}
threads=${2:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
model=$(node "$root/bin/bench.js" fixtures --only tiny-random | awk '$1 == "tiny-random:F32" { print $NF }')
[ -f "$model" ] || { echo "profile-server: could not build the fixture tiny-random:F32" >&2; exit 2; }
command -v perf >/dev/null || { echo "profile-server: perf is not installed (apt-get install linux-perf)" >&2; exit 2; }
port=$((18000 + RANDOM % 20000))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
case "$side" in
  ours) node "$root/bin/bench.js" serve --model "$model" --unvalidated --port "$port" --threads "$threads" --slots 4 --context-size 256 --kv-cache-type F16 >"$out/server.log" 2>&1 & ;;
  llama-server) "$("$root/scripts/build-llama-server.sh" --path)" -m "$model" --host 127.0.0.1 --port "$port" -np 4 -c 1024 -t "$threads" -tb "$threads" -fa off -b 512 -ctk f16 -ctv f16 --no-warmup >"$out/server.log" 2>&1 & ;;
  *) echo "profile-server: side is ours or llama-server" >&2; exit 2 ;;
esac
server=$!
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
node "$root/bin/bench.js" load --url "http://127.0.0.1:$port" --concurrency 1 --requests 400 --input-tokens 32 --output-tokens 64 --runs-dir "$out/runs" >"$out/load.log" 2>&1 &
load=$!
sleep 2
perf record -F 4999 -g -p "$server" -o "$out/perf.data" -- sleep 5 >/dev/null 2>&1
wait "$load" || true
kill "$server"; wait "$server" 2>/dev/null || true
echo "$side, $threads thread(s), one client; bench load:"
grep -A2 "output tok/s" "$out/load.log" | tail -1
echo "per thread: share of all samples, then its top functions (share of that thread's samples)"
perf script -i "$out/perf.data" -F tid,ip,sym,dso 2>/dev/null | awk 'BEGIN { RS = "" }
  { split($0, lines, "\n"); tid = lines[1] + 0; frame = lines[2]; sub(/^[ \t]*[0-9a-f]+ /, "", frame); sub(/\(.*\//, "(", frame); count[tid, frame]++; per[tid]++; total++ }
  END { for (key in count) { split(key, k, SUBSEP); printf "%s\t%.1f\t%.1f\t%s\n", k[1], 100 * per[k[1]] / total, 100 * count[key] / per[k[1]], k[2] } }' \
  | sort -t$'\t' -k2,2nr -k3,3nr | awk -F'\t' '$2 >= 2 && shown[$1]++ < 3 { if (shown[$1] == 1) printf "thread %s: %s%% of samples\n", $1, $2; printf "  %5s%%  %s\n", $3, substr($4, 1, 80) }'
