#!/usr/bin/env bash
# `sockscope merge` of N real load artifacts of >= 1,000,000 transactions
# each (docs/benchmarks.md, section L): makes them with N concurrent
# `sockscope load tcp-rr -n 1000000` against one `serve echo`, started
# together with a common --start-at (as generators on N machines would
# be), then times the merge (ROUNDS times; median and slowest) and checks
# that the merged count is the sum.
#
#   bench/merge.sh [N] [ROUNDS]     (default 10 artifacts, 5 rounds)
#
# Only loopback is used. Every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10}
ROUNDS=${2:-5}
COUNT=1000000
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/merge
rm -rf "$OUT"
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "bench/merge.sh: build first ($BIN missing)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench/merge.sh: python3 missing" >&2; exit 1; }

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"
"$BIN" serve echo --transport epoll --listen 127.0.0.1:0 >"$OUT/serve.out" 2>"$OUT/serve.err" &
PIDS+=($!)
for _ in $(seq 50); do grep -q '^listening on' "$OUT/serve.out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$OUT/serve.out")
[ -n "$ADDR" ] || { echo "bench/merge.sh: serve echo did not start" >&2; exit 1; }

START="@$(( $(date +%s) + 3 ))"
echo "making $N artifacts of $COUNT transactions each against $ADDR (start $START)"
GEN=()
for i in $(seq 0 $((N - 1))); do
  "$BIN" -q load tcp-rr "$ADDR" -c 4 -t 1 --pipeline 8 -n "$COUNT" --start-at "$START" \
    --json "$OUT/gen-$i.json" &
  GEN+=($!)
done
for p in "${GEN[@]}"; do wait "$p"; done

python3 - "$BIN" "$OUT" "$N" "$ROUNDS" <<'PY'
import json, os, statistics, subprocess, sys, time
bin_, out, n, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
files = [f"{out}/gen-{i}.json" for i in range(n)]
tx = [json.load(open(f))["transactions"] for f in files]
assert min(tx) >= 1_000_000, tx
size = sum(os.path.getsize(f) for f in files)
times = []
for r in range(rounds):
    t0 = time.perf_counter()
    subprocess.run([bin_, "-q", "merge", *files, "--out", f"{out}/merged.json"], check=True)
    times.append(time.perf_counter() - t0)
m = json.load(open(f"{out}/merged.json"))
assert m["transactions"] == sum(tx), (m["transactions"], sum(tx))
assert m["latency"]["count"] == sum(tx)
print(f"{n} artifacts, {sum(tx)} transactions ({min(tx)}..{max(tx)} each), {size/1e3:.0f} kB of JSON")
print(f"merged p50 {m['latency']['p50_ns']} ns, p99 {m['latency']['p99_ns']} ns; "
      f"seconds aligned within {m['merged']['alignment']['max_misalignment_ms']:.3f} ms")
print("merge wall time, s: " + " ".join(f"{t:.3f}" for t in times))
print(f"median {statistics.median(times):.3f} s, slowest {max(times):.3f} s "
      f"({'under' if max(times) < 1 else 'OVER'} one second)")
PY
