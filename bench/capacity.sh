#!/usr/bin/env bash
# The latency-throughput curve and the capacity under an SLO of two real
# servers (docs/benchmarks.md, "Sweeps and capacity searches"): for redis
# and nginx (one worker, `return 200`), `profile --sweep` over a staircase
# and `profile --find-capacity`, each a launched target with the tracer
# and the anatomy attached on every step. The peer of each capacity is the
# server's closed-loop maximum, measured as the search's first step of the
# same run: the row prints capacity / closed loop.
#
#   bench/capacity.sh          (STEP=3 seconds per step)
#
# Only loopback is used; outputs go under target/bench/capacity. Every
# process started here is profile's own (stopped by it) or stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
STEP=${STEP:-3}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/capacity
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$BIN" ] || { echo "bench/capacity.sh: build first ($BIN missing)" >&2; exit 1; }
for t in redis-server python3; do
  command -v "$t" >/dev/null || { echo "bench/capacity.sh: $t missing (make deps)" >&2; exit 1; }
done
[ -x /usr/sbin/nginx ] || { echo "bench/capacity.sh: nginx missing (make deps)" >&2; exit 1; }

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$@"; }

NGX=$OUT/nginx
mkdir -p "$NGX/logs"
NPORT=$(free_port)
cat >"$NGX/nginx.conf" <<EOF
worker_processes 1;
pid $NGX/nginx.pid;
error_log $NGX/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  server {
    listen 127.0.0.1:$NPORT;
    location / { return 200 "ok\n"; }
  }
}
EOF
RPORT=$(free_port)

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); $STEP s per step"
echo

# run NAME LOAD MODE SPEC -- TARGET...: one profile, its table and timing.
run() {
  local name=$1 load=$2 mode=$3 spec=$4; shift 5
  local art=$OUT/$name
  local t0 t1
  t0=$(date +%s.%N)
  local step=()
  [ "$mode" = --find-capacity ] && step=(--step "$STEP")
  "$BIN" -q profile --load "$load" "$mode" "$spec" "${step[@]}" --out "$art" -- "$@" >"$OUT/$name.log" 2>&1 ||
    { echo "$name: profile failed, see $OUT/$name.log" >&2; tail -5 "$OUT/$name.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "#### $name: \`sockscope profile --load '$load' $mode '$spec' ${step[*]} -- $*\`"
  echo
  echo '```'
  sed -n '/^\(Sweep\|Capacity search\)/,/^$/p' "$art/summary.txt"
  echo '```'
  printf 'wall %.1f s\n' "$(python3 -c "print($t1 - $t0)")"
  if [ "$mode" = --find-capacity ]; then
    local cap closed
    cap=$(json "$art/run.json" "d['capacity']['rate_per_s']")
    closed=$(json "$art/run.json" "d['sweep']['points'][0]['achieved_per_s']")
    if [ "$cap" = None ]; then
      echo "capacity: none named ($(json "$art/run.json" "d['capacity']['reason']"))"
    else
      echo "capacity $(python3 -c "print(f'{$cap:.0f}')")/s, closed loop $(python3 -c "print(f'{$closed:.0f}')")/s: ratio $(python3 -c "print(f'{$cap/$closed:.2f}')")"
    fi
  fi
  echo
}

REDIS=(redis-server --port "$RPORT" --save '' --appendonly no)
NGINX=(/usr/sbin/nginx -p "$NGX" -c "$NGX/nginx.conf" -g 'daemon off;')
run redis-sweep 'redis -c 8' --sweep '10k..50k step 10k every '"${STEP}"'s' -- "${REDIS[@]}"
run redis-capacity 'redis -c 8' --find-capacity 'p99<5ms' -- "${REDIS[@]}"
run nginx-sweep 'http -c 8' --sweep '2k..10k step 2k every '"${STEP}"'s' -- "${NGINX[@]}"
run nginx-capacity 'http -c 8' --find-capacity 'p99<5ms' -- "${NGINX[@]}"
