#!/usr/bin/env python3
"""Import circles inside each crate: prints every cycle of its module graph, exits 1 if any.

Usage: .ci/circles.py [CRATE_DIR...]   (default: every crates/*)

Rules (issue 39, "No import circle inside any crate"):
- A node is a module with a file of its own (src/a.rs, src/a/mod.rs); inline `mod x { }`
  blocks belong to their file. Modules declared `#[cfg(test)]`, and every `#[cfg(test)]`
  item (the `mod tests { ... }` of a file), are left out: test code may reach anywhere.
- An edge A -> B is a path in A that names an item of B: a `use` of `crate::`, `super::`,
  `self::` or a child module, or a `crate::`/`super::`/`self::` path in code. A path through a
  re-export (`pub use`, `pub(crate) use`, ...) is followed to where the item lives, and the
  re-export itself is not an edge: a module that only re-exports its children is their table
  of contents, not their user. A module's uses of its own submodules are not edges either (it
  is made of them, as the crate root is made of the crate), and nothing points at the root:
  what a child takes from its parent is an edge to the parent, what the parent takes back
  from the child is not.
- A circle is a set of modules each reachable from every other; it is printed with each of
  its cycles (`a -> b -> a`) and, under each step, the place that makes it an edge.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rust_source import blank_literals, block_end, cut_test_items  # noqa: E402

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
MOD_DECL = re.compile(r"\b(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])")
USE_STMT = re.compile(r"\b(pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]+);")
CODE_PATH = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:\s*::\s*" + IDENT + r")+)")


def cut_tests(text):
    """`text` with every `#[cfg(test)]` item blanked (newlines kept)."""
    return cut_test_items(text)[0]


def split_top(s, sep=","):
    """`s` split at `sep` outside braces."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def use_paths(tree, prefix=()):
    """The paths a use tree names, as segment tuples (`a::{b, c::d}` gives (a, b) and
    (a, c, d)); `self` in a group names the prefix, a glob the module it is in. Aliases must
    be gone (see `alias_free`)."""
    tree = re.sub(r"\s+", "", tree)
    if tree.startswith("::"):
        tree = tree[2:]
    brace = tree.find("{")
    if brace >= 0 and tree.endswith("}"):
        head = tuple(s for s in tree[:brace].split("::") if s)
        paths = []
        for part in split_top(tree[brace + 1 : -1]):
            paths += use_paths(part, prefix + head)
        return paths
    segs = [s for s in tree.split("::") if s]
    if segs and segs[-1] in ("self", "*"):
        segs = segs[:-1]
    return [prefix + tuple(segs)]


def alias_free(stmt):
    """A use tree with every `as NAME` removed (so only paths remain)."""
    return re.sub(r"\s+as\s+" + IDENT, "", stmt)


