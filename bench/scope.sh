#!/usr/bin/env bash
# Scope modes' cost: a getppid loop (bench/getppid_loop.c, timed inside the
# process) traced in tree mode (`trace -- loop`) and under each scope
# (`--comm`, `--cgroup`, `--system`, and `--comm --by comm`), plus the
# collateral cost on an UNTRACED loop (another name, outside the cgroup)
# running while each tracer is attached. Interleaved rounds; prints a
# markdown table of medians: ns per call, the traced overhead (minus the
# untraced median of the same run) and its ratio to tree mode's.
#
#   bench/scope.sh [ROUNDS] [CALLS]     defaults: 5 rounds, 1000000 calls
#
# Needs root (BPF) and a cgroup v2 mount.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
CALLS=${2:-1000000}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench
mkdir -p "$OUT"
[ "$(id -u)" -eq 0 ] || { echo "bench/scope.sh: needs root for BPF" >&2; exit 1; }
[ -x "$BIN" ] || { echo "bench/scope.sh: build first ($BIN missing)" >&2; exit 1; }
gcc -O2 -o "$OUT/ssloop" bench/getppid_loop.c
cp "$OUT/ssloop" "$OUT/ssother"
V2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/self/mounts)
[ -n "$V2" ] || { echo "bench/scope.sh: no cgroup v2 mount" >&2; exit 1; }
CG="$V2/sockscope-bench-$$"
mkdir "$CG"
TRACER=
cleanup() {
  [ -n "$TRACER" ] && kill -INT "$TRACER" 2>/dev/null && wait "$TRACER" 2>/dev/null || true
  [ -d "$CG" ] && { for p in $(cat "$CG/cgroup.procs" 2>/dev/null); do echo "$p" > "$V2/cgroup.procs"; done; rmdir "$CG"; } || true
}
trap cleanup EXIT

ns() { # CMD...: run it, print the loop's ns_per_call
  local line
  line=$("$@" 2>&1 | grep -o 'ns_per_call=[0-9.]*' | tail -1) || true
  [ -n "$line" ] || { echo "bench: no result from: $*" >&2; exit 1; }
  echo "${line#ns_per_call=}"
}
in_cg() { sh -c 'echo $$ > "$0/cgroup.procs"; exec "$@"' "$CG" "$@"; }

# start_tracer ARGS...: sockscope trace ARGS in the background, returns
# once its window is open.
start_tracer() {
  local log="$OUT/scope-tracer.log"
  "$BIN" trace "$@" --duration 600 > /dev/null 2> "$log" &
  TRACER=$!
  for _ in $(seq 200); do
    grep -q "sockscope: tracing\|attached to pid" "$log" && return 0
    sleep 0.05
  done
  echo "bench: tracer did not start: $(cat "$log")" >&2; exit 1
}
stop_tracer() { kill -INT "$TRACER"; wait "$TRACER" || true; TRACER=; }

declare -A R
add() { R[$1]="${R[$1]:-} $2"; }
for r in $(seq "$ROUNDS"); do
  add untraced "$(ns "$OUT/ssloop" "$CALLS")"
  add tree "$(ns "$BIN" trace -q -- "$OUT/ssloop" "$CALLS")"
  # Collateral in tree mode: the tracer follows an idle process.
  sleep 600 & IDLE=$!
  start_tracer -p "$IDLE"
  add tree_collateral "$(ns "$OUT/ssother" "$CALLS")"
  stop_tracer; kill "$IDLE"; wait "$IDLE" 2>/dev/null || true
  start_tracer --comm ssloop
  add comm "$(ns "$OUT/ssloop" "$CALLS")"
  add comm_collateral "$(ns "$OUT/ssother" "$CALLS")"
  stop_tracer
  start_tracer --comm ssloop --by comm
  add comm_by_comm "$(ns "$OUT/ssloop" "$CALLS")"
  stop_tracer
  start_tracer --cgroup "$CG"
  add cgroup "$(ns in_cg "$OUT/ssloop" "$CALLS")"
  add cgroup_collateral "$(ns "$OUT/ssother" "$CALLS")"
  stop_tracer
  start_tracer --system
  add system "$(ns "$OUT/ssloop" "$CALLS")"
  stop_tracer
  echo "round $r done" >&2
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
base=$(echo "${R[untraced]}" | median)
tree=$(echo "${R[tree]}" | median)
echo "machine: $(nproc) CPUs, $(uname -r); $ROUNDS interleaved rounds of $CALLS getppid calls"
echo
echo "| configuration | median ns/call | minus untraced | ratio to tree mode's |"
echo "|---|---|---|---|"
for k in untraced tree comm comm_by_comm cgroup system tree_collateral comm_collateral cgroup_collateral; do
  m=$(echo "${R[$k]}" | median)
  over=$(awk -v m="$m" -v b="$base" 'BEGIN {printf "%.1f", m - b}')
  ratio=$(awk -v m="$m" -v b="$base" -v t="$tree" 'BEGIN {if (t - b > 0) printf "%.2f", (m - b) / (t - b); else print "-"}')
  echo "| $k | $m | $over | $ratio |"
done
