#!/usr/bin/env bash
# What the node agent costs the services beside it (issue 41;
# docs/benchmarks.md, "The node agent's cost per service"): nginx (one
# worker, wrk -t1 -c32, Debian's default page) and redis (redis-benchmark -c 32, GET) at
# saturation over loopback, each with nothing beside it ("base") and with
# the agent running machine-wide with deploy/k8s/agent-daemonset.yaml's
# arguments, read from the file ("agent"; the pod's address becomes
# 127.0.0.1 and a free port). Rounds are interleaved. Each row: requests/s,
# the service's CPU per request (user+system from /proc/PID/stat: BPF time
# run in its context is in it), and the agent's own CPU as a share of one
# CPU, also scaled to 100,000 requests/s. The agent's own
# sockscope_agent_target_cpu_share for the service is read from its
# exporter at the end of each agent run ("-" under a duty until the agent
# has read the service for a whole window: a run of one period has none),
# and with --stacks the stack sampler's BPF run time over the agent's
# life, machine-wide (sockscope_stack_bpf_seconds_total, "/ N ms").
#
#   bench/agent.sh [SECS_PER_RUN]      (default 60; ROUNDS=5, TARGETS="nginx redis")
#
# Under a --requests-duty the agent's hooks are attached ON of every
# PERIOD from its start; each run drives from 6 s after the agent starts
# for SECS_PER_RUN, so a run of one period holds exactly one sample: the
# script refuses a shorter run.
#
# AGENT_ARGS="..." replaces the file's arguments (e.g. to try another
# --requests-duty). Only loopback is used; every process started here is
# stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECS=${1:-60}
ROUNDS=${ROUNDS:-5}
TARGETS=${TARGETS:-nginx redis}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/agent
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$BIN" ] || { echo "bench/agent.sh: build first ($BIN missing)" >&2; exit 1; }
for t in wrk redis-server redis-benchmark python3; do
  command -v "$t" >/dev/null || { echo "bench/agent.sh: $t missing (make deps)" >&2; exit 1; }
done
[ -x /usr/sbin/nginx ] || { echo "bench/agent.sh: nginx missing (make deps)" >&2; exit 1; }

PIDS=()
trap stop_pids EXIT
HZ=$(getconf CLK_TCK)

start_nginx() {
  nginx_start "$OUT/nginx" 1
  NPORT=$PORT
  NGINX_PIDS=("${NPIDS[@]}")
  PIDS+=("${NPIDS[@]:1}")
}
start_redis() {
  RPORT=$(free_port)
  redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$OUT" --daemonize no >"$OUT/redis.log" 2>&1 &
  PIDS+=("$!")
  REDIS_PID=$!
  wait_port "$RPORT"
  redis-benchmark -p "$RPORT" -t set -n 1000 -q >/dev/null
}

# drive TARGET SECS: prints "requests seconds".
drive() {
  case $1 in
    nginx)
      wrk -t1 -c32 -d"${2}s" "http://127.0.0.1:$NPORT/index.html" >"$OUT/drive.txt"
      # wrk writes the span as 10.00s, or 1.00m from a minute.
      python3 -c "import re,sys; t=open(sys.argv[1]).read(); m=re.search(r'(\d+) requests in ([\d.]+)(ms|s|m)', t); print(m.group(1), float(m.group(2)) * {'ms': 1e-3, 's': 1, 'm': 60}[m.group(3)])" "$OUT/drive.txt" ;;
    redis)
      # A fixed count sized from the first base run, so each run lasts about SECS.
      local n=${REDIS_N:-400000}
      local t0 t1
      t0=$(date +%s.%N)
      redis-benchmark -p "$RPORT" -c 32 -n "$n" -t get -q >"$OUT/drive.txt"
      t1=$(date +%s.%N)
      python3 -c "import sys; print(sys.argv[1], float(sys.argv[3]) - float(sys.argv[2]))" "$n" "$t0" "$t1" ;;
  esac
}

