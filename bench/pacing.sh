#!/usr/bin/env bash
# Open-model pacing of `hxlab load --rate`: how late requests leave (send lag = actual send −
# due) and how far corrected latency sits from uncorrected latency on an idle server, at
# --rate 1000 and 50000 against `hxlab serve --threads 1` (core 1) with the client on core 0.
# Rows: the timerfd with the cooperative last-stretch spin (default), the timerfd alone
# (HXLAB_PACING=timer), and vegeta (an open-model peer, `go install
# github.com/tsenart/vegeta/v12@latest`) when installed, whose latency p50 is shown beside ours.
# Goal (issue 11): send lag p99 ≤ 50 µs and corrected p50 within 100 µs of uncorrected p50.
#
# Usage: bench/pacing.sh            (SECS=5 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-5}
nice cargo build --release -p hxlab >/dev/null 2>&1 || { echo "release build failed" >&2; exit 1; }
BIN=$PWD/target/release/hxlab
OUT=$(mktemp -d)
SP=
cleanup() { [ -n "$SP" ] && kill "$SP" 2>/dev/null; rm -rf "$OUT"; }
trap cleanup EXIT
taskset -c 1 "$BIN" serve --threads 1 --tls-port 0 --plain-port 0 --ready-file "$OUT/ready.json" >/dev/null 2>&1 &
SP=$!
for _ in $(seq 100); do [ -s "$OUT/ready.json" ] && break; sleep 0.1; done
PLAIN=$(python3 -c "import json;print(json.load(open('$OUT/ready.json'))['plain'])")
printf '%-8s %-26s %10s %10s %10s %12s %12s %10s %8s\n' rate client "lag p50" "lag p99" "lag max" "corr p50" "uncorr p50" "CPU us/r" note
summ() { # one row from hxlab load's own summary (its percentiles)
  awk -v rate="$1" -v label="$2" '
    /^send lag:/ {lp50=$7; lp99=$9; lmax=$4}
    /^time for request:/ {cp50=$8}
    /\(uncorrected\):/ {up50=$6}
    /^client CPU/ {cpu=$(NF-1)}
    /fell behind/ {note="behind"}
    END {printf "%-8s %-26s %10s %10s %10s %12s %12s %10s %8s\n", rate, label, lp50, lp99, lmax, cp50, up50, cpu, note}' "$OUT/summary.txt"
}
for rate in 1000 50000; do
  if [ "$rate" = 50000 ]; then EXTRA=(-c 10 -m 10); PROTO=h2c; else EXTRA=(-c 1); PROTO=h1; fi
  for mode in spin timer; do
    HXLAB_PACING=$mode taskset -c 0 "$BIN" load --rate "$rate" -D "${SECS}s" --proto "$PROTO" "${EXTRA[@]}" \
      --no-progress "http://$PLAIN/delay/0" > "$OUT/summary.txt" 2>&1 || true
    summ "$rate" "hxlab $PROTO ($mode)"
  done
  if command -v vegeta >/dev/null; then
    echo "GET http://$PLAIN/delay/0" | taskset -c 0 vegeta attack -rate="$rate" -duration="${SECS}s" -workers 10 -max-workers 64 \
      > "$OUT/v.bin" 2>/dev/null || true
    vegeta report -type=json < "$OUT/v.bin" | python3 -c "
import json,sys; v=json.load(sys.stdin); l=v['latencies']
print('%-8s %-26s %10s %10s %10s %12s %12s %10s' % ('$rate','vegeta (h1)','-','-','-','-','%.0fus' % (l['50th']/1000),'-'))"
  else
    echo "(vegeta not installed: no peer row at $rate)"
  fi
done
