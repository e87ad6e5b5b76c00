#!/usr/bin/env bash
# What tying stack samples to requests costs the target (docs/benchmarks.md,
# section T, issue 40): one nginx (2 workers) at saturation under
# `sockscope load http -c 8`, its CPU per request (user+system of master
# and workers from /proc, over the run) in alternating runs:
#   base     nothing attached (the load alone);
#   untied   profile --requests-only with stacks at 99 Hz, samples not tied
#            (SOCKSCOPE_UNTIED=1): the anatomy and the sampler side by side;
#   tied     the same, tied (the default): the anatomy numbers each turn and
#            keeps it per thread, the sampler reads it at every sample, and
#            the ends of the sampled turns (and those near the tail) are
#            written to the ring buffer.
# The tie's cost is tied over untied in the same round; odd rounds run
# untied before tied, even rounds the other way round.
#
#   bench/tail.sh [SECS_PER_RUN]      (default 8; ROUNDS=3)
#
# Only loopback is used; outputs go under target/bench/tail. Every process
# started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECS=${1:-8}
ROUNDS=${ROUNDS:-3}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/tail
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$BIN" ] || { echo "bench/tail.sh: build first ($BIN missing)" >&2; exit 1; }
for t in nginx python3; do
  command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] ||
    { echo "bench/tail.sh: $t missing (make deps)" >&2; exit 1; }
done

PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $SECS s per run, $ROUNDS rounds"
echo

nginx_start "$OUT/nginx"
echo "nginx: master $MASTER, workers ${NPIDS[*]:1}"
echo

# run NAME TAG: one load run; prints "rps us_per_req".
run() {
  local name=$1 tag=$2 c0 c1 n rps
  c0=$(cpu_of "${NPIDS[@]}")
  case $name in
    base) "$BIN" load http -c 8 -d "$SECS" --json "$OUT/$tag.load.json" \
            "http://127.0.0.1:$PORT/" >"$OUT/$tag.log" 2>&1
          n=$(json "$OUT/$tag.load.json" "d['transactions']")
          rps=$(json "$OUT/$tag.load.json" "round(d['rate_per_s'])") ;;
    untied|tied)
          local env=()
          [ "$name" = untied ] && env=(SOCKSCOPE_UNTIED=1)
          env "${env[@]}" "$BIN" profile --pid "$MASTER" --requests-only --quiet \
            --load "http -c 8 -d $SECS" --out "$OUT/$tag" >"$OUT/$tag.log" 2>&1 ||
            { echo "profile $name failed: see $OUT/$tag.log" >&2; exit 1; }
          n=$(json "$OUT/$tag/run.json" "d['derived']['transactions']")
          rps=$(json "$OUT/$tag/run.json" "round(d['derived']['rate_per_s'])") ;;
  esac
  c1=$(cpu_of "${NPIDS[@]}")
  python3 -c "import sys; print(sys.argv[1], f'{1e6*(float(sys.argv[3])-float(sys.argv[2]))/float(sys.argv[4]):.2f}')" "$rps" "$c0" "$c1" "$n"
}

printf "%-6s %-8s %10s %12s %8s %8s  %s\n" round run "req/s" "us/req" "/base" "/untied" "tail section"
for r in $(seq "$ROUNDS"); do
  # Odd rounds run untied first, even rounds tied first: the order's own
  # effect (a warmer cache, a drifting machine) cancels over the rounds.
  if [ $((r % 2)) -eq 1 ]; then order=(base untied tied); else order=(base tied untied); fi
  declare -A RPS=() US=()
  for name in "${order[@]}"; do
    read -r RPS[$name] US[$name] < <(run "$name" "$name-$r")
  done
  for name in base untied tied; do
    acct="" vs_untied=""
    if [ "$name" = tied ]; then
      acct=$(json "$OUT/$name-$r/run.json" "'samples tail %d rest %d, unattributed %d, outside %d' % (d['tail']['on_cpu_samples']['tail'], d['tail']['on_cpu_samples']['rest'], d['tail']['unattributed']['untimed_on_cpu'] + d['tail']['unattributed']['interleaved_on_cpu'], d['tail']['outside']['on_cpu']) if 'tail' in d else 'no tail section'")
      vs_untied=$(ratio "${US[tied]}" "${US[untied]}")
    fi
    printf "%-6s %-8s %10s %12s %8s %8s  %s\n" "$r" "$name" "${RPS[$name]}" "${US[$name]}" "$(ratio "${US[$name]}" "${US[base]}")" "$vs_untied" "$acct"
  done
done
