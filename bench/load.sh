#!/usr/bin/env bash
# Load generator and echo transport benchmark (docs/benchmarks.md):
#   A. 1-connection round trip: sockscope load vs sockperf ping-pong, both
#      against the same sockperf server, interleaved rounds.
#   B. per echo transport (threaded, epoll, uring): tcp-rr at 1, 64 and
#      1000 connections and tcp-crr at 1 and 16: transactions/s, p50/p99,
#      generator and server CPU per transaction.
#   C. udp: the highest rate the sink keeps up with (no loss).
#   D. idle memory per connection of each transport at 10,000 connections.
#   N. tcp-rr against neper: neper's tcp_rr server (1-byte request and
#      response), driven by neper's own client and by sockscope load tcp-rr
#      at 1, 64 and 512 flows, one client thread each, interleaved rounds:
#      transactions/s and the client's CPU (user+system, rusage) per
#      transaction, sockscope/neper ratios. neper is built from
#      third_party/neper into target/neper/ (make, gcc), or NEPER=PATH
#      names a tcp_rr built elsewhere (a machine without a compiler).
#
#   bench/load.sh [SECS_PER_RUN]     (default 5)
#   SECTIONS="A C" bench/load.sh     (run only some sections)
#   ROUNDS=3 NEPER_FLOWS="1 64 512" [BEFORE=old/sockscope] SECTIONS=N bench/load.sh 5
#
# Only loopback is used. Every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECS=${1:-5}
SECTIONS=${SECTIONS:-A B C D N}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/load
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "bench/load.sh: build first ($BIN missing)" >&2; exit 1; }
if want A; then
  command -v sockperf >/dev/null || { echo "bench/load.sh: sockperf missing (make deps)" >&2; exit 1; }
fi
command -v python3 >/dev/null || { echo "bench/load.sh: python3 missing" >&2; exit 1; }

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$@"; }

# start_server NAME ARGS... : sets SRV_PID and SRV_ADDR
start_server() {
  local name=$1; shift
  "$BIN" serve "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" &
  SRV_PID=$!; PIDS+=("$SRV_PID")
  for _ in $(seq 200); do
    if grep -q '^listening on ' "$OUT/$name.out" 2>/dev/null; then
      SRV_ADDR=$(awk '/^listening on /{print $3; exit}' "$OUT/$name.out"); return 0
    fi
    kill -0 "$SRV_PID" 2>/dev/null || { echo "server $name died: $(cat "$OUT/$name.err")" >&2; exit 1; }
    sleep 0.05
  done
  echo "server $name not ready" >&2; exit 1
}
stop_server() { kill -TERM "$SRV_PID"; wait "$SRV_PID" || { echo "server exited non-zero" >&2; exit 1; }; }

# CPU seconds (user+system) of a pid so far
cpu_of() { awk '{printf "%.2f\n", ($14+$15)/100}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS:/{print $2}' "/proc/$1/status"; }

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $SECS s per run"
echo

# ---------------------------------------------------------------- A
if want A; then
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sockperf sr --tcp -i 127.0.0.1 -p "$PORT" >"$OUT/sockperf-sr.log" 2>&1 &
SP=$!; PIDS+=("$SP")
sleep 0.5
# The 64-byte message sockperf's own client sends (header: seq 1, pong
# request, length 64; random payload), replayed verbatim by sockscope.
REQ='\x00\x00\x00\x00\x00\x00\x00\x01\x00\x03\x00\x00\x00\x40'
for _ in $(seq 50); do REQ+='\x5a'; done
echo "### A. round trip at 1 connection, both against sockperf's server (64-byte messages)"
echo
echo "| round | sockscope p50 RTT | sockscope p99 RTT | sockscope tx/s | sockperf p50 RTT | sockperf p99 RTT | sockperf tx/s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for r in 1 2 3; do
  "$BIN" -q load tcp-rr "127.0.0.1:$PORT" -c 1 -d "$SECS" --request "$REQ" --expect 64 --json "$OUT/a-$r.json"
  sockperf ping-pong --tcp -i 127.0.0.1 -p "$PORT" -t "$SECS" -m 64 >"$OUT/a-sockperf-$r.log" 2>&1
  # sockperf reports latency as RTT/2: doubled here to compare round trips.
  read -r sp50 sp99 sobs < <(python3 - "$OUT/a-sockperf-$r.log" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
p = dict((k, float(v)) for k, v in re.findall(r'percentile (\d+\.\d+) =\s+([\d.]+)', t))
obs = int(re.search(r'Total (\d+) observations', t).group(1))
print(2 * p['50.000'], 2 * p['99.000'], obs)
EOF
)
  python3 - "$OUT/a-$r.json" "$sp50" "$sp99" "$sobs" "$SECS" "$r" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); sp50, sp99, obs, secs, r = map(float, sys.argv[2:])
