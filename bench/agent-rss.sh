#!/usr/bin/env bash
# The node agent's memory over a long run (issue 41; docs/benchmarks.md,
# "The node agent's cost per service"): deploy/k8s/agent-daemonset.yaml's
# arguments (the pod's address replaced by 127.0.0.1 and a free port) for
# SECS seconds (default 600) beside 50 echo servers on 50 loopback ports
# under load, and a loop that runs 1,000 distinct process names (a name is
# what a process was executed as: symlinks to python3), each making one
# request to one of the ports, over and over. Prints the agent's VmRSS every
# 30 s (anonymous and file-backed: a ring buffer's pages count as a file's),
# its CPU, how many command names it exports, and what its stack resolver
# holds and has dropped to keep to its budget.
#
#   bench/agent-rss.sh [SECS]
#
# Only loopback is used; every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECS=${1:-600}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/agent-rss
rm -rf "$OUT"
mkdir -p "$OUT/names"
OUT=$(cd "$OUT" && pwd)
[ -x "$BIN" ] || { echo "bench/agent-rss.sh: build first ($BIN missing)" >&2; exit 1; }
PY=$(command -v python3)
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

MPORT=$(free_port)
agent_argv "$MPORT"
"$BIN" "${AGENT_ARGV[@]}" --duration $((SECS + 120)) 2>"$OUT/agent.err" &
APID=$!
PIDS+=("$APID")
sleep 3

PORTS=()
for _ in $(seq 50); do
  p=$(free_port)
  "$BIN" serve echo --threads 1 --listen "127.0.0.1:$p" >/dev/null 2>&1 &
  PIDS+=("$!")
  PORTS+=("$p")
done
sleep 1
for n in $(seq -w 1 1000); do ln -s "$PY" "$OUT/names/ssn$n"; done

end=$((SECONDS + SECS))
# Load: each port in turn, 2 s at 1,000 requests/s.
(
  i=0
  while [ $SECONDS -lt $end ]; do
    "$BIN" load tcp-rr "127.0.0.1:${PORTS[$((i % 50))]}" -c 2 --rate 1000 -d 2 -q >/dev/null 2>&1 || true
    i=$((i + 1))
  done
) &
PIDS+=("$!")
# Names: one request each, cycling through the 1,000.
(
  i=0
  while [ $SECONDS -lt $end ]; do
    n=$(printf '%04d' $((i % 1000 + 1)))
    "$OUT/names/ssn$n" -c "import socket; s=socket.create_connection(('127.0.0.1', ${PORTS[$((i % 50))]}), 2); s.sendall(b'x' * 64); s.recv(64)" 2>/dev/null || true
    i=$((i + 1))
  done
  echo "$i" >"$OUT/names-run"
) &
PIDS+=("$!")

echo "machine: $(uname -r), $(nproc) CPUs; $SECS s; agent: sockscope ${AGENT_ARGV[*]}"
echo "| s | agent VmRSS MB | of which anonymous | of which files | agent CPU s | commands exported | module cache MB | modules evicted |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
peak=0
while [ $SECONDS -lt $end ]; do
  sleep 30
  [ -d "/proc/$APID" ] || { echo "bench/agent-rss.sh: the agent exited: $(cat "$OUT/agent.err")" >&2; exit 1; }
  rss=$(awk '/^VmRSS/{print $2}' "/proc/$APID/status")
  anon=$(awk '/^RssAnon/{print $2}' "/proc/$APID/status")
  file=$(awk '/^RssFile/{print $2}' "/proc/$APID/status")
  cpu=$(proc_ticks "$APID")
  read -r comms cache evicted < <(python3 -c "
import urllib.request
t = urllib.request.urlopen('http://127.0.0.1:$MPORT/metrics', timeout=5).read().decode()
v = lambda name: next((l.split()[-1] for l in t.splitlines() if l.startswith(name + ' ')), '?')
c = v('sockscope_stack_module_cache_bytes')
print(sum(1 for l in t.splitlines() if l.startswith('sockscope_agent_target_cpu_seconds_total{')),
      f'{float(c) / 1048576:.1f}' if c != '?' else c, v('sockscope_stack_module_evictions_total'))" 2>/dev/null || echo "? ? ?")
  [ "$rss" -gt "$peak" ] && peak=$rss
  echo "| $((SECS - end + SECONDS)) | $(python3 -c "print(f'{$rss/1024:.1f}')") | $(python3 -c "print(f'{$anon/1024:.1f}')") | $(python3 -c "print(f'{$file/1024:.1f}')") | $(python3 -c "print(f'{$cpu/$(getconf CLK_TCK):.1f}')") | $comms | $cache | $evicted |"
done
wait "${PIDS[-1]}" 2>/dev/null || true
echo
echo "peak VmRSS $(python3 -c "print(f'{$peak/1024:.1f}')") MB; processes named: $(cat "$OUT/names-run" 2>/dev/null || echo '?') runs of 1,000 names"
