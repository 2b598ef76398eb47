#!/usr/bin/env bash
# Client side, h3 vs h2 (issue 17, goal 4, and the oha row of goal 2): client CPU per request
# of `hxlab load --proto h3` and `--proto h2` against the same `hxlab serve --threads 1`
# (core 1), client on core 0, -c 50 with 10 streams per connection, for a 100-byte and a
# 100 KiB object — with oha (`--http-version 3` and `--http2`, -p 10) and h2load (h2, -m 10)
# measured beside them in the same run, the order rotating each repetition.
#   prints: client µs/request (user+sys of the client process), req/s, the server's µs/request,
#           and ratios: hxlab h3 / hxlab h2 (goal ≤ 1.5x), hxlab h3 / oha h3, hxlab h2 /
#           h2load h2, hxlab h2 / oha h2, oha h3 / oha h2.
# Results are appended to bench/client-h3-results.txt (a header line with date and commit).
#
# usage: bench/client-h3.sh [--no-build] [--reps N] [--requests N] [--conns N] [--sizes 100,100KiB]
#        defaults: --reps 5 --requests 100000 (a fifth of it for 100 KiB) --conns 50
# Run it under the machine's benchmark lock if it has one: flock /work/bench.lock bench/client-h3.sh
# needs: h2load, taskset, openssl, python3 (from .ci/run); oha with HTTP/3: taken from OHA=path,
#        PATH or ~/.cargo/bin, else installed here with `cargo install oha --features http3 --locked`
#        (NO_OHA_INSTALL=1: skip the oha rows instead, saying so). Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=5
N=100000
CONNS=50
SIZES=100,100KiB
BUILD=1
usage() { sed -n '12,13p' "$0" >&2; exit 2; }
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

for tool in h2load taskset openssl python3; do
  command -v "$tool" >/dev/null || { echo "missing tool: $tool (bash .ci/run installs it)" >&2; exit 1; }
done
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cores (server on core 1, client on core 0)" >&2; exit 1; }
if [ "$BUILD" = 1 ]; then
  nice cargo build --release -q -p hxlab
fi
BIN="$PWD/target/release/hxlab"
[ -x "$BIN" ] || { echo "no release binary at $BIN (run without --no-build)" >&2; exit 1; }

OHA_BIN=${OHA:-$(command -v oha || echo "$HOME/.cargo/bin/oha")}
RESULTS=bench/client-h3-results.txt
{
  echo
  echo "# bench/client-h3.sh --reps $REPS --requests $N --conns $CONNS --sizes $SIZES, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# versions: $(h2load --version | head -1), $("$OHA_BIN" --version 2>/dev/null || echo 'oha: not installed yet')"
} | tee -a "$RESULTS"
python3 -u bench/client_h3.py "$BIN" "$REPS" "$N" "$CONNS" "$SIZES" | tee -a "$RESULTS"
