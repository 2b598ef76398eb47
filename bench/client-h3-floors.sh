#!/usr/bin/env bash
# HTTP/3 client floors on two QUIC stacks (issue 29, goal 3: "is our h3 client's CPU per request
# quinn-proto's limit, or QUIC's on this machine?"): client CPU per request of
# `hxlab load --proto h2`, `hxlab load --proto h3`, the bare quinn-proto client
# (crates/hxlab-load/examples/proto_h3.rs) and a bare client on Cloudflare's quiche
# (bench/floor-quiche, a standalone Cargo project with BoringSSL, not part of the workspace),
# — and the same quiche floor built on a copy of quiche patched to coalesce STREAM frames (see
# below) — against the same `hxlab serve --threads 1` (core 1), clients on core 0, 50
# connections × 10 requests in flight, for a 100-byte and a 100 KiB object, the order rotating
# each repetition.
#   prints: client µs/request (user+sys of the client process), req/s, the server's µs/request,
#           the floors' datagrams per request, and the ratio of each h3 client to our h2 client.
# Results are appended to bench/client-h3-results.txt (a header line with date and commit).
#
# usage: bench/client-h3-floors.sh [--no-build|--build-only] [--reps N] [--requests N] [--conns N] [--sizes 100,100KiB]
#        defaults: --reps 5 --requests 100000 (a fifth of it for 100 KiB) --conns 50
# Run it under the machine's benchmark lock: flock /work/bench.lock bench/client-h3-floors.sh
# Binaries: $CARGO_TARGET_DIR (or target/)/release/{hxlab,examples/proto_h3}, and floor-quiche
# built in the same target dir ($CARGO_TARGET_DIR, or bench/floor-quiche/target).
# needs: taskset, openssl, python3, cargo, and cmake + a C/C++ compiler for quiche's BoringSSL.
# Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

REPS=5
N=100000
CONNS=50
SIZES=100,100KiB
BUILD=1
BUILD_ONLY=0
usage() { sed -n '15,16p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --build-only) BUILD_ONLY=1 ;;
    --reps) REPS="$2"; shift ;;
    --requests|-n) N="$2"; shift ;;
    --conns) CONNS="$2"; shift ;;
    --sizes) SIZES="$2"; shift ;;
    *) usage ;;
  esac
  shift
done

need_tools taskset openssl python3
need_two_cores
release_bin "$BUILD"
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
QTARGET="${CARGO_TARGET_DIR:-$PWD/bench/floor-quiche/target}"
if [ "$BUILD" = 1 ]; then
  nice cargo build --release -q -p hxlab-load --example proto_h3
  (cd bench/floor-quiche && CARGO_TARGET_DIR="$QTARGET" nice cargo build --release -q)
  # The same floor on quiche with one line changed: quiche puts one STREAM frame in a packet
  # (it coalesces STREAM frames of several streams only when built for fuzzing, which also
  # turns its encryption off), so 10 requests are 10 packets where quinn-proto sends one.
  # The copy drops that `#[cfg(feature = "fuzzing")]`: every packet then carries as many
  # STREAM frames as fit, as quinn-proto's do — the wire like for like. Built from copies
  # (quiche's source and this project's) under the target dir: nothing here changes.
  QSRC=$(cd bench/floor-quiche && cargo metadata -q --format-version 1 --locked |
         python3 -c 'import json,sys; print([p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "quiche"][0])')
  QPATCH="$QTARGET/coalesce/$(basename "$(dirname "$QSRC")")"
  mkdir -p "$QTARGET/coalesce/floor"
  cp -r bench/floor-quiche/Cargo.toml bench/floor-quiche/Cargo.lock bench/floor-quiche/src "$QTARGET/coalesce/floor/"
  if ! grep -q "floor-quiche patch" "$QPATCH/src/lib.rs" 2>/dev/null; then
    rm -rf "$QPATCH"
    cp -r "$(dirname "$QSRC")" "$QPATCH"
    python3 - "$QPATCH/src/lib.rs" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
old = '#[cfg(feature = "fuzzing")]\n                // Coalesce STREAM frames when fuzzing.\n'
if s.count(old) != 1:
    sys.exit("quiche's STREAM-coalescing line not found: the patch does not apply to this quiche")
open(p, "w").write(s.replace(old, "// Coalesce STREAM frames (floor-quiche patch: always).\n"))
PY
  fi
  (cd "$QTARGET/coalesce/floor" && CARGO_TARGET_DIR="$QTARGET/coalesce/target" nice cargo build --release -q \
     --config "patch.crates-io.quiche.path=\"$QPATCH\"")
fi
PROTO_H3="$TARGET/release/examples/proto_h3"
QUICHE="$QTARGET/release/floor-quiche"
QUICHE_CO="$QTARGET/coalesce/target/release/floor-quiche"
for b in "$PROTO_H3" "$QUICHE" "$QUICHE_CO"; do
  [ -x "$b" ] || { echo "no binary at $b (run without --no-build)" >&2; exit 1; }
done
[ "$BUILD_ONLY" = 0 ] || exit 0

RESULTS=bench/client-h3-results.txt
{
  results_header "bench/client-h3-floors.sh --reps $REPS --requests $N --conns $CONNS --sizes $SIZES"
  echo "# floors: proto_h3 (quinn-proto $(grep -A1 '^name = "quinn-proto"' Cargo.lock | sed -n 's/version = "\(.*\)"/\1/p')), floor-quiche (quiche $(grep -A1 '^name = "quiche"' bench/floor-quiche/Cargo.lock 2>/dev/null | sed -n 's/version = "\(.*\)"/\1/p'))"
} | tee -a "$RESULTS"
python3 -u bench/client_h3_floors.py "$BIN" "$PROTO_H3" "$QUICHE" "$QUICHE_CO" "$REPS" "$N" "$CONNS" "$SIZES" | tee -a "$RESULTS"
