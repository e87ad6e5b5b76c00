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
