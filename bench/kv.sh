#!/usr/bin/env bash
# Key-value load generators side by side (docs/benchmarks.md, section G):
#   redis:     sockscope load redis vs redis-benchmark, PING / SET / GET at
#              -c 50, pipeline 1 and 16, one generator thread each, 100000
#              keys, 3-byte values (redis-benchmark's default size);
#   memcached: sockscope load memcached vs memcaslap (libmemcached's
#              memaslap), 1 thread, 50 connections, 1 SET per 9 GETs,
#              100-byte values.
# Requests/s and the generator's CPU (user + system, /usr/bin/time) per
# request. Each generator runs ROUNDS times, interleaved.
#
#   bench/kv.sh [REQUESTS] [ROUNDS]     (default 200000, 2)
#
# Only loopback is used; the servers started here are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
N=${1:-200000}
ROUNDS=${2:-2}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/kv
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "bench/kv.sh: build first ($BIN missing)" >&2; exit 1; }
for t in redis-server redis-benchmark memcached memcaslap; do
  command -v "$t" >/dev/null || { echo "bench/kv.sh: $t missing" >&2; exit 1; }
done

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

wait_port() { for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened" >&2; exit 1; }

RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$OUT/redis.log" 2>&1 &
PIDS+=($!)
MP=$(free_port)
memcached -p "$MP" -U 0 -l 127.0.0.1 -u nobody >"$OUT/memcached.log" 2>&1 &
PIDS+=($!)
wait_port "$RP"; wait_port "$MP"

# cpu_us FILE REQUESTS: generator CPU per request from /usr/bin/time's line.
cpu_us() { awk -v n="$2" '/^cpu /{printf "%.2f", ($2+$3)*1e6/n}' "$1"; }

printf '%-10s %-4s %-6s %-16s %12s %14s\n' server P cmd generator "requests/s" "CPU us/req"
for r in $(seq "$ROUNDS"); do
  for P in 1 16; do
    /usr/bin/time -f 'cpu %U %S' -o "$OUT/rb.time" redis-benchmark -p "$RP" -t ping,set,get \
      -c 50 -P "$P" -n "$N" -r 100000 -d 3 -q --threads 1 >"$OUT/rb.out" 2>&1
    # redis-benchmark's CPU covers its tests together: -t ping runs two
    # (PING_INLINE, PING_MBULK; the table shows PING_MBULK, the form
    # sockscope sends), set and get one each.
    rb_cpu=$(awk -v n=$((4 * N)) '/^cpu /{printf "%.2f", ($2+$3)*1e6/n}' "$OUT/rb.time")
    tr '\r' '\n' <"$OUT/rb.out" | awk -v P="$P" -v cpu="$rb_cpu" \
      '/requests per second/ && $1 != "PING_INLINE:" {sub(":","",$1); if ($1=="PING_MBULK") $1="PING";
        printf "%-10s %-4s %-6s %-16s %12.0f %14s\n", "redis", P, $1, "redis-benchmark", $2, cpu " (all 4)"}'
    for cmd in PING 'SET key:{key} {value}' 'GET key:{key}'; do
      /usr/bin/time -f 'cpu %U %S' -o "$OUT/ss.time" "$BIN" load redis "127.0.0.1:$RP" -c 50 -t 1 \
        --pipeline "$P" -n "$N" --keys 100000 --value-size 3 --command "$cmd" \
        --json "$OUT/ss.json" >/dev/null
      rate=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["rate_per_s"]))' "$OUT/ss.json")
      printf '%-10s %-4s %-6s %-16s %12s %14s\n' redis "$P" "${cmd%% *}" sockscope "$rate" "$(cpu_us "$OUT/ss.time" "$N")"
    done
  done
  /usr/bin/time -f 'cpu %U %S' -o "$OUT/ma.time" memcaslap -s "127.0.0.1:$MP" -T 1 -c 50 -x "$N" -X 100 >"$OUT/ma.out" 2>&1
  rate=$(awk '/^Run time:/{print $7}' "$OUT/ma.out")
  printf '%-10s %-4s %-6s %-16s %12s %14s\n' memcached 1 1:9 memcaslap "$rate" "$(cpu_us "$OUT/ma.time" "$N")"
  /usr/bin/time -f 'cpu %U %S' -o "$OUT/ss.time" "$BIN" load memcached "127.0.0.1:$MP" -c 50 -t 1 \
    -n "$N" --keys 100000 --value-size 100 --ratio 1:9 --json "$OUT/ss.json" >/dev/null
  rate=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["rate_per_s"]))' "$OUT/ss.json")
  printf '%-10s %-4s %-6s %-16s %12s %14s\n' memcached 1 1:9 sockscope "$rate" "$(cpu_us "$OUT/ss.time" "$N")"
done
