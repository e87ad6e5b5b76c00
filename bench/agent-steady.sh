#!/usr/bin/env bash
# The node agent's own CPU once it has settled (issue 41; docs/benchmarks.md,
# "The node agent's cost per service"): bench/agent.sh starts a fresh agent
# for each 60 s run, so its rows include what an agent does once (naming
# the node's binaries, the kernel's symbols); an agent runs for days. Here
# one agent, deploy/k8s/agent-daemonset.yaml's arguments (the pod's address
# replaced by 127.0.0.1 and a free port), runs beside nginx (one worker) at
# saturation under wrk -t1 -c32 for WARM + SECS seconds; its CPU is read per
# thread (/proc/PID/task/TID/schedstat) over the last SECS only, with the
# requests nginx answered and the stack samples the agent took over them.
#
#   bench/agent-steady.sh [SECS] [WARM]     (defaults 120 and 60)
#
# Only loopback is used; every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECS=${1:-120}
WARM=${2:-60}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/agent-steady
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$BIN" ] || { echo "bench/agent-steady.sh: build first ($BIN missing)" >&2; exit 1; }
for t in wrk curl python3; do
  command -v "$t" >/dev/null || { echo "bench/agent-steady.sh: $t missing (make deps)" >&2; exit 1; }
done
[ -x /usr/sbin/nginx ] || { echo "bench/agent-steady.sh: nginx missing (make deps)" >&2; exit 1; }

PIDS=()
trap stop_pids EXIT

nginx_start "$OUT/nginx" 1
NPORT=$PORT
MPORT=$(free_port)
agent_argv "$MPORT"
"$BIN" "${AGENT_ARGV[@]}" --duration $((WARM + SECS + 60)) 2>"$OUT/agent.err" &
AGENT=$!
PIDS+=("$AGENT")
sleep 3
echo "machine: $(uname -r), $(nproc) CPUs; agent: sockscope ${AGENT_ARGV[*]}"
echo "wrk -t1 -c32 for $((WARM + SECS)) s; the agent's CPU over the last $SECS s"

threads() {
  for t in /proc/"$AGENT"/task/*; do
    printf '%s %s\n' "$(tr ' ' _ <"$t/comm")" "$(awk '{print $1}' "$t/schedstat")"
  done | sort
}
samples() {
  curl -fs "http://127.0.0.1:$MPORT/metrics" |
    awk '/^sockscope_stack_samples_total\{/ {s += $2} END {printf "%d\n", s}'
}

wrk -t1 -c32 -d"$((WARM + SECS))s" "http://127.0.0.1:$NPORT/index.html" >"$OUT/wrk.txt" &
WRK=$!
PIDS+=("$WRK")
sleep "$WARM"
threads >"$OUT/t0"
S0=$(samples)
T0=$(date +%s.%N)
sleep "$SECS"
threads >"$OUT/t1"
S1=$(samples)
T1=$(date +%s.%N)
wait "$WRK"
python3 - "$OUT/t0" "$OUT/t1" "$S0" "$S1" "$T0" "$T1" "$OUT/wrk.txt" <<'PY'
import re, sys
t0, t1, s0, s1, a, b, wrk = sys.argv[1:]
def read(p):
    d = {}
    for line in open(p):
        name, ns = line.split()
        d[name] = d.get(name, 0) + int(ns)
    return d
x, y = read(t0), read(t1)
span = float(b) - float(a)
samples = int(s1) - int(s0)
m = re.search(r"Requests/sec:\s+([\d.]+)", open(wrk).read())
rps = float(m.group(1)) if m else 0.0
total = 0
for name in sorted(y):
    ns = y[name] - x.get(name, 0)
    total += ns
    extra = f", {ns / 1e3 / samples:.0f} us per stack sample" if name == "ss-stacks" and samples else ""
    print(f"  {name:16s} {100 * ns / 1e9 / span:5.2f} % of one CPU{extra}")
print(f"  {'whole agent':16s} {100 * total / 1e9 / span:5.2f} % of one CPU; nginx {rps:,.0f} requests/s "
      f"(wrk over the whole run); {samples} stack samples in {span:.0f} s ({samples / span:.1f}/s)")
PY
