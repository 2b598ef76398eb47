#!/usr/bin/env bash
# Client side, h3 vs h2 (issue 17, goal 4, and the oha row of goal 2): client CPU per request
# of `hxlab load --proto h3` and `--proto h2` against the same `hxlab serve --threads 1`
# (core 1), client on core 0, -c 50 with 10 streams per connection, for a 100-byte and a
# 100 KiB object — with oha (`--http-version 3` and `--http2`, -p 10) and h2load (h2, -m 10)
# measured beside them in the same run, the order rotating each repetition.
#   prints: client µs/request (user+sys of the client process), req/s, the server's µs/request,
#           and ratios: hxlab h3 / hxlab h2 (issue 29 goal 3: ≤ 1.5x at 100 B, ≤ 1.8x at
#           100 KiB), hxlab h3 / oha h3, hxlab h2 /
#           h2load h2, hxlab h2 / oha h2, oha h3 / oha h2.
# Results are appended to bench/client-h3-results.txt (a header line with date and commit).
#
# usage: bench/client-h3.sh [--no-build] [--reps N] [--requests N] [--conns N] [--sizes 100,100KiB]
#        defaults: --reps 5 --requests 100000 (a fifth of it for 100 KiB) --conns 50
# Run it under the machine's benchmark lock if it has one: flock /work/bench.lock bench/client-h3.sh
# The binary is target/release/hxlab, or $CARGO_TARGET_DIR/release/hxlab when that is set (a
# worktree that builds elsewhere benchmarks its own build).
# needs: h2load, taskset, openssl, python3 (from .ci/run); oha with HTTP/3: taken from OHA=path,
#        PATH or ~/.cargo/bin, else installed here with `cargo install oha --features http3 --locked`
#        (NO_OHA_INSTALL=1: skip the oha rows instead, saying so). Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

REPS=5
N=100000
CONNS=50
SIZES=100,100KiB
BUILD=1
usage() { sed -n '13,14p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --reps) REPS="$2"; shift ;;
    --requests|-n) N="$2"; shift ;;
    --conns) CONNS="$2"; shift ;;
    --sizes) SIZES="$2"; shift ;;
    *) usage ;;
  esac
  shift
done

need_tools h2load taskset openssl python3
need_two_cores
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
  if [ "$BUILD" = 1 ]; then nice cargo build --release -q -p hxlab; fi
  BIN="$CARGO_TARGET_DIR/release/hxlab"
  [ -x "$BIN" ] || { echo "no release binary at $BIN (run without --no-build)" >&2; exit 1; }
else
  release_bin "$BUILD"
fi

OHA_BIN=${OHA:-$(command -v oha || echo "$HOME/.cargo/bin/oha")}
RESULTS=bench/client-h3-results.txt
{
  results_header "bench/client-h3.sh --reps $REPS --requests $N --conns $CONNS --sizes $SIZES"
  echo "# versions: $(h2load --version | head -1), $("$OHA_BIN" --version 2>/dev/null || echo 'oha: not installed yet')"
} | tee -a "$RESULTS"
python3 -u bench/client_h3.py "$BIN" "$REPS" "$N" "$CONNS" "$SIZES" | tee -a "$RESULTS"
