# sockscope — build, test, benchmark and demo entry points.
# `make demo` and `make test` work on a fresh Debian 12 machine: `deps`
# installs the missing packages first (and does nothing when they are there).

SHELL := /bin/bash
CARGO ?= cargo
BIN := target/release/sockscope

# Build: clang/llvm compile the BPF programs; libelf, zlib and pkg-config
# are needed by libbpf-sys; gcc and libc6-dev link the binary and build the
# static test workload.
BUILD_PKGS := clang llvm libelf-dev zlib1g-dev pkg-config gcc libc6-dev make
# Tests and benchmarks: real peers and cross-checks.
TEST_PKGS := strace bpftool util-linux linux-perf procps redis-server sockperf haproxy python3

.PHONY: all deps build test test-unit test-integration bench demo lint clean

all: build

deps:
	@need=""; \
	for p in $(BUILD_PKGS) $(TEST_PKGS); do \
	  dpkg-query -W -f='$${Status}\n' "$$p" 2>/dev/null | grep -q '^install ok installed$$' || need="$$need $$p"; \
	done; \
	if [ -n "$$need" ]; then \
	  echo "make deps: installing:$$need"; \
	  if [ "$$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi; \
	  $$SUDO apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$need; \
	fi
	@command -v $(CARGO) >/dev/null || { \
	  echo "make deps: cargo not found; install Rust (https://rustup.rs) and retry" >&2; exit 1; }

build: deps
	$(CARGO) build --release --locked

# The whole suite. Integration tests load BPF: as root they run; otherwise
# they print why they skip, and under CI=true they fail instead.
test: build
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --locked --all-targets -- -D warnings
	$(CARGO) test --release --locked

bench: build
	bench/overhead.sh
	bench/load.sh
	bench/relay.sh

# A short built-in demonstration: trace a small workload that forks, spawns
# threads and fails some calls, and show the table and JSON path.
demo: build
	@mkdir -p out
	$(BIN) trace --per-thread --json out/demo-trace.json -- \
	  sh -c 'for i in 1 2 3; do ls /nonexistent-$$i 2>/dev/null; done; \
	         dd if=/dev/zero of=/dev/null bs=4k count=20000 2>/dev/null; \
	         (sleep 0.2 & wait); echo demo done'
	@echo "JSON written to out/demo-trace.json"

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf out bench/results
