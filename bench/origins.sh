#!/usr/bin/env bash
# Origins side by side (issue 17, goal 3): server CPU per request and req/s of
# `hxlab serve --threads 1` beside nginx (1 worker), h2o (num-threads: 1) and Caddy
# (GOMAXPROCS=1), all pinned to core 1, the client pinned to core 0, in one run.
#   rows: h1, h1+TLS, h2 TLS -m10, h2c -m10 — each for a 100-byte and a 100 KiB object — against
#         nginx and h2o (client: h2load, --h1 for HTTP/1.1); h3 and h2 -m10 against Caddy and
#         against hxlab (client: `hxlab load`, h2load here has no h3).
#   also: bench/floor-h1.c (the least an HTTP/1.1 origin can do) and the same floor on tokio
#         (crates/hxlab-serve/examples/floor_h1_tokio.rs) in the h1 row, objects ≤ 64 KiB.
#   prints: req/s each, server CPU µs/request (user+sys of the server's process tree: every
#         thread, nginx's master+worker, h2o's helpers), peer/hx and hx/peer CPU ratios (goals,
#         issue 29: hx/peer ≤ 0.80 against nginx and ≤ 1.00 against h2o on every row, h3 ≤ 0.20
#         against Caddy), and h3 vs h2 CPU/request on the same server (for information).
# Results are appended to bench/origins-results.txt (a header line with date and commit).
#
# usage: bench/origins.sh [--no-build] [--reps N] [--duration SECONDS] [--conns N] [--sizes 100,100KiB] [--rows h1,h1+TLS,h3] [--nginx-sendfile]
#        defaults: --reps 3 --duration 5 --conns 50 --sizes 100,100KiB, every row, nginx with its own
#        defaults (sendfile off, as issue 29's goals were measured); --nginx-sendfile: nginx with
#        sendfile and tcp_nopush on, as Debian's nginx.conf ships them
# Run it under the machine's benchmark lock if it has one: flock /work/bench.lock bench/origins.sh
# needs: nginx, h2o, caddy, h2load, taskset, openssl, python3, gcc (all from .ci/run on Debian 12),
#        2 cores. Traffic stays on 127.0.0.1; every process it starts is ended by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

REPS=3
DUR=5
CONNS=50
SIZES=100,100KiB
ROWS=
BUILD=1
usage() { sed -n '16,19p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --reps) REPS="$2"; shift ;;
    --duration) DUR="$2"; shift ;;
    --conns) CONNS="$2"; shift ;;
    --sizes) SIZES="$2"; shift ;;
    --rows) ROWS="$2"; shift ;;
    --nginx-sendfile) export NGINX_SENDFILE=1 ;;
    *) usage ;;
  esac
  shift
done

need_tools nginx h2o caddy h2load taskset openssl python3 gcc
need_two_cores
release_bin "$BUILD"
if [ "$BUILD" = 1 ]; then
  nice cargo build --release -q -p hxlab-serve --example floor_h1_tokio
fi

RESULTS=bench/origins-results.txt
{
  results_header "bench/origins.sh --reps $REPS --duration $DUR --conns $CONNS --sizes $SIZES${ROWS:+ --rows $ROWS}${NGINX_SENDFILE:+ --nginx-sendfile}"
  echo "# versions: $(nginx -v 2>&1 | sed 's/.*: //'), $(h2o --version | head -1), caddy $(caddy version | cut -d' ' -f1), $(h2load --version | head -1)"
} | tee -a "$RESULTS"
python3 -u bench/origins.py "$BIN" "$REPS" "$DUR" "$CONNS" "$SIZES" "$ROWS" | tee -a "$RESULTS"