l = d['latency']
print(f"| {int(r)} | {l['p50_ns']/1e3:.1f} us | {l['p99_ns']/1e3:.1f} us | {d['rate_per_s']:.0f} | {sp50:.1f} us | {sp99:.1f} us | {obs/secs:.0f} |")
EOF
done
kill "$SP"; wait "$SP" 2>/dev/null || true
echo

fi
# ---------------------------------------------------------------- B
if want B; then
echo "### B. echo transports (100-byte requests and responses)"
echo
echo "| transport | workload | conns | gen threads | tx/s | p50 | p99 | errors | generator CPU/tx | server CPU/tx |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for T in threaded epoll uring; do
  start_server "echo-$T" echo --transport "$T" --req-size 100 --resp-size 100 --json "$OUT/echo-$T.json"
  # "workload conns generator-threads"; 2 threads is the default on 2 CPUs.
  for spec in "tcp-rr 1 1" "tcp-rr 64 2" "tcp-rr 64 1" "tcp-rr 1000 2" "tcp-rr 1000 1" "tcp-crr 1 1" "tcp-crr 16 2"; do
    set -- $spec
    c0=$(cpu_of "$SRV_PID")
    "$BIN" -q load "$1" "$SRV_ADDR" -c "$2" -t "$3" -d "$SECS" --req 100 --json "$OUT/b-$T-$1-$2-$3.json" --max-errors 1000000 || true
    c1=$(cpu_of "$SRV_PID")
    python3 - "$OUT/b-$T-$1-$2-$3.json" "$T" "$1" "$2" "$3" "$c0" "$c1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); t, w, c, th = sys.argv[2:6]; c0, c1 = map(float, sys.argv[6:8])
tx = d['transactions'] + d['errors']['unanswered_at_end']
l = d.get('latency') or {'p50_ns': 0, 'p99_ns': 0}
srv = (c1 - c0) * 1e6 / tx if tx else float('nan')
print(f"| {t} | {w} | {c} | {th} | {d['rate_per_s']:.0f} | {l['p50_ns']/1e3:.1f} us | {l['p99_ns']/1e3:.1f} us | {d['errors']['total']} | {d['generator']['cpu_us_per_transaction']:.2f} us | {srv:.2f} us |")
EOF
  done
  stop_server
done
echo
echo "generator CPU/tx is the whole load process (getrusage) over its run; server CPU/tx is the"
echo "server's utime+stime (/proc, 10 ms ticks) over the same run, divided by the transactions."
echo

fi
# ---------------------------------------------------------------- C
if want C; then
echo "### C. udp: highest rate the sink keeps up with (64-byte datagrams, default receive buffer)"
echo
echo "| rate asked | published | received | lost | loss % | kernel RcvbufErrors delta | one-way p50 | one-way p99 |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
start_server sink udp-sink --idle-timeout 0
best=0
for R in 25000 50000 75000 100000 150000 200000 300000 400000; do
  "$BIN" -q load udp "$SRV_ADDR" --rate "$R" -d 3 --size 64 --json "$OUT/c-$R.json" || true
  read -r lost line < <(python3 - "$OUT/c-$R.json" "$R" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); r = sys.argv[2]; u = d['udp']; s = u.get('sink') or {}
