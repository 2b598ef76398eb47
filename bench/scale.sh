#!/usr/bin/env bash
# Scale (issue 17, goal 5): memory per connection at 10,000 h1, 10,000 h2 (TLS) and 1,000 h3
# connections, in three states — open (handshaken, no request), idle (each has done a request
# and waits) and inflight (one request in flight each, on a delayed route) — for the server
# (hxlab serve --threads 1 vs nginx 1 worker for h1/h2, vs Caddy for h3, all loaded by
# `hxlab load`) and for the client (hxlab load vs h2load -c N; h2load only inflight, no h3);
# per connection = (RSS at N − baseline) / N, with the ratio ours/theirs (goal ≤ 1). Then new
# TLS handshakes per second: `hxlab load --no-keepalive` h1+TLS vs h2load --h1 with
# `Connection: close`, and h2 (all connections at once, one request each), against the same
# hxlab serve. Server on core 1, client on core 0. See bench/scale.py for how each state is held.
# Results are appended to bench/scale-results.txt (a header line with date and commit).
#
# usage: bench/scale.sh [--no-build] [--conns N] [--h3-conns N] [--hs-requests N] [--hs-conns C] [--only mem|handshakes]
#        defaults: --conns 10000 --h3-conns 1000 --hs-requests 20000 --hs-conns 50 (about 15 minutes)
# Run it under the machine's benchmark lock if it has one: flock /work/bench.lock bench/scale.sh
# needs: nginx, caddy, h2load, ss (iproute2), taskset, openssl, python3 (from .ci/run); an open-file
#        limit above N + 100 for one process (it raises the soft limit to the hard one; 10,000
#        connections need 10,100); the ephemeral port range holds 28,000 ports by default, enough
#        for 10,000 connections to one port. Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

N=10000
N3=1000
HS_N=20000
HS_C=50
ONLY=""
BUILD=1
usage() { sed -n '13,14p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --conns) N="$2"; shift ;;
    --h3-conns) N3="$2"; shift ;;
    --hs-requests) HS_N="$2"; shift ;;
    --hs-conns) HS_C="$2"; shift ;;
    --only) ONLY="$2"; shift ;;
    *) usage ;;
  esac
  shift
done

need_tools nginx caddy h2load ss taskset openssl python3
need_two_cores
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
NOFILE=$(ulimit -n)
if [ "$NOFILE" != unlimited ] && [ "$NOFILE" -lt $((N + 100)) ]; then
  echo "open-file limit $NOFILE is below --conns $N + 100: raise the hard limit or lower --conns" >&2
  exit 1
fi
[ "$NOFILE" = unlimited ] && NOFILE=65536
export SCALE_NOFILE=$NOFILE
release_bin "$BUILD"

RESULTS=bench/scale-results.txt
{
  results_header "bench/scale.sh --conns $N --h3-conns $N3 --hs-requests $HS_N --hs-conns $HS_C ${ONLY:+--only $ONLY}"
  echo "# nofile $NOFILE"
} | tee -a "$RESULTS"
python3 -u bench/scale.py "$BIN" "$N" "$N3" "$HS_N" "$HS_C" "$ONLY" | tee -a "$RESULTS"
