#!/usr/bin/env bash
# What sampling stacks costs the target (docs/benchmarks.md, section S):
# one nginx (2 workers) at saturation under `sockscope load http -c 8`,
# its CPU per request (user+system of master and workers from /proc, over
# the load's window) in alternating runs:
#   base     nothing attached;
#   on99     trace --stacks-only at 99 Hz (on-CPU only, the default);
#   onoff99  trace --stacks-only --off-cpu at 99 Hz;
#   perf99   the peer: perf record -F 99 --call-graph dwarf (8 KiB copies),
#            writing to a file under target/.
# Each row: requests/s, nginx CPU us per request, and the ratio to the
# base run of the same round; for sockscope, the sampler's own account
# (BPF time, unwinding, symbolization) from its artifact.
#
#   bench/stacks.sh [SECS_PER_RUN]      (default 8; ROUNDS=3)
#
# Only loopback is used; outputs go under target/bench/stacks. Every
# process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECS=${1:-8}
ROUNDS=${ROUNDS:-3}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/stacks
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$BIN" ] || { echo "bench/stacks.sh: build first ($BIN missing)" >&2; exit 1; }
for t in nginx perf python3; do
  command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] ||
    { echo "bench/stacks.sh: $t missing (make deps)" >&2; exit 1; }
done

PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$@"; }
ratio() { python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{a/b:.3f}' if b else 'n/a')" "$1" "$2"; }
# cpu_of PIDS...: user+system seconds of these processes now.
cpu_of() {
  python3 - "$@" <<'PY'
import os, sys
hz = os.sysconf("SC_CLK_TCK")
t = 0
for p in sys.argv[1:]:
    f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
    t += int(f[11]) + int(f[12])
print(f"{t / hz:.3f}")
PY
}

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $SECS s per run, $ROUNDS rounds"
echo

NGX=$OUT/nginx
mkdir -p "$NGX/html" "$NGX/logs"
cp /usr/share/nginx/html/index.html "$NGX/html/" 2>/dev/null ||
  printf '<!DOCTYPE html><html><body>%0600d</body></html>\n' 0 >"$NGX/html/index.html"
PORT=$(free_port)
cat >"$NGX/nginx.conf" <<EOF
worker_processes 2;
pid $NGX/nginx.pid;
error_log $NGX/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$PORT;
    root $NGX/html;
  }
}
EOF
/usr/sbin/nginx -p "$NGX" -c "$NGX/nginx.conf" -g 'daemon off;' &
MASTER=$!
PIDS+=("$MASTER")
for _ in $(seq 100); do
  python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 0.2)" "$PORT" 2>/dev/null && break
  sleep 0.05
done
sleep 0.3
NPIDS=("$MASTER" $(pgrep -P "$MASTER"))
echo "nginx: master $MASTER, workers ${NPIDS[*]:1}"
echo

# run NAME TAG: one load run with NAME's observer beside it; prints
# "rps us_per_req".
run() {
  local name=$1 tag=$2 obs=""
  case $name in
    on99) "$BIN" trace --stacks-only --stack-hz 99 --quiet \
            --json "$OUT/$tag.json" -p "$MASTER" --duration $((SECS + 3)) \
            2>"$OUT/$tag.err" & obs=$! ;;
    onoff99) "$BIN" trace --stacks-only --off-cpu --stack-hz 99 --quiet \
            --json "$OUT/$tag.json" -p "$MASTER" --duration $((SECS + 3)) \
            2>"$OUT/$tag.err" & obs=$! ;;
    perf99) perf record -q -F 99 --call-graph dwarf -o "$OUT/$tag.perf" \
            -p "$(IFS=,; echo "${NPIDS[*]}")" -- sleep $((SECS + 2)) \
            >"$OUT/$tag.err" 2>&1 & obs=$! ;;
  esac
  if [ -n "$obs" ]; then PIDS+=("$obs"); sleep 1.5; fi
  local c0 c1
  c0=$(cpu_of "${NPIDS[@]}")
  "$BIN" load http -c 8 -d "$SECS" --json "$OUT/$tag.load.json" \
    "http://127.0.0.1:$PORT/" >"$OUT/$tag.load.log" 2>&1
  c1=$(cpu_of "${NPIDS[@]}")
  if [ -n "$obs" ]; then
    wait "$obs" || { echo "observer $name failed: see $OUT/$tag.err" >&2; exit 1; }
  fi
  local n rps
  n=$(json "$OUT/$tag.load.json" "d['transactions']")
  rps=$(json "$OUT/$tag.load.json" "round(d['rate_per_s'])")
  python3 -c "import sys; print(sys.argv[1], f'{1e6*(float(sys.argv[3])-float(sys.argv[2]))/float(sys.argv[4]):.2f}')" "$rps" "$c0" "$c1" "$n"
}

printf "%-6s %-8s %10s %12s %8s  %s\n" round run "req/s" "us/req" "ratio" "sampler's own account"
for r in $(seq "$ROUNDS"); do
  base=""
  for name in base on99 onoff99 perf99; do
    read -r rps us < <(run "$name" "$name-$r")
    [ "$name" = base ] && base=$us
    acct=""
    if [ -f "$OUT/$name-$r.json" ]; then
      acct=$(json "$OUT/$name-$r.json" "'samples %d off %d, bpf %.1f ms, unwind %.1f ms, symbolize %.1f ms, share of target %.2f %%' % (d['stacks']['cost']['samples'], d['stacks']['cost']['off_cpu_samples'], d['stacks']['cost']['bpf_ns']/1e6, d['stacks']['cost']['unwind_ns']/1e6, d['stacks']['cost']['symbolize_ns']/1e6, 100*(d['stacks']['cost']['target_share'] or 0))")
    fi
    printf "%-6s %-8s %10s %12s %8s  %s\n" "$r" "$name" "$rps" "$us" "$(ratio "$us" "$base")" "$acct"
  done
done
