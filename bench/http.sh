#!/usr/bin/env bash
# load http next to wrk and h2load (HTTP/1.1 mode) in the same run, against
# one nginx, at 1, 64 and 256 connections, one generator thread each
# (docs/benchmarks.md, section H; the key-value workloads are bench/kv.sh).
# Each row: requests/s and the generator's CPU per request (user+system,
# from the process's rusage), rounds interleaved.
#
#   bench/http.sh [SECS_PER_RUN]      (default 5; ROUNDS=2)
#
# Only loopback is used. Every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECS=${1:-5}
SECTIONS=${SECTIONS:-H}
ROUNDS=${ROUNDS:-2}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/http
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$BIN" ] || { echo "bench/http.sh: build first ($BIN missing)" >&2; exit 1; }
for t in nginx wrk h2load python3; do
  command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] ||
    { echo "bench/http.sh: $t missing (make deps)" >&2; exit 1; }
done

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$@"; }
wait_port() {
  for _ in $(seq 100); do
    python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 0.2)" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listens on $1" >&2; exit 1
}
ratio() { python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{a/b:.2f}' if b else 'n/a')" "$1" "$2"; }
us_per() { python3 -c "import sys; c,n=float(sys.argv[1]),float(sys.argv[2]); print(f'{1e6*c/n:.2f}' if n else 'n/a')" "$1" "$2"; }

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $SECS s per run, $ROUNDS rounds"
echo

# ---------------------------------------------------------------- H
if want H; then
NGX=$OUT/nginx
mkdir -p "$NGX/html" "$NGX/logs"
cp /usr/share/nginx/html/index.html "$NGX/html/" 2>/dev/null ||
  printf '<!DOCTYPE html><html><body>%0600d</body></html>\n' 0 >"$NGX/html/index.html"
HPORT=$(free_port)
# Stock settings apart from paths, port, one worker and no access log (the
# log's disk writes would be measured as the server's).
cat >"$NGX/nginx.conf" <<EOF
worker_processes 1;
pid $NGX/nginx.pid;
error_log $NGX/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  server {
    listen 127.0.0.1:$HPORT;
    root $NGX/html;
  }
}
EOF
/usr/sbin/nginx -p "$NGX" -c "$NGX/nginx.conf" -g 'daemon off;' &
PIDS+=($!)
wait_port "$HPORT"
URL="http://127.0.0.1:$HPORT/index.html"
echo "### H. HTTP/1.1 keep-alive GET of nginx's index.html ($(stat -c %s "$NGX/html/index.html") B), one generator thread"
echo
echo "| conns | round | sockscope req/s | wrk req/s | h2load req/s | sockscope/wrk | sockscope/h2load | CPU us/req sockscope | wrk | h2load | sockscope p99 | errors (sockscope) |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in 1 64 256; do
  for r in $(seq "$ROUNDS"); do
    j=$OUT/h-$c-$r.json
    cs=$(cpu_run "$OUT/h-$c-$r.sockscope.log" "$BIN" -q load http "$URL" -c "$c" -t 1 -d "$SECS" --json "$j")
    cw=$(cpu_run "$OUT/h-$c-$r.wrk.log" wrk -t 1 -c "$c" -d "${SECS}s" --latency "$URL")
    ch=$(cpu_run "$OUT/h-$c-$r.h2load.log" h2load --h1 -c "$c" -t 1 -D "$SECS" "$URL")
    rs=$(json "$j" "round(d['rate_per_s'])")
    ns=$(json "$j" "d['transactions'] + d['warmup_transactions']")
    p99=$(json "$j" "'%.0f us' % (d['latency']['p99_ns'] / 1e3)")
    es=$(json "$j" "d['errors']['total']")
    rw=$(awk '/^Requests\/sec:/{printf "%.0f", $2}' "$OUT/h-$c-$r.wrk.log")
    nw=$(awk '/requests in/{print $1}' "$OUT/h-$c-$r.wrk.log")
    rh=$(awk '/^finished in/{gsub(",","",$4); printf "%.0f", $4}' "$OUT/h-$c-$r.h2load.log")
    nh=$(awk '/^requests:/{print $8}' "$OUT/h-$c-$r.h2load.log")
    echo "| $c | $r | $rs | $rw | $rh | $(ratio "$rs" "$rw") | $(ratio "$rs" "$rh") | $(us_per "$cs" "$ns") | $(us_per "$cw" "$nw") | $(us_per "$ch" "$nh") | $p99 | $es |"
  done
done
echo
fi

