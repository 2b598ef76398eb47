#!/usr/bin/env bash
# Fuzzes hxlab's parsers with cargo-fuzz (libFuzzer); see docs/fuzzing.md.
#
#   bench/fuzz.sh [SECONDS] [TARGET...]   fuzz each target for SECONDS (default 600), one
#                                         after the other (one core), and print per target:
#                                         executions, coverage (cov, ft), corpus size, crash file
#   bench/fuzz.sh --ci [TARGET...]        build every target, replay fuzz/regressions/, then run
#                                         each target FUZZ_CI_RUNS (default 2000) executions
#                                         starting from its seed corpus; exits non-zero when a
#                                         target fails to build or crashes
#
# Without TARGET, every target (`cargo fuzz list`). Needs cargo-fuzz
# (`cargo install cargo-fuzz --locked`). On a stable toolchain the script sets
# RUSTC_BOOTSTRAP=1 so rustc accepts the -Z flags cargo-fuzz passes (sanitizer, coverage).
#
# Environment: CARGO_TARGET_DIR (default fuzz/target), FUZZ_SANITIZER (address | none; default address), FUZZ_CI_RUNS (default 2000),
# FUZZ_JOBS_ARGS (extra libFuzzer arguments, e.g. "-max_len=8192").
#
# The seed corpora in fuzz/corpus/ are only read: what libFuzzer adds goes to
# $TARGET_DIR/corpus/<target>/ (timed runs, kept between runs) or a fresh
# $TARGET_DIR/ci-corpus/<target>/ (--ci). Crashes go to fuzz/artifacts/<target>/; logs to
# $TARGET_DIR/logs/<target>.log.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
export RUSTC_BOOTSTRAP=1
# cargo-fuzz sets this for its own runs; libFuzzer binaries run directly need it too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0}
SAN=${FUZZ_SANITIZER:-address}
CI_RUNS=${FUZZ_CI_RUNS:-2000}
EXTRA=${FUZZ_JOBS_ARGS:-}
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
# cargo (and so cargo-fuzz) honours CARGO_TARGET_DIR; the default is fuzz/target.
TARGET_DIR=${CARGO_TARGET_DIR:-fuzz/target}
BIN_DIR="$TARGET_DIR/$TRIPLE/release"
LOGS=$TARGET_DIR/logs

ci=0
seconds=600
if [ "${1:-}" = "--ci" ]; then
    ci=1
    shift
elif [ -n "${1:-}" ] && [ "$1" -eq "$1" ] 2>/dev/null; then
    seconds=$1
    shift
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz is missing: cargo install cargo-fuzz --locked" >&2
    exit 2
fi
if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

mkdir -p "$LOGS"
t0=$(date +%s)
echo "building ${#targets[@]} targets (sanitizer: $SAN) ..."
if [ $# -gt 0 ]; then
    for t in "${targets[@]}"; do
        cargo fuzz build -s "$SAN" "$t" >"$LOGS/build.log" 2>&1 || {
            tail -30 "$LOGS/build.log"
            echo "fuzz.sh: building $t failed (log: $LOGS/build.log)" >&2
            exit 1
        }
    done
elif ! cargo fuzz build -s "$SAN" >"$LOGS/build.log" 2>&1; then
    tail -30 "$LOGS/build.log"
    echo "fuzz.sh: the build failed (log: $LOGS/build.log)" >&2
    exit 1
fi
t1=$(date +%s)
echo "built in $((t1 - t0)) s"

# Fields of a libFuzzer log: executions, cov, ft, corpus units, crash file.
summary() {
    local log=$1
    local execs cov ft corp crash
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    local last
    last=$(grep -E '^#[0-9]+.*cov: [0-9]+' "$log" | tail -1)
    cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
    crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    echo "${execs:--} ${cov:--} ${ft:--} ${corp:--} ${crash:--}"
}

failed=0
printf '%-16s %-7s %12s %6s %6s %12s  %s\n' target status execs cov ft corpus crash
for t in "${targets[@]}"; do
    bin="$BIN_DIR/$t"
    log="$LOGS/$t.log"
    mkdir -p "fuzz/artifacts/$t" "fuzz/corpus/$t"
    status=ok
    if [ $ci -eq 1 ]; then
        # Known crashes first: each file of fuzz/regressions/<target>/ runs once.
        if [ -d "fuzz/regressions/$t" ] && [ -n "$(ls -A "fuzz/regressions/$t")" ]; then
            if ! "$bin" -runs=1 "fuzz/regressions/$t"/* >"$LOGS/$t.regressions.log" 2>&1; then
                status=REGRESS
            fi
        fi
        work="$TARGET_DIR/ci-corpus/$t"
        rm -rf "$work"
        mkdir -p "$work"
        # shellcheck disable=SC2086
        "$bin" -runs="$CI_RUNS" -seed=1 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="fuzz/artifacts/$t/" $EXTRA "$work" "fuzz/corpus/$t" >"$log" 2>&1 \
            || status=CRASH
    else
        work="$TARGET_DIR/corpus/$t"
        mkdir -p "$work"
        # shellcheck disable=SC2086
        "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="fuzz/artifacts/$t/" $EXTRA "$work" "fuzz/corpus/$t" >"$log" 2>&1 \
            || status=CRASH
    fi
    read -r execs cov ft corp crash <<<"$(summary "$log")"
    if [ "$status" = REGRESS ]; then
        crash="fuzz/regressions/$t (log: $LOGS/$t.regressions.log)"
    fi
    [ "$status" = ok ] || failed=1
    printf '%-16s %-7s %12s %6s %6s %12s  %s\n' "$t" "$status" "$execs" "$cov" "$ft" "$corp" "$crash"
done
echo "total $(($(date +%s) - t0)) s (build $((t1 - t0)) s); logs in $LOGS/"
exit $failed
