#!/usr/bin/env bash
# What the request anatomy costs nginx at its saturation rate
# (docs/benchmarks.md, section A): wrk drives one nginx worker over loopback
# at 32 connections, closed loop, while nothing traces it, while the
# socket-only anatomy follows it (`trace --requests-only`), and while the
# syscall tracer does (`trace`, latency mode). Rounds are interleaved. Each
# row: requests/s, nginx's CPU per request (user+system of its processes,
# from /proc/PID/stat, BPF time run in its context included), and the
# machine's busy CPU per request (/proc/stat: BPF time run in softirq or in
# wrk's context is there too).
#
#   bench/anatomy.sh [SECS_PER_RUN]      (default 5; ROUNDS=3)
#
# WORKERS=N runs N nginx workers (default 1), NGINX_BIN another nginx (not
# NGINX: nginx reads that variable itself), and GEN=sockscope drives them
# with `sockscope load http -t THREADS` instead of wrk -t THREADS (THREADS
# default 1): the multi-core run on a machine without wrk. RATE=N (with
# GEN=sockscope) offers a fixed N requests/s instead of a closed loop:
# below saturation the CPU per request is then free of what a slower
# closed loop does to nginx's batching (fewer requests per epoll_wait).
#
# AGENT=1 adds the node agent's rows: "agent", deploy/k8s's DaemonSet
# arguments as shipped (`trace --system --requests --by comm --max-series
# 1024 --metrics ...`), and "agent-ro", the same with --requests-only (no
# syscall tracer, so no --by): machine-wide, so every process pays what
# they hook.
#
# DUTY=ON/PERIOD adds a "sampled" row: `trace --requests-only
# --requests-duty ON/PERIOD` (the window opens 1.5 s before the load;
# e.g. DUTY=500ms/5s with 5 s runs samples 0.5 s of the load).
# HOOKS_BIN=PATH adds a "hooks" row: a sockscope built with
# SOCKSCOPE_ANATOMY_HOOKS_ONLY=1 (its anatomy programs are attached and
# return at once), run like "sockets": what the tracepoints cost before any
# program work. Build it apart, e.g.
#   SOCKSCOPE_ANATOMY_HOOKS_ONLY=1 cargo build --release --target-dir target/hooks-only
#
# Only loopback is used. Every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECS=${1:-5}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-32}
WORKERS=${WORKERS:-1}
THREADS=${THREADS:-1}
GEN=${GEN:-wrk}
RATE=${RATE:-}
HOOKS_BIN=${HOOKS_BIN:-}
DUTY=${DUTY:-}
AGENT=${AGENT:-}
MODES="base sockets syscalls${HOOKS_BIN:+ hooks}${DUTY:+ sampled}${AGENT:+ agent agent-ro}"
[ -z "$RATE" ] || [ "$GEN" = sockscope ] || { echo "bench/anatomy.sh: RATE needs GEN=sockscope" >&2; exit 2; }
NGINX_BIN=${NGINX_BIN:-/usr/sbin/nginx}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/anatomy
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$BIN" ] || { echo "bench/anatomy.sh: build first ($BIN missing)" >&2; exit 1; }
[ -z "$HOOKS_BIN" ] || [ -x "$HOOKS_BIN" ] || { echo "bench/anatomy.sh: HOOKS_BIN $HOOKS_BIN is not an executable" >&2; exit 1; }
[ -x "$NGINX_BIN" ] || { echo "bench/anatomy.sh: nginx missing at $NGINX_BIN (make deps, or NGINX_BIN=PATH)" >&2; exit 1; }
for t in "$GEN" python3; do
  [ "$t" = sockscope ] && continue
  command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] ||
    { echo "bench/anatomy.sh: $t missing (make deps)" >&2; exit 1; }
done

