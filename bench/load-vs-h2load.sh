#!/usr/bin/env bash
# Client CPU time per request and req/s of `hxlab load` against h2load, wrk and (for h3) oha,
# on the same servers — nginx with 1 worker and `hxlab serve --threads 1`, each pinned to
# core 1 — with the client on core 0, same -n/-c/-m, interleaved in one run. Prints medians,
# spreads and ratios (hxlab / best peer), and floor clients (bench/floor-*.c: clients that
# only send and receive) that show how much of the cost is the kernel's, not the client's.
#
# Usage: bench/load-vs-h2load.sh            (N=200000 REPS=5 by default)
#        N=100000 REPS=7 OHA=/path/to/oha bench/load-vs-h2load.sh
#        HXLAB_BASE=/path/to/older/hxlab bench/load-vs-h2load.sh   (its client beside ours: before/after)
# Needs: nginx, h2load, wrk, openssl, taskset, python3, gcc; optional: liburing-dev (io_uring
# floor), oha built with `cargo install oha --features http3` (h3 peer).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200000}
REPS=${REPS:-5}
WRK_SECS=${WRK_SECS:-3}
nice cargo build --release -p hxlab >/dev/null 2>&1 || { echo "release build failed" >&2; exit 1; }
BIN=$PWD/target/release/hxlab
for tool in nginx h2load wrk openssl taskset python3 gcc; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
gcc -O2 -o "$OUT/floor-epoll" bench/floor-client.c
gcc -O2 -o "$OUT/floor-h2c" bench/floor-h2c.c
FLOORS=("h1=$OUT/floor-epoll" "h2c=$OUT/floor-h2c")
if [ -e /usr/include/liburing.h ] && gcc -O2 -o "$OUT/floor-uring" bench/floor-uring.c -luring 2>/dev/null; then
  FLOORS+=("h1=$OUT/floor-uring")
else
  echo "(liburing-dev not installed: no io_uring floor row)" >&2
fi
python3 bench/load-bench.py "$BIN" "$N" "$REPS" "$WRK_SECS" "${FLOORS[@]}"
