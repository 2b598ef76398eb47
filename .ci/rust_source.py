"""Rust source as the CI scripts read it (.ci/sizes.sh, .ci/circles.py): comments and literals
blanked, so braces, paths and keywords are found by position; `#[cfg(test)]` items cut out.
Newlines are always kept, so line numbers hold."""
import re

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
