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

for tool in taskset openssl python3; do
  command -v "$tool" >/dev/null || { echo "missing tool: $tool" >&2; exit 1; }
done
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cores (server on core 1, client on core 0)" >&2; exit 1; }
if [ "$BUILD" = 1 ]; then
  nice cargo build --release -q -p hxlab
fi
BIN="$PWD/target/release/hxlab"
[ -x "$BIN" ] || { echo "no release binary at $BIN (run without --no-build)" >&2; exit 1; }

RESULTS=bench/soak-results.txt
echo "
# bench/soak.sh --minutes $MINUTES --rate $RATE --conns $CONNS -m $M, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$RESULTS"
python3 -u bench/soak.py "$BIN" "$MINUTES" "$RATE" "$CONNS" "$M" | tee -a "$RESULTS"