class Crate:
    """One crate's module tree, its re-exports and its edges."""

    def __init__(self, name, root):
        self.name = name
        self.files = {}  # module path (tuple) -> (file, text)
        self.modules = {}  # module path (tuple) -> module path of its file node
        self.reexports = {}  # module path -> {name: absolute path tuple}
        self.globs = {}  # module path -> [absolute module path tuple]
        self.edges = {}  # (a, b) -> "file:line"
        self.load(root, (), is_dir_owner=True)

    def load(self, path, modpath, is_dir_owner):
        src = open(path, encoding="utf-8", errors="replace").read()
        text = cut_tests(blank_literals(src))
        self.files[modpath] = (path, text)
        self.modules[modpath] = modpath
        here = os.path.dirname(path)
        subdir = here if is_dir_owner else os.path.join(here, os.path.splitext(os.path.basename(path))[0])
        for scope, m in self.scoped(MOD_DECL, modpath, text):
            child = scope + (m.group(1),)
            if m.group(2) == "{":
                self.modules[child] = modpath
                continue
            if scope != modpath:
                continue
            name = m.group(1)
            for cand, owner in ((os.path.join(subdir, name + ".rs"), False), (os.path.join(subdir, name, "mod.rs"), True)):
                if os.path.isfile(cand):
                    self.load(cand, child, owner)
                    break

    def inline_spans(self, modpath, text):
        """(start, end, module path) of each inline module of a file, outermost first."""
        spans = []

        def walk(lo, hi, scope):
            for m in MOD_DECL.finditer(text, lo, hi):
                if m.group(2) != "{":
                    continue
                if any(a <= m.start() < b for a, b, _ in spans):
                    continue
                end = block_end(text, m.end() - 1)
                inner = scope + (m.group(1),)
                spans.append((m.end(), end, inner))
                walk(m.end(), end - 1, inner)

        walk(0, len(text), modpath)
        return spans

    def scope_at(self, spans, modpath, pos):
        scope = modpath
        for a, b, inner in spans:
            if a <= pos < b and len(inner) > len(scope):
                scope = inner
        return scope

    def scoped(self, regex, modpath, text):
        spans = self.inline_spans(modpath, text)
        for m in regex.finditer(text):
            yield self.scope_at(spans, modpath, m.start()), m

    def absolute(self, scope, segs, in_use):
        """`segs` as a path from the crate root, or None for another crate's path."""
        if not segs:
            return None
        if segs[0] == "crate":
            return tuple(segs[1:])
        if segs[0] in ("self", "super"):
            cur = list(scope)
            rest = list(segs)
            if rest[0] == "self":
                rest = rest[1:]
            while rest and rest[0] == "super":
                if not cur:
                    return None
                cur.pop()
                rest = rest[1:]
            return tuple(cur) + tuple(rest)
        if in_use and scope + (segs[0],) in self.modules:
            return scope + tuple(segs)
        return None

    def resolve(self, path, depth=0):
        """The file node that holds the item `path` names (after re-exports)."""
        cur = ()
        i = 0
        while i < len(path) and cur + (path[i],) in self.modules:
            cur += (path[i],)
            i += 1
        if i < len(path) and depth < 16:
            name = path[i]
            target = self.reexports.get(cur, {}).get(name)
            if target is not None:
                return self.resolve(target + tuple(path[i + 1 :]), depth + 1)
        return self.modules[cur]

    def read(self):
        # Re-exports first, so edges can be followed through them.
        uses = []
        for modpath, (path, text) in self.files.items():
            for scope, m in self.scoped(USE_STMT, modpath, text):
                line = text.count("\n", 0, m.start()) + 1
                for segs in use_paths(alias_free(m.group(2))):
                    target = self.absolute(scope, list(segs), in_use=True)
                    if target is None:
                        continue
                    if m.group(1):
                        if target and target[-1] != "*" and segs:
                            self.reexports.setdefault(scope, {})[segs[-1]] = target
                    else:
                        uses.append((modpath, target, f"{path}:{line}"))
            body = USE_STMT.sub(lambda u: re.sub(r"[^\n]", " ", u.group(0)), text)
            for scope, m in self.scoped(CODE_PATH, modpath, body):
                segs = [s.strip() for s in m.group(1).split("::")]
                target = self.absolute(scope, segs, in_use=False)
                if target is not None:
                    line = body.count("\n", 0, m.start()) + 1
                    uses.append((modpath, target, f"{path}:{line}"))
        for modpath, target, where in uses:
            node = self.resolve(target)
            # A module composes its own submodules (as the root does the crate's): only
            # its uses of modules outside itself are edges.
            if node[: len(modpath)] != modpath and node != ():
                self.edges.setdefault((modpath, node), where)

    def circles(self):
        """Each circle (a strongly connected set of modules, Tarjan) with its elementary
        cycles (each once, starting at its smallest module, at most 50 per circle)."""
        graph = {}
        for a, b in self.edges:
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
        index, low, on, stack, parts = {}, {}, set(), [], []

        def connect(v):
            index[v] = low[v] = len(index)
            stack.append(v)
            on.add(v)
            for w in sorted(graph[v]):
                if w not in index:
                    connect(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                part = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    part.add(w)
                    if w == v:
                        break
                if len(part) > 1:
                    parts.append(part)

        for v in sorted(graph):
            if v not in index:
                connect(v)
        return sorted((sorted(p), self.cycles_within(graph, p)) for p in parts)

    @staticmethod
    def cycles_within(graph, part):
        found = []
        for start in sorted(part):
            allowed = {n for n in part if n >= start}
            path, on_path = [start], {start}
            stack = [iter(sorted(graph[start] & allowed))]
            while stack and len(found) < 50:
                nxt = next(stack[-1], None)
                if nxt is None:
                    stack.pop()
                    on_path.discard(path.pop())
                elif nxt == start:
                    found.append(list(path))
                elif nxt not in on_path:
                    path.append(nxt)
                    on_path.add(nxt)
                    stack.append(iter(sorted(graph[nxt] & allowed)))
        return found


def name(module):
    """A module path as Rust writes it, relative to the crate root."""
    return "::".join(module)


def main():
    given = [os.path.abspath(d) for d in sys.argv[1:]]
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    dirs = given or sorted(
        os.path.join("crates", d) for d in os.listdir("crates") if os.path.isdir(os.path.join("crates", d))
    )
    total = 0
    for d in dirs:
        for root in ("src/lib.rs", "src/main.rs"):
            path = os.path.join(d, root)
            if not os.path.isfile(path):
                continue
            crate = Crate(os.path.basename(os.path.normpath(d)), path)
            crate.read()
            for members, cycles in crate.circles():
                total += 1
                print(f"{crate.name}: {', '.join(name(m) for m in members)}")
                for cycle in cycles:
                    ring = cycle + [cycle[0]]
                    print(f"    {' -> '.join(name(m) for m in ring)}")
                    for a, b in zip(ring, ring[1:]):
                        print(f"        {name(a)} -> {name(b)}: {crate.edges[(a, b)]}")
    if total:
        print(f"{total} import circle(s)")
        sys.exit(1)
    print("no import circles")


main()
