#!/usr/bin/env bash
# The HTTP/3 server floor on quinn-proto (issue 29, goal 1: "h3 ≤ 0.2× Caddy's server CPU per
# request" — is it within reach of an HTTP/3 server on quinn-proto at all?): server CPU per
# request and req/s of `hxlab serve --threads 1` (h3), the bare quinn-proto server
# (crates/hxlab-serve/examples/proto_h3_server.rs: one thread, GSO up to 45 segments, what
# fits in one 64 KiB UDP send) and the same floor with GSO capped at 10 segments (`--segments 10`, as quinn's
# connection driver caps it), and Caddy (GOMAXPROCS=1), each pinned to core 1, the client
# `hxlab load --proto h3 -c 50 -m 10` pinned to core 0, for a 100-byte and a 100 KiB object;
# the order rotates each repetition. Server CPU = user+sys of the server's process tree over
# the run ÷ requests that succeeded (as bench/origins.sh); medians of the repetitions.
#   prints: req/s and µs/request of each server, UDP receive-buffer drops per 1000 requests,
#           the ratios floor/Caddy, hxlab/Caddy, hxlab/floor (for both floors), and the floors'
#           own counts (sendmsg calls and datagrams per request, packets lost).
#   --perf: instead, `perf record` the floor (45 segments) at 100 KiB for one run under the
#           same load and print a rough breakdown of its CPU (quinn-proto, crypto, kernel,
#           malloc, memcpy, ...), the perf.data kept under $TMPDIR (also appended to the results).
# Results are appended to bench/server-h3-floor-results.txt (a header line with date and commit).
#
# usage: bench/server-h3-floor.sh [--no-build] [--reps N] [--duration SECONDS] [--conns N] [--sizes 100,100KiB] [--perf]
#        defaults: --reps 3 --duration 5 --conns 50 --sizes 100,100KiB
# Run it under the machine's benchmark lock: flock /work/bench.lock bench/server-h3-floor.sh
# Binaries: $CARGO_TARGET_DIR (or target/)/release/{hxlab,examples/proto_h3_server}.
# needs: caddy, taskset, openssl, python3 (perf for --perf), 2 cores. Traffic stays on
# 127.0.0.1; every process it starts is ended by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

REPS=3
DUR=5
CONNS=50
SIZES=100,100KiB
BUILD=1
PERF=0
usage() { sed -n '19,20p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --reps) REPS="$2"; shift ;;
    --duration) DUR="$2"; shift ;;
    --conns) CONNS="$2"; shift ;;
    --sizes) SIZES="$2"; shift ;;
    --perf) PERF=1 ;;
    *) usage ;;
  esac
  shift
done

need_tools caddy taskset openssl python3
[ "$PERF" = 0 ] || need_tools perf
need_two_cores
release_bin "$BUILD"
if [ "$BUILD" = 1 ]; then
  nice cargo build --release -q -p hxlab-serve --example proto_h3_server
fi
FLOOR="${CARGO_TARGET_DIR:-$PWD/target}/release/examples/proto_h3_server"
[ -x "$FLOOR" ] || { echo "no binary at $FLOOR (run without --no-build)" >&2; exit 1; }

RESULTS=bench/server-h3-floor-results.txt
if [ "$PERF" = 1 ]; then
  results_header "bench/server-h3-floor.sh --perf --duration $DUR --conns $CONNS" | tee -a "$RESULTS"
  python3 -u bench/server_h3_floor.py "$BIN" "$FLOOR" perf "$DUR" "$CONNS" 100KiB | tee -a "$RESULTS"
  exit 0
fi
{
  results_header "bench/server-h3-floor.sh --reps $REPS --duration $DUR --conns $CONNS --sizes $SIZES"
  echo "# versions: quinn $(grep -A1 '^name = "quinn"' Cargo.lock | sed -n 's/version = "\(.*\)"/\1/p'), quinn-proto $(grep -A1 '^name = "quinn-proto"' Cargo.lock | sed -n 's/version = "\(.*\)"/\1/p'), caddy $(caddy version | cut -d' ' -f1)"
} | tee -a "$RESULTS"
python3 -u bench/server_h3_floor.py "$BIN" "$FLOOR" "$REPS" "$DUR" "$CONNS" "$SIZES" | tee -a "$RESULTS"
