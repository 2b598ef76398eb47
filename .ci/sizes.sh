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


RAW_STRING = re.compile(r'b?r(#*)"')
CHAR_LITERAL = re.compile(r"'(\\u\{[0-9a-fA-F_]+\}|\\x[0-9a-fA-F]{2}|\\.|[^\\'\n])'")


def blank_literals(src):
    """The source with comments and string/char literal contents turned into spaces
    (newlines kept), so braces and keywords can be found by position."""
    out = list(src)
    i, n = 0, len(src)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c in "br" and (m := RAW_STRING.match(src, i)) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = src.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{1F600}'), else a lifetime or label ('a).
            m = CHAR_LITERAL.match(src, i)
            if m:
                blank(i, m.end())
                i = m.end()
            else:
                i += 1
        else:
            i += 1
    return "".join(out)


def block_end(text, open_brace):
    """Index just past the brace that closes the one at `open_brace`."""
    depth = 0
    for k in range(open_brace, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return k + 1
    return len(text)


def body_start(text, pos):
    """Index of the `{` opening the body of the item whose header starts at `pos`, or None
    when a `;` ends it first (a declaration without a body)."""
    depth = 0
    for k in range(pos, len(text)):
        ch = text[k]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == ";":
            return None
        elif depth == 0 and ch == "{":
            return k
    return None


def cut_test_items(text):
    """`text` with every `#[cfg(test)]` item blanked (newlines kept, so line numbers hold),
    and the number of lines those items took."""
    spans = []
    for m in re.finditer(r"#\[cfg\(test\)\]", text):
        start = m.start()
        brace = body_start(text, m.end())
        if brace is None:
            # `#[cfg(test)] mod tests;`, `#[cfg(test)] use ...;`: up to the `;`.
            end = text.find(";", m.end()) + 1 or len(text)
        else:
            end = block_end(text, brace)
        line_start = text.rfind("\n", 0, start) + 1
        if text[line_start:start].strip() == "":
            start = line_start
        if end < len(text) and text[end] == "\n":
            end += 1
        spans.append((start, end))
    out, cut, last = list(text), 0, 0
    for a, b in sorted(spans):
        if a < last:
            continue
        cut += text.count("\n", a, b)
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "
        last = b
    return "".join(out), cut


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
