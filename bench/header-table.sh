#!/usr/bin/env bash
# The header table's cost (issue 42): CPU per request of `hxlab load` and `hxlab serve` with
# the dynamic table on (--header-table 4096) and off (--header-table 0), over h3 and h2
# beside it, 100-byte responses; header bytes per request and response from the records.
#   prints: client and server µs/request per row, and the ratios table on / off (goal for
#           h3: ≤ 1.05x, client and server); then the same ratio for a peer client in the
#           same run (gtlsclient: ngtcp2 with nghttp3's QPACK, against the server's table on / off).
# Results are appended to bench/header-table-results.txt (a header line with date and commit).
#
# usage: bench/header-table.sh [--no-build] [--reps N] [--requests N] [--conns N]
#        defaults: --reps 5 --requests 100000 --conns 50
# needs: taskset, openssl, python3. Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

REPS=5
N=100000
CONNS=50
BUILD=1
usage() { sed -n '9,10p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --reps) REPS="$2"; shift ;;
    --requests|-n) N="$2"; shift ;;
    --conns) CONNS="$2"; shift ;;
    *) usage ;;
  esac
  shift
done

need_tools taskset openssl python3
need_two_cores
release_bin "$BUILD"
RESULTS=bench/header-table-results.txt
results_header "bench/header-table.sh --reps $REPS --requests $N --conns $CONNS" | tee -a "$RESULTS"
python3 -u bench/header_table.py "$BIN" "$REPS" "$N" "$CONNS" | tee -a "$RESULTS"
