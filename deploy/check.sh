#!/usr/bin/env bash
# deploy/check.sh: build the node agent's image and run it as the DaemonSet
# runs it, then check it against real traffic and a real Prometheus.
#
#   deploy/check.sh        (as root, from anywhere; see docs/deploy-check.md)
#
# 1. installs what is missing (podman, runc, debootstrap; Debian packages)
# 2. builds localhost/sockscope-base:bookworm with debootstrap (cached)
# 3. builds localhost/sockscope:latest from deploy/k8s/Dockerfile as it is,
#    only its base swapped (--from), the context the release binary alone
# 4. runs it with the pod spec of deploy/k8s/agent-daemonset.yaml
#    (deploy/check.py translates the manifest: args, env, securityContext,
#    hostPID, hostNetwork, hostPath mounts, limits)
# 5. starts Prometheus on loopback with deploy/prometheus/rules.yml
# 6. runs `serve echo` and a bounded `load tcp-rr` on the host
# 7. checks every metric the Grafana dashboard queries has a series, the
#    agent's request count for the echo port against the load's, and its
#    stacks (functions named, the last window's pprof served)
# 8. stops the agent as the kubelet does (SIGTERM, then the grace period)
#
# Everything it starts (processes, the container, temp dirs) is removed on
# every exit path; the images stay (the base is the cache of the next run).
# Only loopback and the Debian mirror are ever contacted.
set -euo pipefail
set -o errtrace
umask 077

MIRROR=http://deb.debian.org/debian
BASE=localhost/sockscope-base:bookworm
IMAGE=localhost/sockscope:latest
POD_IP=127.0.0.1
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
MANIFEST=$REPO/deploy/k8s/agent-daemonset.yaml
DOCKERFILE=$REPO/deploy/k8s/Dockerfile
RULES=$REPO/deploy/prometheus/rules.yml
SCRAPE=$REPO/deploy/prometheus/scrape.yml
DASHBOARD=$REPO/deploy/grafana/sockscope-dashboard.json
HELPER=$REPO/deploy/check.py
PROMETHEUS=/usr/bin/prometheus
PROMTOOL=/usr/bin/promtool
# Debian's Python, where python3-yaml installs (not a pyenv's first in PATH).
PY=/usr/bin/python3

T0=$SECONDS
STEP_NO=0
STEP="start"
WORK=""
ROOTFS=""
CONTAINER=""
declare -a PIDS=()

