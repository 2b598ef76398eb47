#!/usr/bin/env bash
# The origin's HTTP/1.1 request framer (hxlab_wire::h1_request) beside httparse, hyper's parser,
# on the same request heads (h2load's, curl's, a browser's): nanoseconds per head, best of
# several rounds, on core 1. The framer does more (it reads Host, the body framing, Connection
# and Expect, and refuses ambiguous framing), so hx/peer above 1 is what that costs.
# Results are appended to bench/framer-results.txt.
#
# usage: bench/framer.sh [--rounds N] [--iterations N]
#        defaults: --rounds 7 --iterations 2000000
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

ROUNDS=7
ITERATIONS=2000000
usage() { sed -n '8,9p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="${2-}"; shift ;;
    --iterations) ITERATIONS="${2-}"; shift ;;
    *) usage ;;
  esac
  shift
done

need_tools taskset
need_two_cores
nice cargo build --release -q -p hxlab-wire --example framer_bench
EXE="${CARGO_TARGET_DIR:-$PWD/target}/release/examples/framer_bench"

RESULTS=bench/framer-results.txt
{
  results_header "bench/framer.sh --rounds $ROUNDS --iterations $ITERATIONS"
  echo "# httparse $(grep -A1 '^name = "httparse"' Cargo.lock | sed -n 's/^version = "\(.*\)"/\1/p'), one core (taskset -c 1)"
  taskset -c 1 "$EXE" "$ROUNDS" "$ITERATIONS"
} | tee -a "$RESULTS"
