#!/usr/bin/env bash
# sockscope's sampled stacks against perf record --call-graph dwarf in the
# same windows (docs/benchmarks.md, section SP; docs/stacks.md, "Agreement
# with perf record"): Debian's nginx (one worker) pinned to the first CPU
# under `sockscope load http -c 4` on the others, and per round
#   taskset -c REST perf record -a -e cpu-clock -c 2004008 --call-graph dwarf \
#     -- sockscope trace --stacks-only --pid NGINX --stack-hz 499 -d SECS
# so both sample the same seconds the same way. Each round prints both
# sides' nginx sample counts, sockscope's coverage of nginx's CPU time, the
# share both put on the interrupt-enable points (where a tick that came due
# with interrupts off fires: the part two cpu-clock timers do not reproduce
# here), and the largest gap among each side's five hottest named
# functions outside those points, in points and in standard errors.
# tests/stacks_perf.rs checks the part that reproduces; this bench keeps
# the whole comparison, the interrupt-enable points included.
#
#   bench/stacks_perf.sh [SECS_PER_ROUND]      (default 8; ROUNDS=5)
#
# Only loopback is used; outputs go under target/bench/stacks_perf (one
# JSON line per round in rounds.jsonl). Every process started here is
# stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECS=${1:-8}
ROUNDS=${ROUNDS:-5}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/stacks_perf
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
[ -x "$BIN" ] || { echo "bench/stacks_perf.sh: build first ($BIN missing)" >&2; exit 1; }
for t in nginx perf python3 taskset; do
  command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] ||
    { echo "bench/stacks_perf.sh: $t missing (make deps)" >&2; exit 1; }
done
NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)

PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT

# The first CPU this script may use runs nginx; the others run the rest.
read -r NGINX_CPU REST < <(python3 -c '
import os
c = sorted(os.sched_getaffinity(0))
print(c[0], ",".join(map(str, c[1:] or c[:1])))')

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); $SECS s per round, $ROUNDS rounds; nginx on CPU $NGINX_CPU, the rest on $REST"
echo

NGX=$OUT/nginx
mkdir -p "$NGX/html" "$NGX/logs"
printf '<html><body>hello</body></html>\n' >"$NGX/html/index.html"
PORT=$(free_port)
cat >"$NGX/nginx.conf" <<EOF
user root;
worker_processes 1;
pid $NGX/nginx.pid;
error_log $NGX/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $NGX/body;
  proxy_temp_path $NGX/proxy;
  fastcgi_temp_path $NGX/fastcgi;
  uwsgi_temp_path $NGX/uwsgi;
  scgi_temp_path $NGX/scgi;
  server {
    listen 127.0.0.1:$PORT;
    root $NGX/html;
  }
}
EOF
taskset -c "$NGINX_CPU" "$NGINX_BIN" -p "$NGX" -c "$NGX/nginx.conf" -g 'daemon off; master_process on;' &
NGINX_PID=$!
PIDS+=("$NGINX_PID")
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT/" 2>/dev/null && break
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 0.1)" 2>/dev/null && break
  sleep 0.1
