#!/usr/bin/env bash
# What the HTTP/2 streams of the request anatomy cost (docs/benchmarks.md,
# "HTTP/2 streams in the anatomy"): h2load drives one nginx worker (h2c,
# `return 200`) over loopback, closed loop, with 1 and with 8 streams in
# flight per connection, while nothing follows it ("base") and while
# `trace --requests-only` does ("sockets"). Rounds are interleaved. Each
# row: requests/s, nginx's CPU per request (its processes' user+system,
# BPF time run in its context included), sockscope's own CPU per request
# (the loader's HPACK decoding of every header block among it), and the
# programs' time per stream as the kernel's statistics give it
# (`anatomy.cost`: all programs, in any context, over the timed streams).
#
# TLS=1 (bench/anatomy_tls.sh): what reading TLS plaintext costs
# (docs/benchmarks.md, "TLS plaintext"): nginx speaks https (TLS 1.3),
# h2load drives HTTP/1.1 (`--h1`, one request in flight per connection)
# and HTTP/2 (ALPN h2, 8 streams in flight), and the modes are "base",
# "turns" (`trace --requests-only` without --tls-plaintext: TLS turns
# timed, requests not read) and "plaintext" (with it: uprobes on nginx's
# SSL_read/SSL_write, whose traps are in nginx's CPU, their programs'
# time in `anatomy.cost`).
#
#   bench/anatomy_h2.sh [REQUESTS]      (default 60000; ROUNDS=3; TLS=1)
#
# Only loopback is used. Every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
N=${1:-60000}
ROUNDS=${ROUNDS:-3}
TLS=${TLS:-0}
if [ "$TLS" = 1 ]; then
  NAME=anatomy_tls SCHEME=https LISTEN="ssl http2" MODES="base turns plaintext" LOADS="h1 h2"
else
  NAME=anatomy_h2 SCHEME=http LISTEN=http2 MODES="base sockets" LOADS="1 8"
fi
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/$NAME
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$BIN" ] || { echo "bench/$NAME.sh: build first ($BIN missing)" >&2; exit 1; }
[ -x "$NGINX_BIN" ] || { echo "bench/$NAME.sh: nginx missing at $NGINX_BIN (make deps)" >&2; exit 1; }
command -v h2load >/dev/null || { echo "bench/$NAME.sh: h2load missing (make deps)" >&2; exit 1; }

MASTER=
TRACER=
cleanup() {
  [ -z "$TRACER" ] || kill -INT "$TRACER" 2>/dev/null || true
  if [ -n "$MASTER" ]; then
    local kids
    kids=$(pgrep -P "$MASTER" || true)
    kill -TERM "$MASTER" 2>/dev/null || true
    sleep 0.3
    kill -9 $kids 2>/dev/null || true
  fi
}
trap cleanup EXIT


NGX=$OUT/nginx
mkdir -p "$NGX/logs" "$NGX/tmp"
PORT=$(free_port)
SSL=
if [ "$TLS" = 1 ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -keyout "$NGX/key.pem" -out "$NGX/cert.pem" >/dev/null 2>&1
  SSL="ssl_certificate $NGX/cert.pem; ssl_certificate_key $NGX/key.pem; ssl_protocols TLSv1.3;"
fi
cat >"$NGX/nginx.conf" <<EOF
worker_processes 1;
pid $NGX/nginx.pid;
error_log $NGX/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 10000000;
  http2_max_requests 10000000;
  client_body_temp_path $NGX/tmp;
  proxy_temp_path $NGX/tmp;
  fastcgi_temp_path $NGX/tmp;
  uwsgi_temp_path $NGX/tmp;
  scgi_temp_path $NGX/tmp;
  server {
    listen 127.0.0.1:$PORT $LISTEN;
    $SSL
    location / { return 200 "ok\n"; }
  }
}
EOF
"$NGINX_BIN" -p "$NGX" -c "$NGX/nginx.conf" -g 'daemon off;' 2>/dev/null &
MASTER=$!
for _ in $(seq 100); do
  h2load -n 1 -c 1 "$SCHEME://127.0.0.1:$PORT/" >/dev/null 2>&1 && break
  sleep 0.05
done
NGINX_PIDS=("$MASTER" $(pgrep -P "$MASTER"))
HZ=$(getconf CLK_TCK)

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $N requests per run over 2 connections, $ROUNDS rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | load | mode | req/s | nginx CPU us/req | sockscope CPU us/req | programs ns/request | timed / requests |"
echo "|---:|---:|---|---:|---:|---:|---:|---:|"

run() {
  local mode=$1 m=$2 round=$3
  local json=$OUT/$mode-$m-$round.json cpu_file=$OUT/$mode-$m-$round.cpu
  local flags=() load=(-m "$m")
  [ "$mode" != plaintext ] || flags=(--tls-plaintext)
  [ "$m" != h1 ] || load=(--h1)
  [ "$m" != h2 ] || load=(-m 8)
  if [ "$mode" != base ]; then
    "$BIN" trace --requests-only -q -p "$MASTER" --duration 600 --json "$json" "${flags[@]}" \
      >"$OUT/$mode-$m-$round.log" 2>&1 &
    TRACER=$!
    sleep 2
  fi
  local t0 t1 s0=0
  t0=$(proc_ticks "${NGINX_PIDS[@]}")
  [ "$mode" = base ] || s0=$(proc_ticks "$TRACER")
  local rps
  rps=$(h2load -n "$N" -c 2 "${load[@]}" "$SCHEME://127.0.0.1:$PORT/" | awk '/^finished in/ {print $4}')
  t1=$(proc_ticks "${NGINX_PIDS[@]}")
  local own="-" progs="-" timed="-"
  if [ "$mode" != base ]; then
    # sockscope's own CPU while the load ran (its threads included).
    echo $(($(proc_ticks "$TRACER") - s0)) >"$cpu_file"
    kill -INT "$TRACER"
    wait "$TRACER" || true
    TRACER=
    read -r own progs timed < <(python3 - "$json" "$cpu_file" "$N" "$HZ" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["anatomy"]
cpu = int(open(sys.argv[2]).read().strip() or 0) / int(sys.argv[4])
n = int(sys.argv[3])
turns = max(1, a["turns"])
print(f"{cpu * 1e6 / n:.2f} {a['cost']['target_ns'] / turns + a['cost']['others_ns'] / turns:.0f} "
      f"{a['turns']}/{a.get('requests')}")
PY
)
  fi
  local nginx_us
  nginx_us=$(python3 -c "print(f'{($t1 - $t0) / $HZ * 1e6 / $N:.2f}')")
  echo "| $round | $m | $mode | $rps | $nginx_us | $own | $progs | $timed |"
}

for round in $(seq "$ROUNDS"); do
  for m in $LOADS; do
    for mode in $MODES; do
      run "$mode" "$m" "$round"
    done
  done
done
