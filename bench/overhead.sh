#!/usr/bin/env bash
# Tracer overhead benchmark: a getppid loop of 1,000,000 calls timed inside
# the process (bench/getppid_loop.c), under each tracer, interleaved over
# several rounds so machine noise hits every configuration alike. Prints a
# markdown table of median ns/call and the ratio to the untraced median
# measured in the same run.
#
#   bench/overhead.sh [ROUNDS] [CALLS] [SLOW_CALLS]
#       defaults: 7 rounds, 1000000 calls; strace and perf trace run
#       SLOW_CALLS (default 20000) calls, because at ~100 us per call under
#       ptrace on this VM a million calls would take minutes per round. The
#       figure is per call either way.
#
# Needs root (BPF), strace, and perf (linux-perf) for the perf trace row.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-7}
CALLS=${2:-1000000}
SLOW_CALLS=${3:-20000}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench
mkdir -p "$OUT"
gcc -O2 -o "$OUT/getppid_loop" bench/getppid_loop.c
LOOP="$OUT/getppid_loop"

[ "$(id -u)" -eq 0 ] || { echo "bench/overhead.sh: needs root for BPF" >&2; exit 1; }
[ -x "$BIN" ] || { echo "bench/overhead.sh: build first ($BIN missing)" >&2; exit 1; }

ns() { # run a command that ends with the loop; print its ns_per_call
  local line
  line=$("$@" | grep -o 'ns_per_call=[0-9.]*' | tail -1) || true
  [ -n "$line" ] || { echo "bench: no result from: $*" >&2; exit 1; }
  echo "${line#ns_per_call=}"
}

have_perf=0
if perf trace -s -o /dev/null -- true >/dev/null 2>&1; then have_perf=1; fi
# Context switches: `perf bench sched pipe` (two tasks ping-ponging over a
# pipe, two switches and four syscalls per round trip), untraced and while
# sockscope traces another process. Every context switch on the machine
# runs the exit-tail program (sched_switch) while sockscope is attached.
PIPE_LOOPS=${PIPE_LOOPS:-50000}
have_pipe=0
if perf bench sched pipe -l 10 >/dev/null 2>&1; then have_pipe=1; fi
pipe_ns() { # ns per pipe round trip
  perf bench sched pipe -l "$PIPE_LOOPS" 2>/dev/null | awk '/usecs\/op/ {printf "%.1f", $1 * 1000}'
}

declare -A R
configs=(untraced count_only latency strace collateral)
[ "$have_perf" -eq 1 ] && configs+=(perf_trace)

# The collateral row: an untraced loop while sockscope traces another,
# idle process (every process pays the syscall tracepoint while attached).
sleep 3600 & IDLE=$!
trap 'kill $IDLE 2>/dev/null || true' EXIT

for r in $(seq "$ROUNDS"); do
  R[untraced]+=" $(ns "$LOOP" "$CALLS")"
  R[count_only]+=" $(ns "$BIN" -q trace --count-only -- "$LOOP" "$CALLS")"
  R[latency]+=" $(ns "$BIN" -q trace -- "$LOOP" "$CALLS")"
  R[strace]+=" $(ns strace -f -c -o /dev/null -- "$LOOP" "$SLOW_CALLS")"
  if [ "$have_perf" -eq 1 ]; then
    R[perf_trace]+=" $(ns perf trace -s -o /dev/null -- "$LOOP" "$SLOW_CALLS")"
  fi
  "$BIN" -q trace -p "$IDLE" --duration 30 & TR=$!
  # wait until its programs are attached (it holds prog fds)
  for _ in $(seq 100); do
    ls -l /proc/$TR/fd 2>/dev/null | grep -q 'bpf-prog' && break
    sleep 0.05
  done
  sleep 0.2
  R[collateral]+=" $(ns "$LOOP" "$CALLS")"
  [ "$have_pipe" -eq 1 ] && R[pipe_collateral]+=" $(pipe_ns)"
  kill -INT "$TR"; wait "$TR" || true
  [ "$have_pipe" -eq 1 ] && R[pipe_untraced]+=" $(pipe_ns)"
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
base=$(echo "${R[untraced]}" | median)

describe() {
  case $1 in
    untraced) echo "untraced";;
    count_only) echo "sockscope trace --count-only";;
    latency) echo "sockscope trace (latency, default)";;
    strace) echo "strace -f -c";;
    perf_trace) echo "perf trace -s";;
    collateral) echo "untraced, while sockscope traces another process";;
  esac
}

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"
echo "getppid x $CALLS (strace, perf trace: x $SLOW_CALLS), median of $ROUNDS interleaved rounds"
echo
echo "| configuration | ns/call (median) | ratio to untraced | added ns/call | all rounds |"
echo "|---|---:|---:|---:|---|"
for c in "${configs[@]}"; do
  m=$(echo "${R[$c]}" | median)
  awk -v d="$(describe "$c")" -v m="$m" -v b="$base" -v all="${R[$c]}" \
    'BEGIN { printf "| %s | %.1f | %.2fx | %.1f | %s |\n", d, m, m/b, m-b, all }'
done
lat=$(echo "${R[latency]}" | median); st=$(echo "${R[strace]}" | median)
awk -v l="$lat" -v s="$st" -v b="$base" \
  'BEGIN { printf "\nadded cost per call: strace / sockscope latency mode = %.0fx\n", (s-b)/(l-b) }'

if [ "$have_pipe" -eq 1 ]; then
  pb=$(echo "${R[pipe_untraced]}" | median)
  echo
  echo "perf bench sched pipe -l $PIPE_LOOPS (ns per round trip: 2 context switches, 4 syscalls)"
  echo
  echo "| configuration | ns/round trip (median) | ratio to untraced | added ns | all rounds |"
  echo "|---|---:|---:|---:|---|"
  for c in pipe_untraced pipe_collateral; do
    m=$(echo "${R[$c]}" | median)
    d="untraced"; [ "$c" = pipe_collateral ] && d="untraced, while sockscope traces another process"
    awk -v d="$d" -v m="$m" -v b="$pb" -v all="${R[$c]}" \
      'BEGIN { printf "| %s | %.1f | %.2fx | %.1f | %s |\n", d, m, m/b, m-b, all }'
  done
fi
