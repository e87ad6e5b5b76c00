#!/usr/bin/env bash
# UDP request/response at one socket: `sockscope load udp-rr` against
# `sockperf ping-pong`, both against the same `sockperf sr` (UDP), 64-byte
# messages, interleaved rounds (docs/benchmarks.md, section J): median and
# 99th percentile round trip, requests/s, and CPU per request of the
# generator and of the server.
#
#   bench/udp_rr.sh [SECS_PER_RUN] [ROUNDS]     (default 5 s, 3 rounds)
#
# Only loopback is used. Every process started here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
ROUNDS=${2:-3}
BIN=${SOCKSCOPE:-target/release/sockscope}
OUT=target/bench/udp_rr
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "bench/udp_rr.sh: build first ($BIN missing)" >&2; exit 1; }
command -v sockperf >/dev/null || { echo "bench/udp_rr.sh: sockperf missing (make deps)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench/udp_rr.sh: python3 missing" >&2; exit 1; }

PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# CPU seconds (user+system) of a pid so far (10 ms ticks).
cpu_of() { awk '{printf "%.2f\n", ($14+$15)/100}' "/proc/$1/stat"; }
. bench/lib.sh

echo "machine: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $SECS s per run"
echo

PORT=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sockperf sr -i 127.0.0.1 -p "$PORT" >"$OUT/sockperf-sr.log" 2>&1 &
SP=$!; PIDS+=("$SP")
sleep 0.5
# The 64-byte message sockperf's own client sends (header: sequence 1,
# flags client|pong request, length 64; then the payload), replayed by
# sockscope with --id none (one request in flight per socket). The server
# answers with the same message, flags 2.
REQ='\x00\x00\x00\x00\x00\x00\x00\x01\x00\x03\x00\x00\x00\x40'
for _ in $(seq 50); do REQ+='\x5a'; done

rm -f "$OUT/ratios"
echo "### udp-rr at 1 socket vs sockperf ping-pong (UDP, 64-byte messages, same sockperf sr)"
echo
echo "| round | sockscope p50 RTT | p99 RTT | req/s | gen CPU/req | srv CPU/req | sockperf p50 RTT | p99 RTT | req/s | gen CPU/req | srv CPU/req | p50 ratio | gen CPU ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for r in $(seq "$ROUNDS"); do
  s0=$(cpu_of "$SP")
  "$BIN" -q load udp-rr "127.0.0.1:$PORT" -c 1 -d "$SECS" --request "$REQ" --expect 'ZZZZ' \
    --json "$OUT/udp-rr-$r.json"
  s1=$(cpu_of "$SP")
  pcpu=$(cpu_run "$OUT/sockperf-$r.log" sockperf ping-pong -i 127.0.0.1 -p "$PORT" -t "$SECS" -m 64)
  s2=$(cpu_of "$SP")
  python3 - "$OUT/udp-rr-$r.json" "$OUT/sockperf-$r.log" "$pcpu" "$s0" "$s1" "$s2" "$SECS" "$r" <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1]))
t = open(sys.argv[2]).read()
pcpu, s0, s1, s2, secs, r = map(float, sys.argv[3:])
# sockperf prints half the round trip ("latency"): doubled to compare.
p = dict((k, float(v)) for k, v in re.findall(r'percentile (\d+\.\d+) =\s+([\d.]+)', t))
obs = int(re.search(r'Total (\d+) observations', t).group(1))
sp50, sp99 = 2 * p['50.000'], 2 * p['99.000']
l = d['latency']
n = d['transactions'] + d['warmup_transactions']
sent = d['udp_rr']['requests_sent']
gen = d['generator']['cpu_us_per_transaction']
srv_a = (s1 - s0) * 1e6 / sent
pgen = pcpu * 1e6 / obs
srv_b = (s2 - s1) * 1e6 / obs
print(f"| {int(r)} | {l['p50_ns']/1e3:.1f} us | {l['p99_ns']/1e3:.1f} us | {d['rate_per_s']:.0f} | {gen:.2f} us | {srv_a:.2f} us "
      f"| {sp50:.1f} us | {sp99:.1f} us | {obs/secs:.0f} | {pgen:.2f} us | {srv_b:.2f} us "
      f"| {l['p50_ns']/1e3/sp50:.3f} | {gen/pgen:.3f} |")
with open(sys.argv[1].rsplit('/', 1)[0] + '/ratios', 'a') as f:
    print(l['p50_ns'] / 1e3 / sp50, gen / pgen, file=f)
EOF
done
python3 - "$OUT/ratios" <<'EOF'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
p50 = statistics.median(r[0] for r in rows)
cpu = statistics.median(r[1] for r in rows)
print()
print(f"median over {len(rows)} rounds: p50 ratio {p50:.3f}, generator CPU per request ratio {cpu:.3f}")
EOF
kill "$SP"; wait "$SP" 2>/dev/null || true
echo
echo "p50 ratio: sockscope's median round trip / sockperf's (goal: within 10%, <= 1.10)."
echo "gen CPU/req: the whole client process (getrusage) over its run per request; srv CPU/req: sockperf sr's"
echo "utime+stime (/proc, 10 ms ticks) over the same run per request."
