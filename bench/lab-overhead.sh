#!/usr/bin/env bash
# The experiment runner's overhead over the cells' own measured times (goal: ≤ 5 %).
# Runs `hxlab compare` (release build) and splits the overhead into the part inside each
# repetition (starting `hxlab load`, its runtime and TLS setup, writing JSON: wall_s − duration_s
# per record) and the part between repetitions (/stats, records, bookkeeping).
# Usage: bench/lab-overhead.sh [extra compare args, e.g. --repetitions 3]
set -euo pipefail
cd "$(dirname "$0")/.."
nice cargo build --release -q -p hxlab
BIN=$PWD/target/release/hxlab
OUT=$(mktemp -d /tmp/hxlab-lab-overhead.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
HXLAB_BIN=$BIN "$BIN" compare --no-progress --out "$OUT/cmp" "$@" >"$OUT/stdout" 2>"$OUT/stderr" || {
  cat "$OUT/stderr"; exit 1; }
grep -E "^(runner overhead|[0-9]+ runs)" "$OUT/stdout"
python3 - "$OUT/cmp/results.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ran = [r for r in recs if r.get("result")]
measured = sum(r["result"]["duration_s"] for r in ran)
wall = sum(r["wall_s"] for r in ran)
n = len(ran)
print(f"repetitions with a result: {n}; measured {measured:.2f} s; child wall {wall:.2f} s")
if n:
    print(f"inside a repetition (process start, runtime, JSON): {(wall - measured) / n * 1000:.1f} ms each, "
          f"{(wall - measured) / measured * 100:.1f} % of measured")
PY
