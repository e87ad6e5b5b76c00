#!/usr/bin/env bash
# Relay benchmark (docs/benchmarks.md): sockscope load tcp-rr through a relay
# to `sockscope serve echo --transport epoll`, for the relay's userspace,
# splice and sockmap modes and for HAProxy in TCP mode (the peer), in the
# same run; plus the echo server reached directly, as the ceiling.
#
#   bench/relay.sh [SECS_PER_RUN] [ROUNDS]      (defaults: 5 s, 2 rounds)
#
# 1 KB requests and responses at 10, 100 and 1000 connections, and a bulk
# exchange of 64 KB messages on 4 connections. Per run: transactions/s,
# p50/p99, the relay process's CPU per transaction, and the whole machine's
# busy CPU per transaction (/proc/stat: it includes the kernel workers that
# carry sockmap redirects, which the relay process's own CPU does not).
# Only loopback is used; every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECS=${1:-5}
ROUNDS=${2:-2}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/relay
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "bench/relay.sh: build first ($BIN missing)" >&2; exit 1; }
command -v haproxy >/dev/null || { echo "bench/relay.sh: haproxy missing (make deps)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "bench/relay.sh: needs root (sockmap)" >&2; exit 1; }

# HAProxy sizes its descriptor table from maxconn (two per connection,
# plus a few): keep maxconn within what the hard limit allows.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
HAPROXY_MAXCONN=$(( ($(ulimit -Hn) - 100) / 2 ))
[ "$HAPROXY_MAXCONN" -gt 20000 ] && HAPROXY_MAXCONN=20000

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

wait_line() { # FILE PID -> prints the address of the ready line
  for _ in $(seq 200); do
    if grep -q '^listening on ' "$1" 2>/dev/null; then awk '/^listening on /{print $3; exit}' "$1"; return 0; fi
    kill -0 "$2" 2>/dev/null || { echo "process died: $(cat "${1%.out}.err" 2>/dev/null)" >&2; exit 1; }
    sleep 0.05
  done
  echo "not ready" >&2; exit 1
}
cpu_of() { awk '{print $14+$15}' "/proc/$1/stat"; }                # ticks
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }          # ticks, all CPUs

"$BIN" serve echo --transport epoll >"$OUT/echo.out" 2>"$OUT/echo.err" &
ECHO=$!; PIDS+=("$ECHO")
UP=$(wait_line "$OUT/echo.out" "$ECHO")

start_relay() { # NAME -> sets RP, RADDR
  case $1 in
    direct) RP=$ECHO; RADDR=$UP ;;
    haproxy)
      local port; port=$(free_port)
      cat >"$OUT/haproxy.cfg" <<EOF
global
    maxconn $HAPROXY_MAXCONN
    nbthread $(nproc)
defaults
    mode tcp
    timeout connect 5s
    timeout client 120s
    timeout server 120s
frontend f
    bind 127.0.0.1:$port
    default_backend b
backend b
    server s1 $UP
EOF
      haproxy -db -f "$OUT/haproxy.cfg" >"$OUT/haproxy.log" 2>&1 &
      RP=$!; PIDS+=("$RP"); RADDR=127.0.0.1:$port
      for _ in $(seq 100); do
        python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$port),0.2).close()" 2>/dev/null && return 0
        kill -0 "$RP" 2>/dev/null || { echo "haproxy died: $(cat "$OUT/haproxy.log")" >&2; exit 1; }
        sleep 0.05
      done
      echo "haproxy not ready" >&2; exit 1 ;;
    *)
      "$BIN" serve relay --upstream "$UP" --mode "$1" --strict >"$OUT/relay.out" 2>"$OUT/relay.err" &
      RP=$!; PIDS+=("$RP"); RADDR=$(wait_line "$OUT/relay.out" "$RP") ;;
  esac
}
stop_relay() { # NAME
  case $1 in
    direct) ;;
    haproxy) kill "$RP"; wait "$RP" 2>/dev/null || true ;;
    *) kill -TERM "$RP"; wait "$RP" || { echo "relay exited non-zero: $(cat "$OUT/relay.err")" >&2; exit 1; } ;;
  esac
}

rm -f "$OUT/rows.tsv"
echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; haproxy $(haproxy -v | head -1 | awk '{print $3}'); $SECS s per run, $ROUNDS rounds"
echo
echo "| round | relay | workload | conns | tx/s | p50 | p99 | errors | relay CPU/tx | machine CPU/tx |"
echo "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"
HZ=$(getconf CLK_TCK)
for r in $(seq "$ROUNDS"); do
  for R in direct haproxy userspace splice sockmap; do
    start_relay "$R"
    for spec in "1k 10" "1k 100" "1k 1000" "64k 4"; do
      set -- $spec
      size=$([ "$1" = 1k ] && echo 1024 || echo 65536)
      j="$OUT/r$r-$R-$1-$2.json"
      c0=$(cpu_of "$RP"); b0=$(busy)
      "$BIN" -q load tcp-rr "$RADDR" -c "$2" -d "$SECS" --req "$size" --connect-rate 2000 --warmup 1 --max-errors 1000000 --json "$j" || true
      c1=$(cpu_of "$RP"); b1=$(busy)
      python3 - "$j" "$r" "$R" "$1" "$2" "$c0" "$c1" "$b0" "$b1" "$HZ" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); r, name, w, c = sys.argv[2:6]
