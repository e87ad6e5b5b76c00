# Shell functions the bench scripts share (sourced, not run).

# cpu_run LOG CMD...: runs CMD (stdout+stderr to LOG) and prints its user+
# system CPU seconds (rusage of the child, its own children included); a
# CMD that fails stops the calling script with a message naming LOG.
cpu_run() {
  local log=$1; shift
  python3 - "$log" "$@" <<'PY'
import resource, subprocess, sys
with open(sys.argv[1], "w") as f:
    rc = subprocess.run(sys.argv[2:], stdout=f, stderr=subprocess.STDOUT).returncode
r = resource.getrusage(resource.RUSAGE_CHILDREN)
if rc != 0:
    sys.exit(f"{sys.argv[2]} exited {rc}: see {sys.argv[1]}")
print(f"{r.ru_utime + r.ru_stime:.3f}")
PY
}

# free_port: a TCP port on 127.0.0.1 free now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# proc_ticks PID...: the processes' CPU so far (user+system, their threads'
# included), in clock ticks.
proc_ticks() {
  local t=0 p
  for p in "$@"; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$t"
}

# json FILE EXPR: EXPR evaluated over the JSON document FILE (as `d`).
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {'d': d}))" "$@"; }

# ratio A B: A/B to three decimals ("n/a" when B is 0).
ratio() { python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{a/b:.3f}' if b else 'n/a')" "$1" "$2"; }

# cpu_of PID...: user+system seconds of these processes now.
cpu_of() {
  python3 - "$@" <<'PY'
import os, sys
hz = os.sysconf("SC_CLK_TCK")
t = 0
for p in sys.argv[1:]:
    f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
    t += int(f[11]) + int(f[12])
print(f"{t / hz:.3f}")
PY
}

# wait_port PORT: waits (5 s at most) until 127.0.0.1:PORT accepts a
# connection; stops the calling script when it does not.
wait_port() {
  for _ in $(seq 100); do
    python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 0.2)" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listens on 127.0.0.1:$1" >&2
  exit 1
}

# agent_argv MPORT: sets AGENT_ARGV to the node agent's command as
# deploy/k8s/agent-daemonset.yaml's container runs it (or as AGENT_ARGS
# says, when set), exporting on 127.0.0.1:MPORT instead of the pod's
# address.
agent_argv() {
  local mport=$1 args=${AGENT_ARGS:-}
  if [ -z "$args" ]; then
    args=$(python3 - deploy/k8s/agent-daemonset.yaml <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
i = next(n for n, l in enumerate(lines) if l.strip() == "args:")
ind = len(lines[i + 1]) - len(lines[i + 1].lstrip())
out = []
for l in lines[i + 1:]:
    s = l.strip()
    if s.startswith("#") or not s:
        continue
    if len(l) - len(l.lstrip()) < ind or not s.startswith("- "):
        break
    out.append(s[2:].strip().strip('"'))
print(" ".join(out))
PY
)
  fi
  AGENT_ARGV=()
  # shellcheck disable=SC2086
  set -- $args
  while [ $# -gt 0 ]; do
    case $1 in
      --metrics) AGENT_ARGV+=(--metrics "127.0.0.1:$mport"); shift ;;
      *) AGENT_ARGV+=("$1") ;;
    esac
    shift
  done
}

# duty_period_s: the period of AGENT_ARGV's --requests-duty in whole
# seconds, rounded up (0 when it follows every request). A run shorter
# than that may fall between samples and measure nothing.
duty_period_s() {
  local prev="" a
  for a in "${AGENT_ARGV[@]}"; do
    if [ "$prev" = --requests-duty ]; then
      python3 -c "import math,re,sys; t=sys.argv[1].split('/')[1]; m=re.fullmatch(r'([0-9.]+)(ms|s|m|h)', t); print(math.ceil(float(m.group(1)) * {'ms': 1e-3, 's': 1, 'm': 60, 'h': 3600}[m.group(2)]))" "$a"
      return
    fi
    prev=$a
  done
  echo 0
}

# stop_pids: SIGTERM to every pid in PIDS, then SIGKILL 0.3 s later (a
# script's EXIT trap: `PIDS=(); trap stop_pids EXIT`).
stop_pids() {
  local p
  for p in "${PIDS[@]:-}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.3
  for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done
}

# nginx_start DIR [WORKERS]: Debian's nginx with WORKERS workers (default
# 2) serving a static page on a free 127.0.0.1 port, its files under DIR;
# sets PORT, MASTER and NPIDS (master, then workers) and adds the master to
# PIDS (the caller's cleanup stops it).
nginx_start() {
  local d=$1 workers=${2:-2}
  mkdir -p "$d/html" "$d/logs"
  cp /usr/share/nginx/html/index.html "$d/html/" 2>/dev/null ||
    printf '<!DOCTYPE html><html><body>%0600d</body></html>\n' 0 >"$d/html/index.html"
  PORT=$(free_port)
  cat >"$d/nginx.conf" <<EOC
worker_processes $workers;
pid $d/nginx.pid;
error_log $d/logs/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$PORT;
    root $d/html;
  }
}
EOC
  /usr/sbin/nginx -p "$d" -c "$d/nginx.conf" -g 'daemon off;' &
  MASTER=$!
  PIDS+=("$MASTER")
  wait_port "$PORT"
  sleep 0.3
  NPIDS=("$MASTER" $(pgrep -P "$MASTER"))
}
