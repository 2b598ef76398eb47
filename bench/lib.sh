# bench/lib.sh — what the issue-17 benchmark scripts (origins, client-h3, scale, soak) share:
# checking their tools and cores, the release binary, and the header line of a results file.
# Source it from the repository root: `. bench/lib.sh`.

# Exits 1 naming the first of the given tools that is missing.
need_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "missing tool: $tool (bash .ci/run installs it)" >&2; exit 1; }
  done
}

# Exits 1 on a machine with fewer than 2 cores (server on core 1, client on core 0).
need_two_cores() {
  [ "$(nproc)" -ge 2 ] || { echo "needs 2 cores (server on core 1, client on core 0)" >&2; exit 1; }
}

# Builds the release binary unless $1 is 0, and sets BIN to it (under $CARGO_TARGET_DIR when
# that is set, as cargo builds it there).
release_bin() {
  if [ "$1" = 1 ]; then
    nice cargo build --release -q -p hxlab
  fi
  BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/hxlab"
  [ -x "$BIN" ] || { echo "no release binary at $BIN (run without --no-build)" >&2; exit 1; }
}

# The header line of a results file: the command line ($1), then the date, commit and load.
results_header() {
  echo
  echo "# $1, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
}
