# sockscope — build, test, benchmark and demo entry points.
# `make demo` and `make test` work on a fresh Debian 12 machine: each first
# installs the Debian packages it needs that are missing (and does nothing
# when they are there): `make build` the build packages, `make demo` those
# and the demo's peers, `make test` / `make bench` / `make deps` everything.

SHELL := /bin/bash
CARGO ?= cargo
BIN := target/release/sockscope

# Build: clang/llvm compile the BPF programs; libelf, zlib and pkg-config
# are needed by libbpf-sys; gcc and libc6-dev link the binary and build the
# static test workload.
BUILD_PKGS := clang llvm libelf-dev zlib1g-dev pkg-config gcc libc6-dev make
# The demo's experiments (src/run/demo.rs) run sockscope's own servers and
# load, and three peers: strace and perf (linux-perf) in the tracer overhead
# experiment, haproxy in the relay experiment.
DEMO_PKGS := strace linux-perf haproxy
# Tests and benchmarks: real peers and cross-checks; chromium renders the
# HTML report headless in the demo test; haproxy is the relay benchmark's peer;
# valgrind counts the load generator's instructions (bench/load_ab.sh);
# nginx, redis-server and memcached are the real peers of the http, redis
# and memcached workloads (openssl makes the https test certificate), and
# wrk, h2load (nghttp2-client), redis-benchmark and memcaslap
# (libmemcached-tools) their benchmark peers (bench/http.sh, bench/h2.sh, bench/kv.sh).
# iproute2 (ip netns, tc) and nftables (random drops on a veth: this
# kernel has no sch_netem) build the namespaces of the kernel-evidence
# tests (tests/evidence_*.rs). dnsmasq-base is the DNS server udp-rr
# queries (tests/udp_rr.rs). prometheus is the real scraper tests/metrics.rs
# runs against `trace --metrics` (its own instances on loopback ports).
# postgresql (the server and pgbench) is the peer of tests/profile_unix.rs's
# requests counted on a Unix socket.
# python3-h2 and python3-grpcio (for /usr/bin/python3) are the HTTP/2 and
# gRPC test servers of tests/http2.rs (RST_STREAM, GOAWAY, grpc-status).
# gnutls-bin's gnutls-serv is the TLS server that is not OpenSSL's
# (tests/anatomy_tls.rs: its plaintext cannot be read, and is said so).
# libc6-dbg is libc's debug file: tests/stacks_resolve.rs expects it to
# name libc's local functions (__libc_start_call_main).
# golang-go's `go tool pprof` reads the pprof files sockscope writes
# (tests/stacks.rs, tests/tail_causes.rs); tmux is the terminal
# tests/top.rs runs `sockscope top` in and reads back.
# binutils' strip makes the stripped target of tests/stacks.rs; linux-perf
# and util-linux's taskset serve tests/stacks_perf.rs, which checks nginx's
# sampled stacks against perf record --call-graph dwarf.
TEST_PKGS := binutils strace bpftool util-linux linux-perf procps redis-server sockperf haproxy python3 postgresql \
	chromium valgrind nginx-light memcached openssl wrk nghttp2-client libmemcached-tools \
	iproute2 nftables dnsmasq-base prometheus python3-h2 python3-grpcio libc6-dbg gnutls-bin \
	golang-go tmux

.PHONY: all deps deps-build deps-demo build test test-steps bench demo lint clean image-check

all: build

# install_missing PACKAGES: apt-get installs those not installed yet.
define install_missing
	@need=""; \
	for p in $(1); do \
	  dpkg-query -W -f='$${Status}\n' "$$p" 2>/dev/null | grep -q '^install ok installed$$' || need="$$need $$p"; \
	done; \
	if [ -n "$$need" ]; then \
	  echo "make $@: installing:$$need"; \
	  if [ "$$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi; \
	  $$SUDO apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$need; \
	fi
	@command -v $(CARGO) >/dev/null || { \
	  echo "make $@: cargo not found; install Rust (https://rustup.rs) and retry" >&2; exit 1; }
endef

# Prerequisites run in the order listed (one apt-get at a time, packages
# before the build), also under -j.
.NOTPARALLEL:

# Everything: build, demo, test and benchmark packages.
deps:
	$(call install_missing,$(sort $(BUILD_PKGS) $(DEMO_PKGS) $(TEST_PKGS)))

deps-build:
	$(call install_missing,$(BUILD_PKGS))

deps-demo:
	$(call install_missing,$(BUILD_PKGS) $(DEMO_PKGS))

build: deps-build
	$(CARGO) build --release --locked

# The whole suite. Integration tests load BPF: as root they run; otherwise
# they print why they skip, and under CI=true they fail instead.
# It ends by printing how long it took, packages and build included.
test:
	@start=$$(date +%s); $(MAKE) --no-print-directory test-steps; rc=$$?; \
	  echo "make test: $$(( $$(date +%s) - start )) s, exit status $$rc"; exit $$rc

# It builds through `cargo test` alone, not `make build` first: dev-dependencies
# turn on features of shared dependencies (getrandom's std, under inferno),
# so `cargo build` and `cargo test` compile the crate and several of its
# dependencies twice over (about 4 minutes on 2 CPUs). `cargo test` builds
# target/release/sockscope too, which the tests run. Clippy runs inside
# that build (.ci/rustc-wrapper lints every test target with -D warnings),
# not as a pass of its own. .ci/test-lanes builds the test binaries and
# runs them two at a time, then the quiet ones alone (each says why).
test-steps: deps
	$(CARGO) fmt --all -- --check
	CARGO=$(CARGO) .ci/test-lanes

bench: deps build
	bench/overhead.sh
	bench/load.sh
	bench/relay.sh
	bench/http.sh
	bench/h2.sh
	bench/capacity.sh
	bench/stacks.sh
	bench/stacks_perf.sh
	bench/tail.sh
	bench/kv.sh
	bench/evidence.sh
	bench/udp_rr.sh
	DUTY=500ms/5s bench/anatomy.sh
	bench/agent.sh 60
	bench/agent-steady.sh
	bench/agent-rss.sh 600

# The built-in demonstration: the transport comparison (every point a
# traced profile), the UDP receive-buffer sweep and the tracer overhead
# benchmark, about two minutes on 2 CPUs, one HTML report (path printed at
# the end). BPF needs root: run as root, or sudo is used.
demo: deps-demo build
	@mkdir -p out
	@if [ "$$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi; \
	  $$SUDO $(BIN) demo --out out/demo

# The node agent's image built from deploy/k8s/Dockerfile (on a Debian base
# made with debootstrap) and run as deploy/k8s/agent-daemonset.yaml runs it,
# scraped by Prometheus with deploy/prometheus's rules; deploy/check.sh says
# which step failed (docs/deploy-check.md). Not part of `make test`: it
# installs podman and debootstrap, about 4 minutes cold, 100 s warm (the
# load outlasts the agent's 60 s sampling period).
image-check: build
	deploy/check.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf out bench/results