done
# The worker inherits the master's CPU; pin again in case it was forked
# before taskset took effect on a thread.
for t in /proc/"$NGINX_PID"/task/*; do taskset -pc "$NGINX_CPU" "${t##*/}" >/dev/null; done
for c in $(cat /proc/"$NGINX_PID"/task/*/children); do taskset -apc "$NGINX_CPU" "$c" >/dev/null; done

for r in $(seq "$ROUNDS"); do
  D=$OUT/round$r
  mkdir -p "$D"
  taskset -c "$REST" "$BIN" load http "http://127.0.0.1:$PORT/" -c 4 -d $((SECS + 6)) -q >/dev/null 2>&1 &
  LOAD=$!
  PIDS+=("$LOAD")
  sleep 1
  STEAL0=$(awk -v c="cpu$NGINX_CPU" '$1==c{print $9}' /proc/stat)
  T0=$(date +%s.%N)
  taskset -c "$REST" perf record -q -a -e cpu-clock -c 2004008 --call-graph dwarf -o "$D/perf.data" -- \
    "$BIN" trace --stacks-only --pid "$NGINX_PID" --stack-hz 499 -d "$SECS" -q --json "$D/stacks.json" \
    >/dev/null 2>"$D/perf.err"
  STEAL1=$(awk -v c="cpu$NGINX_CPU" '$1==c{print $9}' /proc/stat)
  # The hypervisor's steal on nginx's CPU over the round, as a share of it:
  # time the cpu-clock timer counts and the task's clock does not.
  STEAL=$(python3 -c "import os,sys,time; print((int(sys.argv[2])-int(sys.argv[1]))/os.sysconf('SC_CLK_TCK')/(time.time()-float(sys.argv[3])))" "$STEAL0" "$STEAL1" "$T0")
  wait "$LOAD" || true
  perf script -F comm,ip,sym -G --comm nginx -i "$D/perf.data" 2>/dev/null >"$D/perf.txt"
  python3 - "$D" "$r" "$STEAL" <<'PY' | tee -a "$OUT/rounds.jsonl" >/dev/null
import json, math, sys
d, r, steal = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def comparable(n):
    n = n[:-4] if n.endswith("_[k]") else n
    if n.startswith("__GI_"):
        a = n[5:].lstrip("_")
        return a[:-2] if a.endswith("64") else a
    return n
def named(n): return n != "[unknown]" and "+0x" not in n
def irq(n): return "unlock_irq" in n or n.startswith("finish_task_switch")
ours, theirs = {}, {}
rep = json.load(open(f"{d}/stacks.json"))["stacks"]
for s in rep["on_cpu"]["stacks"]:
    k = comparable(s["frames"][-1]); ours[k] = ours.get(k, 0) + s["weight"]
for l in open(f"{d}/perf.txt"):
    w = l.split()
    if len(w) >= 3 and w[0] == "nginx":
        k = comparable(w[2]); theirs[k] = theirs.get(k, 0) + 1
n1, n2 = sum(ours.values()), sum(theirs.values())
i1 = sum(v for k, v in ours.items() if irq(k)); i2 = sum(v for k, v in theirs.items() if irq(k))
m1, m2 = n1 - i1, n2 - i2
def top(c): return [k for k, _ in sorted(c.items(), key=lambda kv: -kv[1]) if named(k) and not irq(k)][:5]
worst = (0.0, 0.0, "")
for k in dict.fromkeys(top(ours) + top(theirs)):
    a, b = ours.get(k, 0) / max(m1, 1), theirs.get(k, 0) / max(m2, 1)
    p = (ours.get(k, 0) + theirs.get(k, 0)) / max(m1 + m2, 1)
    se = math.sqrt(max(p * (1 - p), 1e-9) * (1 / max(m1, 1) + 1 / max(m2, 1)))
    z = abs(a - b) / se
    if z > worst[1]:
        worst = (abs(a - b), z, k)
print(json.dumps({"round": r, "sockscope": n1, "perf": n2, "coverage": rep["cost"].get("coverage"), "steal": steal,
    "irq_sockscope": i1 / max(n1, 1), "irq_perf": i2 / max(n2, 1),
    "worst_gap_points": 100 * worst[0], "worst_gap_se": worst[1], "worst": worst[2]}))
PY
  python3 - "$OUT/rounds.jsonl" <<'PY'
import json, sys
j = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(f"round {j['round']}: nginx samples sockscope {j['sockscope']:,} / perf {j['perf']:,}, coverage {j['coverage']:.3f}, steal {100*j['steal']:.1f} %; "
      f"interrupt-enable points {100*j['irq_sockscope']:.1f} % / {100*j['irq_perf']:.1f} %; "
      f"largest gap outside them {j['worst_gap_points']:.2f} points ({j['worst_gap_se']:.1f} SE, {j['worst']})")
PY
done
