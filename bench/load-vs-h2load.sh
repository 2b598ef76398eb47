#!/usr/bin/env bash
# Client CPU time per request and req/s of `hxlab load` against h2load and wrk, same server,
# same -n/-c/-m, measured side by side in one run. nginx (1 worker) is pinned to core 1, the
# client to core 0; the object is 100 bytes. Prints a table with ratios (hxlab / best peer).
#
# Usage: bench/load-vs-h2load.sh            (N=200000 REPS=3 by default)
#        N=100000 REPS=5 bench/load-vs-h2load.sh
# Needs: nginx, h2load, wrk, openssl, taskset, python3; optional: hxlab serve for the h3 row.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200000}
REPS=${REPS:-3}
WRK_SECS=${WRK_SECS:-3}
nice cargo build --release -p hxlab >/dev/null 2>&1 || { echo "release build failed" >&2; exit 1; }
BIN=$PWD/target/release/hxlab
for tool in nginx h2load wrk openssl taskset python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
exec python3 bench/load-bench.py "$BIN" "$N" "$REPS" "$WRK_SECS"