# run TARGET MODE ROUND
run() {
  local target=$1 mode=$2 round=$3 agent="" mport=""
  local -a pids
  if [ "$target" = nginx ]; then pids=("${NGINX_PIDS[@]}"); else pids=("$REDIS_PID"); fi
  if [ "$mode" = agent ]; then
    mport=$(free_port)
    agent_argv "$mport"
    "$BIN" "${AGENT_ARGV[@]}" --duration $((SECS * 4 + 30)) 2>"$OUT/agent-$target-$round.err" &
    agent=$!
    PIDS+=("$agent")
    # Attached and past its first per-process reading.
    sleep 6
  fi
  local n0 a0 n1 a1 out
  n0=$(proc_ticks "${pids[@]}")
  a0=$([ -n "$agent" ] && proc_ticks "$agent" || echo 0)
  out=$(drive "$target" "$SECS")
  n1=$(proc_ticks "${pids[@]}")
  a1=$([ -n "$agent" ] && proc_ticks "$agent" || echo 0)
  local share="-"
  if [ -n "$agent" ]; then
    sleep 5.5
    local comm=nginx
    [ "$target" = redis ] && comm=redis-server
    share=$(python3 - "$mport" "$comm" <<'PY'
import sys, urllib.request
port, comm = sys.argv[1:]
text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
v = [l.rsplit(" ", 1)[1] for l in text.splitlines()
     if l.startswith("sockscope_agent_target_cpu_share{") and f'comm="{comm}"' in l]
share = f"{float(v[0]):.4f}" if v else "-"
# The stack sampler's program, machine-wide, over the agent's life so far.
st = [float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
      if l.startswith("sockscope_stack_bpf_seconds_total ")]
print(share + (f" / {1e3 * st[0]:.1f} ms" if st else ""))
PY
)
    kill -INT "$agent" 2>/dev/null || true
    wait "$agent" || true
  fi
  python3 - "$target" "$mode" "$round" "$out" "$((n1 - n0))" "$((a1 - a0))" "$HZ" "$share" "$OUT/rows" <<'PY'
import sys
target, mode, rnd, out, nt, at, hz, share, rows = sys.argv[1:]
reqs, secs = out.split()
reqs, secs = int(reqs), float(secs)
rps = reqs / secs
svc_us = 1e6 * int(nt) / int(hz) / reqs
agent_cpu = int(at) / int(hz) / secs
at100k = agent_cpu * 100_000 / rps if mode == "agent" else 0.0
a = "-" if mode == "base" else f"{100 * agent_cpu:.2f} % ({100 * at100k:.2f} % at 100k/s)"
print(f"| {target} | {rnd} | {mode} | {rps:,.0f} | {svc_us:.2f} | {a} | {share} |")
open(rows, "a").write(f"{target} {mode} {rps} {svc_us} {agent_cpu} {at100k}\n")
PY
}

agent_argv 0
PERIOD=$(duty_period_s)
if [ "$PERIOD" -gt 0 ] && [ "$SECS" -lt "$PERIOD" ]; then
  echo "bench/agent.sh: the agent samples every ${PERIOD}s (--requests-duty): a ${SECS}s run could fall between samples; give at least $PERIOD s per run (bench/agent.sh $PERIOD)" >&2
  exit 2
fi
echo "machine: $(uname -r), $(nproc) CPUs; $SECS s per run, $ROUNDS rounds; agent: sockscope ${AGENT_ARGV[*]}"
echo
echo "| target | round | mode | req/s | service CPU us/req | agent CPU (of one CPU) | agent's target_cpu_share / stacks BPF |"
echo "|---|---:|---|---:|---:|---|---:|"
for target in $TARGETS; do
  case $target in
    nginx) start_nginx ;;
    redis)
      start_redis
      # Size the count to about SECS seconds.
      t0=$(date +%s.%N); redis-benchmark -p "$RPORT" -c 32 -n 100000 -t get -q >/dev/null; t1=$(date +%s.%N)
      REDIS_N=$(python3 -c "import sys; print(int(100000 * float(sys.argv[3]) / (float(sys.argv[2]) - float(sys.argv[1]))))" "$t0" "$t1" "$SECS") ;;
  esac
  for r in $(seq "$ROUNDS"); do
    for m in base agent; do run "$target" "$m" "$r"; done
  done
done
echo
python3 - "$OUT/rows" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    t, m, *v = line.split()
    rows.setdefault((t, m), []).append([float(x) for x in v])
for t in sorted({t for t, _ in rows}):
    b, a = rows[(t, "base")], rows[(t, "agent")]
    # Per-round ratios (rounds are interleaved), then their median.
    thr = statistics.median(x[0] / y[0] for x, y in zip(a, b))
    cpu = statistics.median(x[1] / y[1] for x, y in zip(a, b))
    ag = statistics.median(x[2] for x in a)
    at100 = statistics.median(x[3] for x in a)
    print(f"{t}: with the agent, CPU per request {cpu:.3f}x, throughput {thr:.3f}x; "
          f"agent CPU {100*ag:.2f} % of one CPU ({100*at100:.2f} % scaled to 100k req/s)")
PY