say() { printf '%s\n' "$*"; }
step() {
	STEP_NO=$((STEP_NO + 1))
	STEP="$STEP_NO. $1"
	printf '\n==> [%3ds] step %s\n' "$((SECONDS - T0))" "$STEP"
}
fail() {
	printf '\nFAILED at step %s: %s\n' "$STEP" "$*" >&2
	exit 1
}
on_err() {
	local rc=$1 line=$2 cmd=$3
	# Inside a function (helper, ...), name the line that called it.
	((${#FUNCNAME[@]} > 2)) && line=${BASH_LINENO[1]} && cmd="${FUNCNAME[1]}: $cmd"
	printf '\nFAILED at step %s: command "%s" exited %d (deploy/check.sh line %d)\n' \
		"$STEP" "$cmd" "$rc" "$line" >&2
}
trap 'on_err $? $LINENO "$BASH_COMMAND"' ERR

# Start a command in its own session (so that it and its children can be
# ended together, by its id) and remember it.
start_bg() {
	local out=$1
	shift
	: >"$out"
	setsid "$@" >"$out" 2>&1 </dev/null &
	LAST_PID=$!
	PIDS+=("$LAST_PID")
}
# A process waited for is gone: forget its id, which the kernel may give
# to another process.
forget_pid() {
	local p keep=()
	for p in "${PIDS[@]}"; do
		[[ $p == "$1" ]] || keep+=("$p")
	done
	PIDS=("${keep[@]}")
}
# Wait for one started with start_bg; fail naming it when it fails.
wait_bg() {
	local pid=$1 what=$2 log=$3 rc=0
	wait "$pid" || rc=$?
	forget_pid "$pid"
	if ((rc != 0)); then
		if [[ -s $log ]]; then
			say "--- last lines of $what's output:" >&2
			tail -n 40 "$log" >&2
		fi
		fail "$what exited $rc"
	fi
}
# End one started with start_bg: its whole session, TERM then KILL after
# a bounded wait.
stop_pid() {
	local pid=$1 i
	if ! kill -0 "$pid" 2>/dev/null; then
		wait "$pid" 2>/dev/null || true
		forget_pid "$pid"
		return 0
	fi
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
	forget_pid "$pid"
}

cleanup() {
	local rc=$? pid mnt
	trap - ERR
	set +e
	local started=("${PIDS[@]}")
	for pid in "${started[@]}"; do
		stop_pid "$pid"
	done
	if [[ -n $CONTAINER ]] && podman container exists "$CONTAINER" 2>/dev/null; then
		timeout 60 podman rm -f -t 5 "$CONTAINER" >/dev/null 2>&1 ||
			say "cleanup: could not remove container $CONTAINER" >&2
	fi
	if [[ -n $ROOTFS && -d $ROOTFS ]]; then
		# An interrupted debootstrap leaves proc/sys mounted in the tree.
		findmnt -rn -o TARGET | grep -F -- "$ROOTFS/" | sort -r |
			while read -r mnt; do umount -l -- "$mnt"; done
	fi
	if [[ -n $WORK && -d $WORK ]]; then
		rm -rf --one-file-system -- "$WORK" || say "cleanup: could not remove $WORK" >&2
	fi
	if ((rc != 0)); then
		printf 'deploy/check.sh: FAILED (exit %d) after %ds; everything it started is stopped and removed\n' \
			"$rc" "$((SECONDS - T0))" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# -B: no __pycache__ written into the repository.
helper() { "$PY" -B "$HELPER" "$@"; }
# runc, not crun, for `podman build` and `podman run`: crun 1.8 (bookworm)
# refuses a cgroup v1/v2 hybrid host whose v2 hierarchy holds a controller
# ("cgroups in hybrid mode not supported"); runc is also what containerd,
# Kubernetes' usual runtime, runs pods with.
RUNTIME=runc

STEP="0. preflight"
((EUID == 0)) || fail "run as root (podman, debootstrap and the BPF agent need it)"
BIN_SRC=$REPO/target/release/sockscope
[[ -f $BIN_SRC && -x $BIN_SRC ]] ||
	fail "$BIN_SRC is missing: run \`cargo build --release\` first"

# --- 1 -----------------------------------------------------------------------
step "install what is missing (Debian packages)"
# command -> package. What this check (as root) needs of podman 4.3 on
# bookworm: podman itself (conmon, containernetworking-plugins and
# containers-common come as its dependencies) and runc as the OCI runtime
# (it satisfies podman's "crun | runc"; see RUNTIME below). uidmap,
# fuse-overlayfs and slirp4netns, podman's recommends, serve rootless
# podman only: not needed here.
declare -A NEED=(
	[podman]=podman [runc]=runc [debootstrap]=debootstrap [curl]=curl
	[/usr/bin/python3]=python3 [prometheus]=prometheus [promtool]=prometheus
	[findmnt]=util-linux [setsid]=util-linux
)
missing=()
for cmd in "${!NEED[@]}"; do
	command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEED[$cmd]}")
done
"$PY" -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
if ((${#missing[@]})); then
	mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
	say "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	timeout 900 apt-get update -q || fail "apt-get update failed (is $MIRROR reachable?)"
	timeout 900 apt-get install -y -q --no-install-recommends "${missing[@]}" ||
		fail "apt-get install ${missing[*]} failed"
else
	say "nothing missing: $(podman --version), $(debootstrap --version 2>/dev/null || echo debootstrap), $($PROMETHEUS --version 2>&1 | head -n 1)"
fi
[[ -x $PROMETHEUS && -x $PROMTOOL ]] || fail "$PROMETHEUS and $PROMTOOL are needed (Debian package prometheus)"

WORK=$(mktemp -d)
say "work directory: $WORK"

# Podman gives a root container RLIMIT_NOFILE 1048576 and RLIMIT_NPROC
# above its own limits; the OCI runtime can only raise a hard limit with
# CAP_SYS_RESOURCE. Where this shell has not got it (some sandboxes), the
# container gets the limits podman itself runs with: this shell's NOFILE
# hard limit, and NPROC at most 32768 (podman 4.3 lowers its own to that).
# Kubernetes has no ulimit setting: a pod inherits its runtime's limits.
ULIMITS=()
capeff=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
if (((16#$capeff >> 24 & 1) == 0)); then
	nofile=$(ulimit -Hn)
	nproc=$(ulimit -Hu)
	[[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
	ULIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
	say "no CAP_SYS_RESOURCE here: containers get ${ULIMITS[*]} (the limits podman runs with)"
fi

# --- 2 -----------------------------------------------------------------------
step "base image $BASE (debootstrap --variant=minbase bookworm)"
if podman image exists "$BASE"; then
	say "cached: $BASE exists ($(podman image inspect --format '{{.Id}}' "$BASE" | cut -c1-12)); skipping debootstrap (podman rmi $BASE to rebuild it)"
else
	ROOTFS=$(mktemp -d "$WORK/rootfs.XXXXXX")
	say "debootstrap into $ROOTFS from $MIRROR (a few minutes)"
	start_bg "$WORK/debootstrap.log" timeout 1200 \
		nice -n 10 debootstrap --variant=minbase bookworm "$ROOTFS" "$MIRROR"
	wait_bg "$LAST_PID" debootstrap "$WORK/debootstrap.log"
	grep -E '^I: (Retrieving|Base system installed)' "$WORK/debootstrap.log" | tail -n 2 || true
	say "importing the tree as $BASE"
	tar -C "$ROOTFS" --numeric-owner -c . |
		timeout 600 podman import --message "debootstrap --variant=minbase bookworm $MIRROR" - "$BASE" >/dev/null ||
		fail "podman import of $ROOTFS failed"
	rm -rf --one-file-system -- "$ROOTFS"
	ROOTFS=""
	say "built $BASE ($(podman image inspect --format '{{.Id}}' "$BASE" | cut -c1-12))"
fi

# --- 3 -----------------------------------------------------------------------
step "image $IMAGE from deploy/k8s/Dockerfile (base: $BASE)"
CONTEXT=$WORK/context
mkdir -p "$CONTEXT/target/release"
# The binary is copied once: the image and the host's server and load run
# the same bytes, whatever a concurrent `cargo build` does to target/.
cp -- "$BIN_SRC" "$CONTEXT/target/release/sockscope"
BIN=$CONTEXT/target/release/sockscope
say "context: $CONTEXT (target/release/sockscope only, $(du -h "$BIN" | cut -f1))"
say "the binary's shared libraries (ldd): $(ldd "$BIN" | awk '/=>/ {print $1}' | tr '\n' ' ')"
# --network=host: the Dockerfile's RUN reaches the Debian mirror through the
# host's network rather than a CNI bridge, which would turn on ip_forward
# and add NAT rules on the host. --force-rm: no build container is left,
# even on failure.
OLD_ID=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
start_bg "$WORK/build.log" timeout 1200 nice -n 10 \
	podman build --runtime "$RUNTIME" --from "$BASE" -f "$DOCKERFILE" -t "$IMAGE" --network=host --force-rm \
	"${ULIMITS[@]}" "$CONTEXT"
tail -f --pid="$LAST_PID" "$WORK/build.log" &
TAIL_PID=$!
PIDS+=("$TAIL_PID")
wait_bg "$LAST_PID" "podman build (output above)" ""
wait "$TAIL_PID" 2>/dev/null || true
forget_pid "$TAIL_PID"
IMAGE_ID=$(podman image inspect --format '{{.Id}}' "$IMAGE")
IMAGE_SIZE=$(podman image inspect --format '{{.Size}}' "$IMAGE")
if [[ -n $OLD_ID && $OLD_ID != "$IMAGE_ID" ]]; then
	# The previous build of this check, untagged now: not needed any more.
	if podman rmi "$OLD_ID" >/dev/null 2>&1; then
		say "removed the previous $IMAGE (${OLD_ID:0:12})"
	fi
fi
say "smoke test: the image runs the binary"
if ! out=$(timeout 60 podman run --runtime "$RUNTIME" --rm --pull=never --network=none \
	"${ULIMITS[@]}" "$IMAGE" --version 2>&1); then
	say "$out" >&2
	if [[ $out == *"error while loading shared libraries"* ]]; then
		fail "the image cannot run the binary (above); it needs $(ldd "$BIN" | awk '/=>/ {print $1}' | tr '\n' ' '): install the missing libraries in deploy/k8s/Dockerfile"
	fi
	fail "podman could not run the image (above)"
fi
say "$out"

# --- 4 -----------------------------------------------------------------------
step "agent container, as deploy/k8s/agent-daemonset.yaml runs it"
NODE=$(hostname)
CONTAINER=sockscope-check-$$-$RANDOM
say "translating the DaemonSet's pod spec (deploy/check.py podman-args): \$(POD_IP) is $POD_IP here"
helper podman-args --manifest "$MANIFEST" --name "$CONTAINER" --image "$IMAGE" \
	--pod-ip "$POD_IP" --node "$NODE" --out "$WORK" --extra="--runtime=$RUNTIME" "${ULIMITS[@]/#/--extra=}"
mapfile -d '' -t PODMAN_ARGS <"$WORK/podman-args"
METRICS_ADDR=$(<"$WORK/metrics-addr")
GRACE=$(<"$WORK/grace")
say "podman ${PODMAN_ARGS[*]}"
timeout 120 podman "${PODMAN_ARGS[@]}" >/dev/null || fail "podman run failed"
agent_logs() {
	say "--- podman logs $CONTAINER:" >&2
	timeout 30 podman logs "$CONTAINER" 2>&1 | tail -n 60 >&2 || true
}
# The liveness probe allows 20 s before its first GET; give the agent 90 s
# (loading the programs takes a few seconds, longer on a busy machine).
say "waiting for http://$METRICS_ADDR/metrics (at most 90 s)"
ready=""
for ((i = 0; i < 90; i++)); do
	if [[ $(podman inspect --format '{{.State.Running}}' "$CONTAINER") != true ]]; then
		agent_logs
		fail "the agent exited before serving metrics: $(podman inspect --format 'exit code {{.State.ExitCode}} {{.State.Error}}' "$CONTAINER")"
	fi
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$METRICS_ADDR/metrics" || true)
	if [[ $code == 200 ]]; then
		ready=$i
		break
	fi
	sleep 1
done
if [[ -z $ready ]]; then
	agent_logs
	fail "http://$METRICS_ADDR/metrics did not answer 200 within 90 s (last status: ${code:-none})"
fi
say "/metrics answers 200 after ${ready}s"
AGENT_PID=$(podman inspect --format '{{.State.Pid}}' "$CONTAINER")
helper as-run --pid "$AGENT_PID" --expect "$WORK/expect.json" --out "$WORK/caps-effective"

# --- 5 -----------------------------------------------------------------------
step "Prometheus on loopback, deploy/prometheus/rules.yml loaded"
PROM_DIR=$WORK/prometheus
mkdir -p "$PROM_DIR/data"
cp -- "$RULES" "$PROM_DIR/rules.yml"
timeout 60 "$PROMTOOL" check rules "$PROM_DIR/rules.yml" || fail "promtool check rules deploy/prometheus/rules.yml"
helper prom-config --scrape "$SCRAPE" --rules "$PROM_DIR/rules.yml" --target "$METRICS_ADDR" \
	--node "$NODE" --pod "$CONTAINER" --out "$PROM_DIR/prometheus.yml"
timeout 60 "$PROMTOOL" check config "$PROM_DIR/prometheus.yml" >/dev/null ||
	fail "promtool check config (the config built from deploy/prometheus/scrape.yml)"
PROM_PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
PROM=http://127.0.0.1:$PROM_PORT
start_bg "$PROM_DIR/log" "$PROMETHEUS" --config.file="$PROM_DIR/prometheus.yml" \
	--storage.tsdb.path="$PROM_DIR/data" --web.listen-address="127.0.0.1:$PROM_PORT" \
	--storage.tsdb.retention.time=1h --log.level=warn
PROM_PID=$LAST_PID
for ((i = 0; i < 30; i++)); do
	curl -fs --max-time 2 "$PROM/-/ready" >/dev/null && break
	kill -0 "$PROM_PID" 2>/dev/null || { tail -n 20 "$PROM_DIR/log" >&2; fail "Prometheus exited"; }
	sleep 1
done
curl -fs --max-time 2 "$PROM/-/ready" >/dev/null || { tail -n 20 "$PROM_DIR/log" >&2; fail "Prometheus not ready within 30 s"; }
say "Prometheus $($PROMETHEUS --version 2>&1 | awk 'NR==1 {print $3}') at $PROM, scraping $METRICS_ADDR every 1 s (job and node labels as scrape.yml)"
helper wait-up --prom "$PROM" --timeout 30

# --- 6 -----------------------------------------------------------------------
step "echo server and a bounded load on the host"
# Framed 1-byte requests and responses: the server counts transactions
# exactly (docs/serve.md), a third figure beside the load's and the agent's.
start_bg "$WORK/echo.log" "$BIN" serve echo --listen 127.0.0.1:0 --req-size 1 --resp-size 1 \
	--json "$WORK/echo.json"
ECHO_PID=$LAST_PID
ECHO_ADDR=""
for ((i = 0; i < 50; i++)); do
	ECHO_ADDR=$(sed -n 's/^listening on \(127\.0\.0\.1:[0-9]*\)$/\1/p' "$WORK/echo.log")
	[[ -n $ECHO_ADDR ]] && break
	kill -0 "$ECHO_PID" 2>/dev/null || { cat "$WORK/echo.log" >&2; fail "serve echo exited"; }
	sleep 0.2
done
[[ -n $ECHO_ADDR ]] || fail "serve echo did not say where it listens within 10 s"
ECHO_PORT=${ECHO_ADDR##*:}
say "serve echo (pid $ECHO_PID) listening on $ECHO_ADDR"
# The agent learns the new listener when it starts listening; two seconds
# let a reading and a scrape pass, so the baseline below is current.
sleep 2
sample=$(helper sample --prom "$PROM" --port "$ECHO_PORT" --node "$NODE")
read -r BASELINE OTHER_BASELINE <<<"$sample"
say "agent's count before the load: port $ECHO_PORT $BASELINE, port=\"(other)\" $OTHER_BASELINE"
# A sampling agent (--requests-duty in the manifest) counts the requests of
# its samples only: the load then lasts a period and more, and the agent's
# own /metrics is read twice inside it, a period apart, for the rate over
# the time it followed.
DUTY=$(helper duty --manifest "$MANIFEST")
read -r DUTY_ON DUTY_PERIOD <<<"$DUTY"
LOAD_SECS=10
if [[ -n ${DUTY_PERIOD:-} ]]; then
	SPAN=$(python3 -c "import math; print(math.ceil($DUTY_PERIOD) + 2)")
	LOAD_SECS=$((SPAN + 8))
	say "the agent samples ${DUTY_ON}s of every ${DUTY_PERIOD}s: a ${LOAD_SECS}s load, read twice ${SPAN}s apart inside it"
fi
LOAD_CMD=("$BIN" load tcp-rr "$ECHO_ADDR" -c 4 --rate 500 -d "$LOAD_SECS" --json "$WORK/load.json")
say "${LOAD_CMD[*]##*/}"
start_bg "$WORK/load.log" timeout --kill-after=5 $((LOAD_SECS + 50)) "${LOAD_CMD[@]}"
LOAD_PID=$LAST_PID
if [[ -n ${DUTY_PERIOD:-} ]]; then
	sleep 3
	curl -fs --max-time 5 "http://$METRICS_ADDR/metrics" >"$WORK/scrape-before" || fail "no scrape of the agent"
	sleep "$SPAN"
	curl -fs --max-time 5 "http://$METRICS_ADDR/metrics" >"$WORK/scrape-after" || fail "no scrape of the agent"
fi
wait_bg "$LOAD_PID" "sockscope load" "$WORK/load.log"
LOAD_END=$(date +%s.%N)
grep -E 'transactions|requests|p99' "$WORK/load.log" | head -n 6 || true
stop_pid "$ECHO_PID"
[[ -s $WORK/echo.json ]] || fail "serve echo wrote no --json on SIGTERM"

# --- 7 -----------------------------------------------------------------------
step "query Prometheus: the dashboard's metrics, the request count"
if [[ -n ${DUTY_PERIOD:-} ]]; then
	say "the agent's request rate for port $ECHO_PORT over the time it followed, inside the load:"
	helper compare-sampled --port "$ECHO_PORT" --load-json "$WORK/load.json" \
		--before "$WORK/scrape-before" --after "$WORK/scrape-after" --rate 500 \
		--on "$DUTY_ON" --period "$DUTY_PERIOD" --span "$SPAN" --out "$WORK/counts"
else
	say "the agent's request count for port $ECHO_PORT, after the load:"
	helper compare --prom "$PROM" --port "$ECHO_PORT" --node "$NODE" --load-json "$WORK/load.json" \
		--server-json "$WORK/echo.json" --baseline "$BASELINE" --other-baseline "$OTHER_BASELINE" --load-end "$LOAD_END" \
		--out "$WORK/counts"
fi
say "the agent's stacks of the host's sockscope processes (serve echo, load), and its profile:"
helper stacks --metrics "http://$METRICS_ADDR" --comm sockscope --out "$WORK/stacks"
say "every metric the dashboard queries (panels and variables; recording rules evaluate every 30 s):"
helper families --prom "$PROM" --dashboard "$DASHBOARD" --rules "$PROM_DIR/rules.yml" \
	--node "$NODE" --caps "$WORK/caps-effective" --out "$WORK/families"

# --- 8 -----------------------------------------------------------------------
step "stop the agent as the kubelet does (SIGTERM, ${GRACE}s grace)"
t=$SECONDS
timeout $((GRACE + 30)) podman stop -t "$GRACE" "$CONTAINER" >/dev/null || fail "podman stop failed"
took=$((SECONDS - t))
rc=$(podman inspect --format '{{.State.ExitCode}}' "$CONTAINER")
if [[ $rc != 0 ]]; then
	agent_logs
	fail "the agent exited $rc on SIGTERM (expected 0: docs/metrics.md)"
fi
((took < GRACE)) || fail "the agent took ${took}s to stop, the grace period is ${GRACE}s"
say "exited 0 within ${took}s of SIGTERM"
timeout 60 podman rm "$CONTAINER" >/dev/null
CONTAINER=""

# --- 9 -----------------------------------------------------------------------
step "summary"
say "image:        $IMAGE ${IMAGE_ID:0:12}, $((IMAGE_SIZE / 1000000)) MB (base $BASE)"
ran_as=()
for a in "${PODMAN_ARGS[@]:2}"; do
	[[ $a == "$IMAGE" ]] && break
	ran_as+=("$a")
done
say "ran as:       podman run ${ran_as[*]} $IMAGE ..."
say "capabilities: $(<"$WORK/caps-effective") (effective, read from /proc/$AGENT_PID/status)"
say "families:     $(<"$WORK/families")"
say "requests:     $(<"$WORK/counts")"
say "stacks:       $(<"$WORK/stacks")"
say "deploy/check.sh: PASSED in $((SECONDS - T0))s"
