#!/usr/bin/env bash
# Urgent behind bulk for hxlab serve (before/after, each scheduler), h2o, nginx and Caddy on
# h2 and h3 behind a 10 Mbit/s, 50 ms RTT link (bench/priority.py); appends to
# bench/priority-results.txt. Usage: bench/priority.sh [--no-build] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
build=1
if [ "${1:-}" = --no-build ]; then build=0; shift; fi
need_tools h2o nginx caddy taskset
release_bin "$build"
{
  results_header "bench/priority.sh $*"
  python3 bench/priority.py "$BIN" "${1:-3}"
} | tee -a bench/priority-results.txt