PIDS=()
MASTER=
# nginx's workers outlive a SIGKILLed master: stop them by name of parent
# first (SIGTERM is nginx's fast shutdown), then whatever is left.
cleanup() {
  if [ -n "$MASTER" ]; then
    local kids
    kids=$(pgrep -P "$MASTER" || true)
    kill -TERM "$MASTER" 2>/dev/null || true
    sleep 0.3
    kill -9 $kids 2>/dev/null || true
  fi
  for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# CPU ticks (user+system) of a process and its children's threads.
busy_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }

NGX=$OUT/nginx
mkdir -p "$NGX/html" "$NGX/logs" "$NGX/tmp"
cp /usr/share/nginx/html/index.html "$NGX/html/" 2>/dev/null ||
  printf '<!DOCTYPE html><html><body>%0600d</body></html>\n' 0 >"$NGX/html/index.html"
PORT=$(free_port)
cat >"$NGX/nginx.conf" <<EOF
worker_processes $WORKERS;
pid $NGX/nginx.pid;
error_log $NGX/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  client_body_temp_path $NGX/tmp;
  proxy_temp_path $NGX/tmp;
  fastcgi_temp_path $NGX/tmp;
  uwsgi_temp_path $NGX/tmp;
  scgi_temp_path $NGX/tmp;
  server {
    listen 127.0.0.1:$PORT;
    root $NGX/html;
  }
}
EOF
"$NGINX_BIN" -p "$NGX" -c "$NGX/nginx.conf" -g 'daemon off;' &
MASTER=$!
PIDS+=("$MASTER")
wait_port "$PORT"
sleep 0.5
NGINX_PIDS=("$MASTER" $(pgrep -P "$MASTER"))
URL="http://127.0.0.1:$PORT/index.html"
HZ=$(getconf CLK_TCK)

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $SECS s per run, $ROUNDS rounds, $CONNS connections, $WORKERS nginx worker(s), generator $GEN -t $THREADS${RATE:+ at $RATE req/s}"
echo
echo "| round | mode | req/s | nginx CPU us/req | machine CPU us/req | turns / requests |"
echo "|---:|---|---:|---:|---:|---:|"

# run MODE ROUND: one wrk run under MODE; prints the row and appends
# "mode rps nginx_us machine_us" to $OUT/rows.
run() {
  local mode=$1 round=$2 tracer=""
  local json=$OUT/$mode-$round.json
  case $mode in
    base) ;;
    sockets) "$BIN" trace --requests-only -q -p "$MASTER" --duration $((SECS + 3)) \
               --json "$json" 2>"$OUT/$mode-$round.err" & tracer=$! ;;
    sampled) "$BIN" trace --requests-only --requests-duty "$DUTY" -q -p "$MASTER" \
               --duration $((SECS + 3)) --json "$json" 2>"$OUT/$mode-$round.err" & tracer=$! ;;
    hooks) "$HOOKS_BIN" trace --requests-only -q -p "$MASTER" --duration $((SECS + 3)) \
               --json "$json" 2>"$OUT/$mode-$round.err" & tracer=$! ;;
    syscalls) "$BIN" trace -q -p "$MASTER" --duration $((SECS + 3)) \
               --json "$json" 2>"$OUT/$mode-$round.err" & tracer=$! ;;
    agent) "$BIN" trace --system --requests --by comm --max-series 1024 \
               --metrics "127.0.0.1:$(free_port)" --quiet --duration $((SECS + 3)) \
               2>"$OUT/$mode-$round.err" & tracer=$! ;;
    agent-ro) "$BIN" trace --system --requests-only --max-series 1024 \
               --metrics "127.0.0.1:$(free_port)" --quiet --duration $((SECS + 3)) \
               2>"$OUT/$mode-$round.err" & tracer=$! ;;
  esac
  [ -n "$tracer" ] && { PIDS+=("$tracer"); sleep 1.5; }
  local n0 b0 n1 b1
  n0=$(proc_ticks "${NGINX_PIDS[@]}"); b0=$(busy_ticks)
  if [ "$GEN" = wrk ]; then
    wrk -t"$THREADS" -c"$CONNS" -d"${SECS}s" "$URL" >"$OUT/wrk-$mode-$round.txt"
  else
    "$BIN" load http "$URL" -q -t "$THREADS" -c "$CONNS" -d "$SECS" ${RATE:+--rate "$RATE"} \
      --json "$OUT/load-$mode-$round.json"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"{d['transactions']} requests in {d['duration_s']}s\")" \
      "$OUT/load-$mode-$round.json" >"$OUT/wrk-$mode-$round.txt"
  fi
  n1=$(proc_ticks "${NGINX_PIDS[@]}"); b1=$(busy_ticks)
  local turns="-"
  if [ -n "$tracer" ]; then
    wait "$tracer" || { echo "bench/anatomy.sh: the $mode tracer failed: $(cat "$OUT/$mode-$round.err")" >&2; exit 1; }
    case $mode in sockets|sampled|hooks) true ;; *) false ;; esac && turns=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['anatomy']['turns'])" "$json")
  fi
  python3 - "$OUT/wrk-$mode-$round.txt" "$mode" "$round" "$((n1 - n0))" "$((b1 - b0))" "$HZ" "$turns" "$OUT/rows" <<'PY'
