#!/usr/bin/env bash
# What a profile's kernel evidence costs (docs/benchmarks.md, section I):
# the same profile of one server with and without the evidence sampler
# (`--no-evidence`), rounds interleaved. Per run: the target's throughput
# and CPU per transaction (from the profile itself), and with evidence the
# sampler's own CPU (evidence.cost in run.json).
#
#   bench/evidence.sh [SECS_PER_RUN] [CONNS]   (default 5 s, 64 connections; ROUNDS=3)
#
# Targets: `serve echo` (epoll) and, when installed, nginx (one worker).
# Only loopback is used. Every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
CONNS=${2:-64}
ROUNDS=${ROUNDS:-3}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/evidence
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -x "$BIN" ] || { echo "bench/evidence.sh: build first ($BIN missing)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench/evidence.sh: python3 missing (make deps)" >&2; exit 1; }

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $SECS s per run, $CONNS connections, $ROUNDS rounds"
echo

# row NAME RUNJSON: one line of figures from a profile's run.json.
row() {
  python3 - "$@" <<'EOF'
import json, sys
name, path = sys.argv[1], sys.argv[2]
d = json.load(open(path))
dv = d["derived"]
e = d.get("evidence")
cost = e["cost"] if e else None
sampler = f'{cost["sampler_cpu_s"]*1e3:8.1f} ms CPU ({100*cost["sampler_cpu_share"]:.2f}% of a CPU, {cost["samples"]} rounds)' if cost else "        -"
print(f'{name:<22} {dv["rate_per_s"]:>10.0f} tx/s  target {dv["target_cpu_us_per_transaction"]:7.2f} us/tx   sampler {sampler}')
EOF
}

profile() {
  local out=$1; shift
  "$BIN" profile --quiet --out "$out" "$@" >"$out.log" 2>&1 ||
    { echo "bench/evidence.sh: profile failed, see $out.log" >&2; tail -5 "$out.log" >&2; exit 1; }
}

targets=(echo)
if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then targets+=(nginx); fi

for t in "${targets[@]}"; do
  echo "== target: $t, tcp-rr/http -c $CONNS -d $SECS"
  for r in $(seq "$ROUNDS"); do
    for mode in evidence no-evidence; do
      flag=(); [ "$mode" = no-evidence ] && flag=(--no-evidence)
      dir="$OUT/$t-$mode-$r"
      case $t in
        echo)
          profile "$dir" "${flag[@]}" --target 'serve echo --transport epoll' \
            --load "tcp-rr -c $CONNS -d $SECS" ;;
        nginx)
          conf="$OUT/nginx-$r.conf"; mkdir -p "$OUT/www"; echo hello > "$OUT/www/index.html"
          cat > "$conf" <<EOF
worker_processes 1; daemon off; error_log stderr error; pid $OUT/nginx-$r-$mode.pid;
events { worker_connections 4096; }
http { access_log off; server { listen 127.0.0.1:0; root $OUT/www; } }
EOF
          # nginx cannot listen on port 0 and print it: take a free port.
          port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
          sed -i "s/127.0.0.1:0/127.0.0.1:$port/" "$conf"
          profile "$dir" "${flag[@]}" --load "http -c $CONNS -d $SECS /index.html" \
            -- nginx -c "$conf" -e stderr ;;
      esac
      row "$t $mode #$r" "$dir/run.json"
    done
  done
  echo
done
