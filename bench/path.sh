#!/usr/bin/env bash
# Emulated paths (docs/benchmarks.md, section K): echo over
# `--path rtt=10ms` (delayline backend where netem is missing) at 1, 64 and
# 1000 connections: the measured p50 minus the emulated 10 ms, against the
# loopback p50 of the same server in the same run; and where the path
# itself becomes the bottleneck: a bulk transfer (64 KiB each way per
# transaction, 4 connections) through a path with no delay and no rate
# limit, against loopback.
#
#   bench/path.sh [SECS_PER_RUN]     (default 5 s)
#
# Needs root (namespaces). Path traffic stays inside the two namespaces
# sockscope makes (10.233.0.0/16); the loopback runs use 127.0.0.1. Every
# process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/path
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "bench/path.sh: build first ($BIN missing)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench/path.sh: python3 missing" >&2; exit 1; }

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $SECS s per run"

# A loopback echo server on a free port, started in this shell (not in a
# command substitution's subshell, whose PIDS the cleanup would not see);
# its address is in $ECHO_ADDR.
start_echo() {
  local log=$OUT/echo-$1.log
  "$BIN" serve echo --transport epoll "${@:2}" --listen 127.0.0.1:0 >"$log" 2>&1 &
  PIDS+=($!)
  ECHO_ADDR=
  for _ in $(seq 100); do
    ECHO_ADDR=$(grep -oE '127\.0\.0\.1:[0-9]+' "$log" | head -1 || true)
    [ -n "$ECHO_ADDR" ] && return
    sleep 0.05
  done
  echo "bench/path.sh: echo server did not start" >&2; exit 1
}

summ() {
  python3 - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
l = d["latency"]
mb = (d["bytes"]["sent"] + d["bytes"]["received"]) / d["duration_s"] / 1e6
relay = (d.get("path") or {}).get("relay")
cpu = f" relay_cpu={relay['cpu_s']:.2f}s" if relay else ""
print(f"tx/s={d['rate_per_s']:.0f} p50_ms={l['p50_ns']/1e6:.3f} p99_ms={l['p99_ns']/1e6:.3f} "
      f"MB/s={mb:.1f} errors={d['errors']['total']}{cpu}")
EOF
}

start_echo small; LO=$ECHO_ADDR
for c in 1 64 1000; do
  "$BIN" load tcp-rr "$LO" -c "$c" -d "$SECS" --json "$OUT/lo-$c.json" --quiet || true
  "$BIN" load tcp-rr ADDR -c "$c" -d "$SECS" --path rtt=10ms --serve 'echo --transport epoll' \
    --json "$OUT/path-$c.json" --quiet || true
  echo "c=$c loopback: $(summ "$OUT/lo-$c.json")"
  echo "c=$c rtt=10ms: $(summ "$OUT/path-$c.json")"
done

BULK=(--req 65536 -c 4 -d "$SECS")
start_echo bulk --req-size 65536 --resp-size 65536; LOB=$ECHO_ADDR
"$BIN" load tcp-rr "$LOB" "${BULK[@]}" --json "$OUT/lo-bulk.json" --quiet || true
"$BIN" load tcp-rr ADDR "${BULK[@]}" --path rtt=0ms \
  --serve 'echo --transport epoll --req-size 65536 --resp-size 65536' \
  --json "$OUT/path-bulk.json" --quiet || true
echo "bulk loopback: $(summ "$OUT/lo-bulk.json")"
echo "bulk rtt=0ms (no rate limit): $(summ "$OUT/path-bulk.json")"