import re, sys
wrk, mode, rnd, nt, bt, hz, turns, rows = sys.argv[1:]
text = open(wrk).read()
reqs = int(re.search(r"(\d+) requests in", text).group(1))
secs = float(re.search(r"requests in ([\d.]+)s", text).group(1))
rps = reqs / secs
nginx_us = 1e6 * int(nt) / int(hz) / reqs
machine_us = 1e6 * int(bt) / int(hz) / reqs
tr = "-" if turns == "-" else f"{int(turns)} / {reqs}"
print(f"| {rnd} | {mode} | {rps:,.0f} | {nginx_us:.2f} | {machine_us:.2f} | {tr} |")
open(rows, "a").write(f"{mode} {rps} {nginx_us} {machine_us}\n")
PY
}

for r in $(seq "$ROUNDS"); do
  for m in $MODES; do run "$m" "$r"; done
done

echo
python3 - "$OUT/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m, *v = line.split()
    rows.setdefault(m, []).append([float(x) for x in v])
med = {m: [statistics.median(c) for c in zip(*v)] for m, v in rows.items()}
b, s, t = med["base"], med["sockets"], med["syscalls"]
print("| medians | req/s | nginx CPU us/req | machine CPU us/req |")
print("|---|---:|---:|---:|")
for m in ("base", "sockets", "syscalls", "hooks", "sampled", "agent", "agent-ro"):
    if m in med:
        print(f"| {m} | {med[m][0]:,.0f} | {med[m][1]:.2f} | {med[m][2]:.2f} |")
print()
def added(x, i): return x[i] - b[i]
print(f"socket-only vs untraced: throughput {s[0]/b[0]:.3f}x, nginx CPU/request {s[1]/b[1]:.3f}x "
      f"(+{100*(s[1]/b[1]-1):.1f} %), machine CPU/request {s[2]/b[2]:.3f}x")
print(f"syscall tracer vs untraced: throughput {t[0]/b[0]:.3f}x, nginx CPU/request {t[1]/b[1]:.3f}x, "
      f"machine CPU/request {t[2]/b[2]:.3f}x")
for i, name in ((1, "nginx"), (2, "machine")):
    at, as_ = added(t, i), added(s, i)
    share = f"{as_/at:.2f}" if at > 0 else "n/a"
    print(f"added {name} CPU per request: socket-only {as_:.2f} us, syscall tracer {at:.2f} us: ratio {share}")
    if "hooks" in med:
        ah = added(med["hooks"], i)
        print(f"  of which the tracepoints alone (programs returning at once): {ah:.2f} us")
    if "sampled" in med:
        sp = med["sampled"]
        print(f"  sampled (--requests-duty): {added(sp, i):.2f} us ({sp[i]/b[i]:.3f}x untraced)")
    for m in ("agent", "agent-ro"):
        if m in med:
            a = med[m]
            print(f"  {m}: {added(a, i):.2f} us ({a[i]/b[i]:.3f}x untraced; throughput {a[0]/b[0]:.3f}x)")
PY
