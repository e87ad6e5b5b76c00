#!/usr/bin/env bash
# Compares two builds of sockscope as load generators (docs/benchmarks.md,
# "load driver refactor"): did a change to src/load/ make the generator
# cost more? Wall-clock ratios on a shared 2-CPU VM swing by 3x between runs
# of the same binary, so the verdict rests on what does not depend on the
# machine's load:
#   S. syscalls per run (strace -c) for a count run: the kernel work, which
#      must be identical;
#   I. user-space instructions per transaction (valgrind callgrind, all
#      threads), the marginal cost between -n 10000 and -n 40000 so start-up
#      is left out; median of REPS interleaved runs;
#   W. interleaved wall-clock runs (tx/s, generator CPU/tx), medians, for
#      completeness: read them with their spread.
#
#   bench/load_ab.sh BEFORE_BIN AFTER_BIN     (e.g. a copy of the old binary)
#   SECTIONS="S I" REPS=5 ROUNDS=9 SECS=2 bench/load_ab.sh OLD NEW
#
# The servers (sockscope's own `serve echo --transport epoll` and sockperf's)
# are run from BEFORE_BIN for both. Only loopback is used; every process
# started here is stopped on exit. Needs strace, valgrind, sockperf, python3.
set -euo pipefail
BEFORE=$(realpath "$1"); AFTER=$(realpath "$2")
SECTIONS=${SECTIONS:-S I W}
REPS=${REPS:-5}; ROUNDS=${ROUNDS:-9}; SECS=${SECS:-2}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
cd "$(dirname "$0")/.."
OUT=target/bench/load_ab
mkdir -p "$OUT"
for t in strace valgrind sockperf python3; do
  command -v "$t" >/dev/null || { echo "bench/load_ab.sh: $t missing (make deps)" >&2; exit 1; }
done

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

"$BEFORE" serve echo --transport epoll --req-size 100 --resp-size 100 >"$OUT/echo.out" 2>"$OUT/echo.err" &
PIDS+=($!)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sockperf sr --tcp -i 127.0.0.1 -p "$PORT" >"$OUT/sockperf-sr.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q '^listening on ' "$OUT/echo.out" 2>/dev/null && break; sleep 0.05; done
ECHO=$(awk '/^listening on /{print $3; exit}' "$OUT/echo.out")
[ -n "$ECHO" ] || { echo "bench/load_ab.sh: echo server not ready" >&2; exit 1; }
sleep 0.5
# sockperf's own 64-byte ping-pong message (as in bench/load.sh section A).
REQ='\x00\x00\x00\x00\x00\x00\x00\x01\x00\x03\x00\x00\x00\x40'
for _ in $(seq 50); do REQ+='\x5a'; done

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "before: $BEFORE"
echo "after:  $AFTER"
echo

# "name|load arguments" (without -n/-d)
LOADS="sockperf sr, tcp-rr -c 1 (--request/--expect 64)|tcp-rr 127.0.0.1:$PORT -c 1 -t 1 --request '$REQ' --expect 64
echo, tcp-rr -c 1|tcp-rr $ECHO -c 1 -t 1 --req 100
echo, tcp-rr -c 8 --pipeline 4 --verify|tcp-rr $ECHO -c 8 -t 1 --req 100 --pipeline 4 --verify
echo, tcp-crr -c 4|tcp-crr $ECHO -c 4 -t 1 --req 100"

if want S; then
  echo "### S. syscalls of a count run (strace -f -c; equal but for epoll_pwait2, which follows timing)"
  echo
  echo "| load | before | after |"
  echo "|---|---|---|"
  while IFS='|' read -r name args; do
    for tag in before after; do
      bin=$BEFORE; [ "$tag" = after ] && bin=$AFTER
      eval strace -f -c -o "$OUT/strace.$tag" "$bin" -q load "$args" -n 2000 --max-errors 1000000
      # name=calls for the socket-path calls, sorted (strace -c columns:
      # % time, seconds, usecs/call, calls, [errors], syscall)
      declare "S_$tag=$(awk 'NR>2 && $NF!="total" && $0 !~ /^-/ {print $NF"="$4}' "$OUT/strace.$tag" \
        | grep -E '^(socket|connect|bind|setsockopt|getsockopt|sendto|recvfrom|close|epoll_[a-z0-9]+)=' | sort | tr '\n' ' ')"
    done
    echo "| $name | $S_before | $S_after |"
  done <<<"$LOADS"
  echo
