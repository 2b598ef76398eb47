#!/usr/bin/env bash
# One run in one process against the same run as 2 shards (`hxlab load --shard I/2`, started
# together with --start-at, merged with `hxlab merge`) on this machine, with h2load at the
# same totals beside them: merged req/s and percentiles side by side. Then the time
# `hxlab merge` takes for 100 shard files (goal: < 1 s).
#
# Server: `hxlab serve --threads 1` pinned to core 1; every client on core 0 (both shards
# share it, as the single process has it alone), h2c, -c 100 -m 10 -n 1000000 by default.
#
# Usage: bench/shards.sh                    (N=1000000 REPS=3)
#        N=200000 REPS=5 bench/shards.sh
# Needs: h2load, taskset, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
REPS=${REPS:-3}
nice cargo build --release -p hxlab >/dev/null 2>&1 || { echo "release build failed" >&2; exit 1; }
for tool in h2load taskset python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
exec python3 bench/shards.py "$PWD/target/release/hxlab" "$N" "$REPS"
