#!/usr/bin/env bash
# Soak (issue 17, goal 5): a long open-model run, `hxlab load --proto h2 --rate 20000 -c 50 -m 10`
# for 5 minutes against `hxlab serve --threads 1` (server on core 1, client on core 0),
# sampling the client's RSS every second from /proc and reading its send lag p99 per minute
# (`--interval 60s --print-intervals`, column `lag p99 ms`). Prints first-minute vs
# last-minute RSS (goal: within 5 %) and send lag p99, first vs last minute. With --minutes
# below 2 the windows are a third of the run (a short trial).
# Results are appended to bench/soak-results.txt (a header line with date and commit).
#
# usage: bench/soak.sh [--no-build] [--minutes N] [--rate R] [--conns C] [-m M]
#        defaults: --minutes 5 --rate 20000 --conns 50 -m 10
# Run it under the machine's benchmark lock if it has one: flock /work/bench.lock bench/soak.sh
# needs: taskset, openssl, python3; 2 cores. Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

MINUTES=5
RATE=20000
CONNS=50
M=10
BUILD=1
usage() { sed -n '10,11p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --minutes) MINUTES="$2"; shift ;;
    --rate) RATE="$2"; shift ;;
    --conns) CONNS="$2"; shift ;;
    -m) M="$2"; shift ;;
    *) usage ;;
  esac
  shift
done

need_tools taskset openssl python3
need_two_cores
release_bin "$BUILD"

RESULTS=bench/soak-results.txt
results_header "bench/soak.sh --minutes $MINUTES --rate $RATE --conns $CONNS -m $M" | tee -a "$RESULTS"
python3 -u bench/soak.py "$BIN" "$MINUTES" "$RATE" "$CONNS" "$M" | tee -a "$RESULTS"