c0, c1, b0, b1, hz = map(float, sys.argv[6:11])
# CPU is sampled around the whole run (warm-up included): divide by every
# transaction completed in it.
tx = d['transactions'] + d['errors']['unanswered_at_end'] + d['warmup_transactions']
l = d.get('latency') or {'p50_ns': 0, 'p99_ns': 0}
relay = float('nan') if name == 'direct' else (c1 - c0) / hz * 1e6 / tx
machine = (b1 - b0) / hz * 1e6 / tx
rs = '-' if name == 'direct' else f"{relay:.2f} us"
print(f"| {r} | {name} | {w} | {c} | {d['rate_per_s']:.0f} | {l['p50_ns']/1e3:.1f} us | {l['p99_ns']/1e3:.1f} us | {d['errors']['total']} | {rs} | {machine:.2f} us |")
with open(sys.argv[1].rsplit('/', 1)[0] + '/rows.tsv', 'a') as f:
    f.write(f"{name}\t{w}\t{c}\t{d['rate_per_s']}\t{l['p50_ns']}\t{l['p99_ns']}\t{relay}\t{machine}\n")
EOF
    done
    stop_relay "$R"
  done
done

echo
echo "Medians over the rounds:"
echo
python3 - "$OUT/rows.tsv" <<'EOF'
import sys, statistics
from collections import defaultdict
rows = defaultdict(list)
for line in open(sys.argv[1]):
    name, w, c, *vals = line.rstrip('\n').split('\t')
    rows[(name, w, int(c))].append([float(v) for v in vals])
order = ['direct', 'haproxy', 'userspace', 'splice', 'sockmap']
print("| workload | conns | relay | tx/s | vs haproxy | vs userspace | p50 | p99 | relay CPU/tx | machine CPU/tx |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
def med(k, i):
    return statistics.median(r[i] for r in rows[k])
for (w, c) in sorted({(k[1], k[2]) for k in rows}, key=lambda x: (x[0] != '1k', x[1])):
    for name in order:
        k = (name, w, c)
        if k not in rows:
            continue
        tx = med(k, 0)
        hp = med(('haproxy', w, c), 0) if ('haproxy', w, c) in rows else float('nan')
        us = med(('userspace', w, c), 0) if ('userspace', w, c) in rows else float('nan')
        rc = med(k, 3)
        rcs = '-' if rc != rc else f"{rc:.2f} us"
        print(f"| {w} | {c} | {name} | {tx:.0f} | {100*(tx/hp-1):+.0f}% | {100*(tx/us-1):+.0f}% | {med(k,1)/1e3:.0f} us | {med(k,2)/1e3:.0f} us | {rcs} | {med(k,4):.2f} us |")
EOF

# Where the CPU goes: per-thread CPU (/proc/*/task/*/stat) grouped by name,
# over one 1 KB / 100-connection run through each relay mode. Kernel
# workers (kworker) carry sockmap's redirects and belong to no process.
snapshot() {
  python3 - <<'EOF'
import os
tot = {}
for p in os.listdir('/proc'):
    if not p.isdigit():
        continue
    try:
        for t in os.listdir(f'/proc/{p}/task'):
            st = open(f'/proc/{p}/task/{t}/stat').read()
            comm = st[st.index('(') + 1:st.rindex(')')]
            f = st[st.rindex(')') + 2:].split()
            key = comm.split('/')[0] if comm.startswith(('kworker', 'ksoftirqd')) else comm
            tot[key] = tot.get(key, 0) + int(f[11]) + int(f[12])
    except (OSError, ValueError):
        pass
for k, v in tot.items():
    print(f"{k}\t{v}")
EOF
}
echo
echo "CPU seconds by thread name during $SECS s of 1 KB tcp-rr at 100 connections:"
echo
echo "| relay | load generator | echo server | relay loops | kernel workers (kworker) | ksoftirqd | tx/s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for R in userspace sockmap; do
  start_relay "$R"
  snapshot >"$OUT/cpu0.tsv"
  "$BIN" -q load tcp-rr "$RADDR" -c 100 -d "$SECS" --req 1024 --max-errors 1000000 --json "$OUT/cpu-$R.json" || true
  snapshot >"$OUT/cpu1.tsv"
  stop_relay "$R"
  python3 - "$OUT/cpu0.tsv" "$OUT/cpu1.tsv" "$R" "$HZ" "$OUT/cpu-$R.json" <<'EOF'
import json, sys
a = dict(l.rstrip('\n').split('\t') for l in open(sys.argv[1]))
b = dict(l.rstrip('\n').split('\t') for l in open(sys.argv[2]))
hz = float(sys.argv[4])
d = {k: (int(v) - int(a.get(k, 0))) / hz for k, v in b.items()}
load = json.load(open(sys.argv[5]))
rate = load['rate_per_s']
# The load generator has exited by the second snapshot: its own getrusage.
gen = load['generator']['user_cpu_s'] + load['generator']['system_cpu_s']
echo = sum(v for k, v in d.items() if k.startswith('ss-epoll'))
relay = sum(v for k, v in d.items() if k.startswith('ss-relay'))
print(f"| {sys.argv[3]} | {gen:.2f} | {echo:.2f} | {relay:.2f} | {d.get('kworker', 0):.2f} | {d.get('ksoftirqd', 0):.2f} | {rate:.0f} |")
EOF
done
