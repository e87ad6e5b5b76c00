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