ow = u.get('one_way_latency') or {'p50_ns': 0, 'p99_ns': 0}
lost = u.get('lost', -1)
print(lost, f"| {r} | {u['published']} | {s.get('received', '?')} | {lost} | {100*(u.get('loss_ratio') or 0):.3f} | {u.get('kernel_rcvbuf_errors_delta', '?')} | {ow['p50_ns']/1e3:.1f} us | {ow['p99_ns']/1e3:.1f} us |")
EOF
)
  echo "$line"
  if [ "$lost" = "0" ]; then best=$R; else break; fi
done
stop_server
echo
echo "highest rate with no loss: $best datagrams/s"
echo

fi
# ---------------------------------------------------------------- D
if want D; then
echo "### D. idle memory per connection at 10,000 connections (server user RSS)"
echo
echo "| transport | RSS before | RSS with 10,000 idle connections | per connection |"
echo "|---|---:|---:|---:|"
for T in threaded epoll uring; do
  start_server "mem-$T" echo --transport "$T"
  sleep 0.3
  r0=$(rss_kb "$SRV_PID")
  # 10,000 connections kept open, 20 transactions/s in total: idle. Opened
  # at 2,000/s so the thread-per-connection accept loop keeps up with the
  # listen backlog (a connection that overflows it never reaches accept()).
  "$BIN" -q load tcp-rr "$SRV_ADDR" -c 10000 -t 2 -d 30 --connect-rate 2000 --rate 20 --timeout 20 --max-errors 1000000 >/dev/null 2>&1 &
  LP=$!; PIDS+=("$LP")
  for _ in $(seq 250); do
    n=$(ls "/proc/$SRV_PID/fd" | wc -l)
    [ "$n" -ge 10000 ] && break
    sleep 0.1
  done
  sleep 2
  r1=$(rss_kb "$SRV_PID"); n=$(ls "/proc/$SRV_PID/fd" | wc -l)
  kill -INT "$LP"; wait "$LP" 2>/dev/null || true
  stop_server
  awk -v t="$T" -v a="$r0" -v b="$r1" -v n="$n" 'BEGIN { printf "| %s | %d KiB | %d KiB (%d fds) | %.2f KiB |\n", t, a, b, n, (b-a)/10000 }'
done
fi

# ---------------------------------------------------------------- N
if want N; then
ROUNDS=${ROUNDS:-3}
NEPER_FLOWS=${NEPER_FLOWS:-1 64 512}
# BEFORE=path/to/another/sockscope: runs it too, in the same rounds (a
# before/after comparison of the generator against the same neper runs).
BEFORE=${BEFORE:-}
if [ -n "${NEPER:-}" ]; then
  [ -x "$NEPER" ] || { echo "bench/load.sh: NEPER=$NEPER is not an executable" >&2; exit 1; }
else
  NEPER=target/neper/tcp_rr
  # Built out of the source tree (make writes its objects next to the
  # sources); cp -a keeps the sources' times, so a second run rebuilds
  # nothing.
  mkdir -p target/neper
  cp -a third_party/neper/. target/neper/
  make -s -C target/neper tcp_rr >"$OUT/neper-build.log" 2>&1 ||
    { echo "bench/load.sh: building neper failed: see $OUT/neper-build.log" >&2; exit 1; }
