#!/usr/bin/env bash
# Size report: the 15 longest functions and the 15 longest source files under crates/*/src.
#
# Rules (the limits of issue 16, item 6):
# - A function is an `fn` item with a body, counted from the line of its `fn` keyword to the
#   line of its closing brace (doc comments and attributes above it do not count). A function
#   nested in another counts on its own and inside its parent. Trait methods without a body
#   are not functions here.
# - Test code does not count: every item marked `#[cfg(test)]` (the `mod tests { ... }` block
#   of a source file, or a test-only function) is cut out, attribute included, before
#   functions are measured and lines are counted. Files outside src/ are not read.
# - A file's size is its number of lines after that cut.
# - Limits: no function over 120 lines, no file over 1200 lines.
#
# Usage: .ci/sizes.sh [--check]
#   prints both tables; with --check, also exits 1 when a limit does not hold.
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
case "${1-}" in
  "") ;;
  --check) check=1 ;;
  *) echo "sizes.sh: unknown argument \`$1\`; usage: .ci/sizes.sh [--check]" >&2; exit 2 ;;
esac
if [ "$#" -gt 1 ]; then
  echo "sizes.sh: too many arguments; usage: .ci/sizes.sh [--check]" >&2
  exit 2
fi

# The parser reads the file list on stdin, so it comes in as an argument, not as stdin.
read -r -d '' parser <<'PY' || true
import re
import sys

FN_LIMIT, FILE_LIMIT, TOP = 120, 1200, 15


sys.path.insert(0, ".ci")
from rust_source import blank_literals, block_end, body_start, cut_test_items  # noqa: E402


def measure(path):
    src = open(path, encoding="utf-8", errors="replace").read()
    text, cut = cut_test_items(blank_literals(src))
    lines = src.count("\n") + (0 if src.endswith("\n") or not src else 1) - cut
    fns = []
    for m in re.finditer(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)", text):
        brace = body_start(text, m.end())
        if brace is None:
            continue
        first = text.count("\n", 0, m.start()) + 1
        last = text.count("\n", 0, block_end(text, brace) - 1) + 1
        fns.append((last - first + 1, m.group(1), first))
    return lines, fns


def main():
    check = sys.argv[1] == "1"
    paths = [p for p in sys.stdin.buffer.read().decode().split("\0") if p]
    files, fns = [], []
    for path in paths:
        lines, found = measure(path)
        files.append((lines, path))
        fns += [(n, f"{path}:{line}", name) for n, name, line in found]
    files.sort(key=lambda f: (-f[0], f[1]))
    fns.sort(key=lambda f: (-f[0], f[1]))
    print(f"Longest functions (limit {FN_LIMIT} lines; #[cfg(test)] items not counted):")
    for n, where, name in fns[:TOP]:
        print(f"{n:6}  {name:<40} {where}")
    print(f"\nLongest source files (limit {FILE_LIMIT} lines; #[cfg(test)] items not counted):")
    for n, path in files[:TOP]:
        print(f"{n:6}  {path}")
    over_fns = [f for f in fns if f[0] > FN_LIMIT]
    over_files = [f for f in files if f[0] > FILE_LIMIT]
    print(f"\n{len(over_fns)} function(s) over {FN_LIMIT} lines, {len(over_files)} file(s) over {FILE_LIMIT} lines")
    if check and (over_fns or over_files):
        for n, where, name in over_fns:
            print(f"sizes: {where}: fn {name} is {n} lines (limit {FN_LIMIT})", file=sys.stderr)
        for n, path in over_files:
            print(f"sizes: {path} is {n} lines (limit {FILE_LIMIT})", file=sys.stderr)
        sys.exit(1)


main()
PY
find crates -path '*/src/*' -name '*.rs' -type f -print0 | sort -z | python3 -c "$parser" "$check"
