#!/usr/bin/env bash
# The multi-core picture on a machine with no compiler and no packages of
# ours (docs/benchmarks.md, "16 cores"): bench/load.sh section N (the
# generator against neper at 1, 64 and 512 flows) and bench/anatomy.sh
# with nginx at one worker per CPU under wrk, untraced, under the
# anatomy, the syscall tracer and the node agent's arguments (AGENT=1).
#
#   bench/device.sh DIR [SECS_PER_RUN]
#
# DIR holds what this machine built, copied there by `bench/device.sh
# --pack DIR` on the build machine: sockscope (stripped), neper's tcp_rr,
# Debian's nginx and wrk, and the shared libraries they need beyond the C
# library (lib/). Results go to stdout (markdown) and target/bench/.
# Only loopback is used; every process started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --pack ]; then
  d=${2:?usage: bench/device.sh --pack DIR}
  mkdir -p "$d/lib" "$d/bin"
  [ -x target/release/sockscope ] || { echo "bench/device.sh: build first" >&2; exit 1; }
  cp target/release/sockscope "$d/sockscope" && strip "$d/sockscope"
  mkdir -p target/neper
  cp -a third_party/neper/. target/neper/
  make -s -C target/neper tcp_rr >/dev/null
  cp target/neper/tcp_rr "$d/tcp_rr"
  cp /usr/sbin/nginx "$d/nginx"
  cp /usr/bin/wrk "$d/bin/wrk"
  for b in "$d/sockscope" "$d/tcp_rr" "$d/nginx" "$d/bin/wrk"; do
    ldd "$b" | awk '$3 ~ /^\// {print $3}'
  done | sort -u | while read -r l; do
    case $(basename "$l") in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libgcc_s.so.*|ld-linux*) ;;
      *) cp -L "$l" "$d/lib/" ;;
    esac
  done
  du -sh "$d"
  exit 0
fi

d=$(cd "${1:?usage: bench/device.sh DIR [SECS]}" && pwd)
SECS=${2:-5}
export LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$d/bin:$PATH
n=$(nproc)
echo "## $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
# Each part on its own: one that fails (a kernel that refuses a program)
# leaves the other's figures.
status=0
SOCKSCOPE=$d/sockscope NEPER=$d/tcp_rr SECTIONS=N ROUNDS=${ROUNDS:-3} bench/load.sh "$SECS" ||
  { echo "bench/load.sh section N failed (exit $?)"; status=1; }
echo
SOCKSCOPE=$d/sockscope NGINX_BIN=$d/nginx WORKERS=$n THREADS=$n CONNS=$((n * 32)) AGENT=1 \
  ROUNDS=${ROUNDS:-3} bench/anatomy.sh "$SECS" ||
  { echo "bench/anatomy.sh failed (exit $?)"; status=1; }
exit $status