fi
# load_rr NAME BIN PORT FLOWS ROUND: one sockscope run; prints "tx/s tx cpu_s p50_us errors".
load_rr() {
  local j=$OUT/n-$4-$5.$1.json cpu
  cpu=$(cpu_run "$OUT/n-$4-$5.$1.log" "$2" -q load tcp-rr "127.0.0.1:$3" -c "$4" -t 1 -d "$SECS" --req 1 --resp 1 --json "$j")
  # Every transaction the process made (warm-up and drain included): the
  # CPU is the whole process's.
  json "$j" "'%f %d $cpu %f %d' % (d['rate_per_s'], d['transactions'] + d['warmup_transactions'] + d['errors'].get('answered_after_end', 0), d['latency']['p50_ns'] / 1e3, d['errors']['total'])"
}
ROWS=$OUT/n-rows.txt
: >"$ROWS"
echo "### N. tcp-rr against neper's tcp_rr server (1-byte request and response, one client thread, one server thread)"
echo
echo "| flows | round | client | tx/s | CPU/tx | tx/s vs neper | CPU/tx vs neper | p50 | errors |"
echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|"
for F in $NEPER_FLOWS; do
  for r in $(seq "$ROUNDS"); do
    # One server per round: it serves any data connection, and exits once
    # neper's client (which speaks its control protocol) is done, so the
    # sockscope runs, which do not, go first.
    CP=$(free_port); DP=$(free_port)
    "$NEPER" --logtostderr -C "$CP" -P "$DP" -T 1 >"$OUT/n-srv-$F-$r.log" 2>&1 &
    NS=$!; PIDS+=("$NS")
    for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/"$DP") 2>/dev/null && break; sleep 0.05; done
    # With BEFORE, the two sockscope builds take turns going first.
    b=
    if [ -n "$BEFORE" ] && [ $((r % 2)) -eq 0 ]; then b=$(load_rr before "$BEFORE" "$DP" "$F" "$r"); fi
    s=$(load_rr sockscope "$BIN" "$DP" "$F" "$r")
    if [ -n "$BEFORE" ] && [ $((r % 2)) -eq 1 ]; then b=$(load_rr before "$BEFORE" "$DP" "$F" "$r"); fi
    cn=$(cpu_run "$OUT/n-$F-$r.neper.log" "$NEPER" --logtostderr -c -H 127.0.0.1 -C "$CP" -P "$DP" -F "$F" -T 1 -l "$SECS")
    wait "$NS" || { echo "neper server exited non-zero: $OUT/n-srv-$F-$r.log" >&2; exit 1; }
    python3 - "$OUT/n-$F-$r.neper.log" "$cn" "$F" "$r" "$s" "$b" "$ROWS" <<'EOF'
import re, sys
log, cn, f, r, s, b, rows = sys.argv[1:]
kv = dict(re.findall(r'^(\w+)=(\S+)$', open(log).read(), re.M))
ntx, nrate = int(kv['num_transactions']), float(kv['throughput'])
ncpu = 1e6 * float(cn) / ntx
out = open(rows, 'a')
print(f"| {f} | {r} | neper | {nrate:.0f} | {ncpu:.2f} us | 1 | 1 | | |")
for name, v in (('sockscope', s), ('before', b)):
    if not v:
        continue
    rate, tx, cpu, p50, errs = v.split()
    scpu = 1e6 * float(cpu) / int(tx)
    rt, rc = float(rate) / nrate, scpu / ncpu
    print(f"| {f} | {r} | {name} | {float(rate):.0f} | {scpu:.2f} us | {rt:.2f} | {rc:.2f} | {float(p50):.1f} us | {errs} |")
    out.write(f"{f} {name} {rt} {rc}\n")
EOF
  done
done
echo
python3 - "$ROWS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
keys = sorted({(int(f), n) for f, n, _, _ in rows})
print("Medians over the rounds (each round's ratio against neper in the same round):")
print()
print("| flows | client | tx/s vs neper | CPU/tx vs neper |")
print("|---:|---|---:|---:|")
for f, n in keys:
    rt = [float(a) for ff, nn, a, _ in rows if int(ff) == f and nn == n]
    rc = [float(c) for ff, nn, _, c in rows if int(ff) == f and nn == n]
    print(f"| {f} | {n} | {statistics.median(rt):.2f} ({min(rt):.2f}-{max(rt):.2f}) | {statistics.median(rc):.2f} ({min(rc):.2f}-{max(rc):.2f}) |")
EOF
echo
echo "tx/s: sockscope's measured window (the report's rate_per_s), neper's throughput line."
echo "CPU/tx: the client process's user+system CPU (rusage) over every transaction it made."
fi