fi

if want I; then
  echo "### I. user-space instructions per transaction (callgrind, marginal -n 10000 -> 40000, median of $REPS)"
  echo
  echo "| load | before | after | after/before | all before | all after |"
  echo "|---|---:|---:|---:|---|---|"
  ir() { eval valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 | awk '/Collected/{print $4}'; }
  while IFS='|' read -r name args; do
    rb=""; ra=""
    for _ in $(seq "$REPS"); do
      for tag in before after; do
        bin=$BEFORE; [ "$tag" = after ] && bin=$AFTER
        a=$(ir "$bin" -q load "$args" -n 10000 --max-errors 1000000)
        b=$(ir "$bin" -q load "$args" -n 40000 --max-errors 1000000)
        if [ "$tag" = before ]; then rb+="$(( (b - a) / 30000 )) "; else ra+="$(( (b - a) / 30000 )) "; fi
      done
    done
    python3 - "$name" "$rb" "$ra" <<'EOF'
import statistics, sys
name, b, a = sys.argv[1], list(map(int, sys.argv[2].split())), list(map(int, sys.argv[3].split()))
mb, ma = statistics.median(b), statistics.median(a)
print(f"| {name} | {mb:.0f} | {ma:.0f} | {ma / mb:.3f} | {' '.join(map(str, b))} | {' '.join(map(str, a))} |")
EOF
  done <<<"$LOADS"
  echo
fi

if want W; then
  echo "### W. wall clock, $ROUNDS interleaved rounds of $SECS s (medians; min-max in brackets)"
  echo
  python3 - "$BEFORE" "$AFTER" "$ROUNDS" "$SECS" "$ECHO" "$PORT" "$REQ" "$OUT" <<'EOF'
import json, statistics, subprocess, sys
before, after, rounds, secs, echo, port, req, out = sys.argv[1:]
loads = {
    'sockperf sr, tcp-rr -c 1 (64 B)': ['tcp-rr', f'127.0.0.1:{port}', '-c', '1', '--request', req, '--expect', '64'],
    'echo, tcp-rr -c 1': ['tcp-rr', echo, '-c', '1', '-t', '1', '--req', '100'],
    'echo, tcp-rr -c 64 -t 2': ['tcp-rr', echo, '-c', '64', '-t', '2', '--req', '100'],
    'echo, tcp-rr -c 64 --pipeline 4 --verify': ['tcp-rr', echo, '-c', '64', '-t', '1', '--req', '100', '--pipeline', '4', '--verify'],
    'echo, tcp-rr -c 64 --rate 20000': ['tcp-rr', echo, '-c', '64', '-t', '1', '--req', '100', '--rate', '20000'],
    'echo, tcp-crr -c 16 -t 2': ['tcp-crr', echo, '-c', '16', '-t', '2', '--req', '100'],
}
res = {k: {'before': [], 'after': []} for k in loads}
for r in range(int(rounds)):
    for name, args in loads.items():
        order = [('before', before), ('after', after)]
        for tag, b in (order if r % 2 == 0 else order[::-1]):
            j = f'{out}/w.json'
            subprocess.run([b, '-q', 'load', *args, '-d', secs, '--max-errors', '1000000', '--json', j],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            d = json.load(open(j))
            res[name][tag].append((d['rate_per_s'], d['generator']['cpu_us_per_transaction']))
json.dump(res, open(f'{out}/wall.json', 'w'), indent=1)
med = statistics.median
print('| load | tx/s before | tx/s after | after/before | gen CPU/tx before | gen CPU/tx after | after/before |')
print('|---|---:|---:|---:|---:|---:|---:|')
for name in loads:
    b, a = res[name]['before'], res[name]['after']
    col = lambda xs, i, f: f'{f(med([x[i] for x in xs]))} [{f(min(x[i] for x in xs))}-{f(max(x[i] for x in xs))}]'
    tb, ta = med([x[0] for x in b]), med([x[0] for x in a])
    cb, ca = med([x[1] for x in b]), med([x[1] for x in a])
    print(f"| {name} | {col(b, 0, lambda v: f'{v:.0f}')} | {col(a, 0, lambda v: f'{v:.0f}')} | {ta / tb:.2f} "
          f"| {col(b, 1, lambda v: f'{v:.1f}')} us | {col(a, 1, lambda v: f'{v:.1f}')} us | {ca / cb:.2f} |")
EOF
  echo
fi
