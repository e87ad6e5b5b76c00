#!/usr/bin/env bash
# load http --http2 next to h2load in the same run, against one nginx
# serving h2c (prior knowledge) on loopback, at the same connections and
# streams per connection, one generator thread each, alternating, ROUNDS
# rounds (docs/benchmarks.md, section H2). Each row: requests/s and the
# generator's CPU per request (user+system from the process's rusage, the
# same method for both), and the ratios sockscope/h2load.
#
#   bench/h2.sh [SECS_PER_RUN]      (default 5; ROUNDS=3; CASES="C:S ...")
#
# Only loopback is used; outputs go under target/bench/h2. Every process
# started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECS=${1:-5}
ROUNDS=${ROUNDS:-3}
CASES=${CASES:-"1:1 1:16 16:16"}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/h2
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$BIN" ] || { echo "bench/h2.sh: build first ($BIN missing)" >&2; exit 1; }
for t in nginx h2load python3; do
  command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] ||
    { echo "bench/h2.sh: $t missing (make deps)" >&2; exit 1; }
done

PIDS=()
# TERM first: nginx's master then stops its worker (a master killed -9
# would leave the worker behind, holding the port and our stdout).
cleanup() {
  for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
}
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

NGX=$OUT/nginx
mkdir -p "$NGX/html" "$NGX/logs"
cp /usr/share/nginx/html/index.html "$NGX/html/" 2>/dev/null ||
  printf '<!DOCTYPE html><html><body>%0600d</body></html>\n' 0 >"$NGX/html/index.html"
PORT=$(free_port)
# Stock settings apart from paths, port, h2c, one worker, no access log and
# sendfile off (with it nginx writes the DATA frame behind the HEADERS in a
# second small segment: Nagle and delayed ACKs hold each lone request for
# 40 ms, both generators alike); keepalive_requests raised so that neither
# generator reconnects every 1000 requests (nginx default) inside the run.
cat >"$NGX/nginx.conf" <<EOF
worker_processes 1;
pid $NGX/nginx.pid;
error_log $NGX/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile off;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$PORT http2;
    root $NGX/html;
  }
}
EOF
/usr/sbin/nginx -p "$NGX" -c "$NGX/nginx.conf" -g 'daemon off;' &
PIDS+=($!)
wait_port "$PORT"
URL="http://127.0.0.1:$PORT/index.html"
echo "### H2. HTTP/2 (h2c) GET of nginx's index.html ($(stat -c %s "$NGX/html/index.html") B), one generator thread"
echo
echo "| conns | streams | round | sockscope req/s | h2load req/s | sockscope/h2load | CPU us/req sockscope | h2load | CPU/req sockscope/h2load | errors (sockscope) |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for cs_ in $CASES; do
  c=${cs_%%:*}; s=${cs_##*:}
  for r in $(seq "$ROUNDS"); do
    j=$OUT/h2-$c-$s-$r.json
    # Alternate which goes first, so neither always runs on a warmer
    # machine.
    run_ours() { cpu_run "$OUT/h2-$c-$s-$r.sockscope.log" "$BIN" -q load http "$URL" --http2 --streams "$s" -c "$c" -t 1 -d "$SECS" --json "$j"; }
    run_h2load() { cpu_run "$OUT/h2-$c-$s-$r.h2load.log" h2load -c "$c" -m "$s" -t 1 -D "$SECS" "$URL"; }
    if (( r % 2 )); then cs=$(run_ours); ch=$(run_h2load); else ch=$(run_h2load); cs=$(run_ours); fi
    rs=$(json "$j" "round(d['rate_per_s'])")
    ns=$(json "$j" "d['transactions'] + d['warmup_transactions']")
    es=$(json "$j" "d['errors']['total']")
    rh=$(awk '/^finished in/{gsub(",","",$4); printf "%.0f", $4}' "$OUT/h2-$c-$s-$r.h2load.log")
    nh=$(awk '/^requests:/{print $8}' "$OUT/h2-$c-$s-$r.h2load.log")
    us=$(us_per "$cs" "$ns"); uh=$(us_per "$ch" "$nh")
    echo "| $c | $s | $r | $rs | $rh | $(ratio "$rs" "$rh") | $us | $uh | $(ratio "$us" "$uh") | $es |"
  done
done
echo
