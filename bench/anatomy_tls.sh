#!/usr/bin/env bash
# What reading TLS plaintext costs nginx (docs/benchmarks.md, "TLS
# plaintext"): bench/anatomy_h2.sh with TLS=1, which says how.
#
#   bench/anatomy_tls.sh [REQUESTS]      (default 60000; ROUNDS=3)
TLS=1 exec "$(dirname "$0")/anatomy_h2.sh" "$@"
