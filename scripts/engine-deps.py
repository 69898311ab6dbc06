#!/usr/bin/env python3
"""Module dependencies inside the scheduling engine (scheduler-service/src/engine).

Reads every `*.rs` file under the engine and collects the module-level edges: `use` declarations
whose path starts with `super::`, `self::`, `crate::engine::` or a submodule's name (groups
`{a, b::c}` expanded), and the same paths written inline in code (`super::volumes::claim_key(..)`).
A `mod child;` declaration alone is not an edge. Comments and string
literals are ignored. Test code is left out: the files `*_tests.rs`, every item under
`#[cfg(test)]` (the `mod tests { .. }` blocks) and the files of modules declared under it (test
helpers), since a test may read any module it checks.

An edge goes from the file's module (`engine/plugins/node_name.rs` is `plugins::node_name`; an
inline `mod avx2 { .. }` counts as its file) to the deepest module the path names; a path that
ends at a `mod.rs` re-export (`pub use x::Y`) goes to the module re-exported from.

Prints every pair of modules that import each other and exits 1 if there is one; with `--cycles`
it also prints each strongly connected group of modules (modules that reach each other through
imports) with a shortest cycle through each of its modules, and exits 1 on any cycle; `--edges`
prints every edge with the lines it comes from. `--binder` checks the binder's crate
(binder-agent/src, paths from `crate::`, its binaries left out) the same way.

For the engine it also checks that the fast path sits behind the general one: the general path's
entries for a pod's pass (`evaluate`, `evaluate_quiet`, `evaluate_best`) and for a batch
(`schedule`, `schedule_pass`, `schedule_group`, `rank`), as methods of the `Evaluator`, are
defined outside `accel/` (the general path enters the fast path, which never holds the general
path's entry), and no module under `accel/` imports the modules that run a cycle (`entry`, `evaluate`, `cycle`, `label_gang`,
`podgroup`); it exits 1 naming the definition or the import otherwise.
"""

import argparse
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGINE = os.path.join(ROOT, "scheduler-service", "src", "engine")
# The path the checked tree has in its crate (`crate::engine`); `--binder` checks the binder's
# crate instead (binder-agent/src, `crate`, its binaries left out).
PREFIX = ["crate", "engine"]
TOP = "engine"
SKIP = ()

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def inline_path():
    """A path in code that starts at the tree, its parent chain or the module itself."""
    start = "::".join(PREFIX) + "|" if len(PREFIX) > 1 else ""
    return re.compile(r"(?<![A-Za-z0-9_:])((?:" + start + r"super(?:::super)*|self)(?:::" + IDENT + r")+)")


INLINE_PATH = inline_path()


def module_of(path):
    """Module path (a tuple) of a file under the engine: `plugins/x.rs` -> ("plugins", "x")."""
    rel = os.path.relpath(path, ENGINE)[: -len(".rs")].split(os.sep)
    if rel[-1] == "mod" or rel == ["lib"]:
        rel = rel[:-1]
    return tuple(rel)


def strip_comments_and_strings(text):
    """The text with comments and string/char literals blanked (newlines kept for line numbers)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}'), not a lifetime ('a).
            m = re.match(r"'(?:\\u\{[0-9A-Fa-f]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def item_end(text, start):
    """Index just past the item starting at `start`: its `;` or its balanced `{ .. }` block."""
    depth, i, n = 0, start, len(text)
    while i < n:
        c = text[i]
        if c == ";" and depth == 0:
            return i + 1
        if c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0 and c == "}":
                return i + 1
        i += 1
    return n


def strip_cfg_test(text):
    """The text with every `#[cfg(test)]` item blanked (newlines kept)."""
    out, pos = [], 0
    for m in re.finditer(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]", text):
        if m.start() < pos:
            continue
        end = item_end(text, m.end())
        out.append(text[pos : m.start()])
        out.append(re.sub(r"[^\n]", " ", text[m.start() : end]))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def expand_use_tree(tree):
    """`a::{b, c::{d, self}}` -> ["a::b", "a::c::d", "a::c"]."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+" + IDENT, "", tree))
    # Top-level split on commas (outside braces).
    def split(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        if cur:
            parts.append(cur)
        return parts

    out = []
    k = tree.find("{")
    if k < 0:
        return [tree] if tree else []
    prefix = tree[:k].rstrip(":")
    inner = tree[k + 1 : tree.rfind("}")]
    for part in split(inner):
        for sub in expand_use_tree(part):
            if sub == "self":
                out.append(prefix)
            elif sub == "*":
                out.append(prefix + "::*")
            else:
                out.append(prefix + "::" + sub if prefix else sub)
    return out


def inline_modules(text):
    """[(start, end, name)] of every inline `mod name { .. }` in the (stripped) text."""
    mods = []
    for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", text):
        end = item_end(text, m.end() - 1)
        mods.append((m.start(), end, m.group(1)))
    return mods


def scope_at(file_mod, mods, offset):
    """The module path at `offset` in a file: the file's module plus the inline modules around it."""
    scope = list(file_mod)
    for start, end, name in mods:
        if start <= offset < end:
            scope.append(name)
    return tuple(scope)


def resolve(path, scope):
    """An absolute engine path (tuple) for a path written in `scope`, or None if outside the engine."""
    parts = path.split("::")
    if parts[: len(PREFIX)] == PREFIX:
        return tuple(parts[len(PREFIX) :])
    base = list(scope)
    if parts[0] == "self":
        parts = parts[1:]
    while parts and parts[0] == "super":
        if not base:
            return None
        base.pop()
        parts = parts[1:]
    return tuple(base + parts)


def collect():
    files = []
    for dirpath, _, names in os.walk(ENGINE):
        for name in sorted(names):
            f = os.path.join(dirpath, name)
            if name.endswith(".rs") and not name.endswith("_tests.rs") and not os.path.relpath(f, ENGINE).startswith(SKIP):
                files.append(f)
    files.sort()
    texts = {}
    test_only = set()
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = strip_comments_and_strings(fh.read())
        # Submodules declared under #[cfg(test)] (test helpers in files of their own).
        for m in re.finditer(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]\s*(?:#\s*\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", text):
            test_only.add(module_of(f) + (m.group(1),))
        texts[f] = strip_cfg_test(text)
    files = [f for f in files if not any(module_of(f)[: len(t)] == t for t in test_only)]
    modules = {module_of(f) for f in files}

    # Re-exports of each mod.rs: name -> absolute path it stands for.
    reexports = {}
    for f in files:
        if os.path.basename(f) != "mod.rs":
            continue
        scope = module_of(f)
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", texts[f]):
            for p in expand_use_tree(m.group(1)):
                if p.endswith("*"):
                    continue
                first = p.split("::")[0]
                absolute = resolve(p, scope) if first in ("crate", "super", "self") else scope + tuple(p.split("::"))
                if absolute:
                    reexports[scope + (absolute[-1],)] = absolute

    def target(absolute):
        seen = 0
        while absolute in reexports and seen < 8:
            absolute, seen = reexports[absolute], seen + 1
        for k in range(len(absolute), -1, -1):
            if absolute[:k] in modules:
                return absolute[:k]
        return None

    edges = defaultdict(list)  # (from, to) -> ["file:line", ..]
    for f in files:
        text = texts[f]
        file_mod = module_of(f)
        mods = inline_modules(text)
        rel = os.path.relpath(f, ROOT)
        spans = []
        found = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            spans.append((m.start(), m.end()))
            scope = scope_at(file_mod, mods, m.start())
            for p in expand_use_tree(m.group(1)):
                first = p.split("::")[0]
                if first in ("crate", "super", "self") or scope + (first,) in modules:
                    found.append((m.start(), p.rstrip(":*").rstrip(":")))
        # Paths in code from the engine, a parent, the module itself or one of its submodules.
        children = sorted(m[-1] for m in modules if len(m) == len(file_mod) + 1 and m[:-1] == file_mod)
        patterns = [INLINE_PATH]
        if children:
            patterns.append(re.compile(r"(?<![A-Za-z0-9_:])((?:" + "|".join(children) + r")(?:::" + IDENT + r")+)"))
        for pattern in patterns:
            for m in pattern.finditer(text):
                if any(s <= m.start() < e for s, e in spans):
                    continue
                found.append((m.start(), m.group(1)))
        for offset, p in found:
            scope = scope_at(file_mod, mods, offset)
            absolute = resolve(p, scope)
            if absolute is None:
                continue
            to = target(absolute)
            if to is None or to == file_mod or not to:
                continue
            # A module reaching into its own parent's file (super:: from a child) still counts.
            line = text.count("\n", 0, offset) + 1
            where = f"{rel}:{line}"
            if where not in edges[(file_mod, to)]:
                edges[(file_mod, to)].append(where)
    return modules, edges


# The fast path (accel/), the general path's entry points that must not be defined in it, and the
# modules that run a cycle, which it must not import.
FAST_PATH = ("accel",)
GENERAL_ENTRIES = ("evaluate", "evaluate_quiet", "evaluate_best", "schedule", "schedule_pass", "schedule_group", "rank")
CYCLE_MODULES = (("entry",), ("evaluate",), ("cycle",), ("label_gang",), ("podgroup",))


def fast_path_problems(edges):
    """Where the general path is entered through the fast path (see the module documentation)."""
    problems = []
    entry = re.compile(r"\bfn\s+(" + "|".join(GENERAL_ENTRIES) + r")\b")
    for dirpath, _, names in os.walk(os.path.join(ENGINE, *FAST_PATH)):
        for fname in sorted(names):
            f = os.path.join(dirpath, fname)
            if not fname.endswith(".rs") or fname.endswith("_tests.rs"):
                continue
            with open(f, encoding="utf-8") as fh:
                text = strip_cfg_test(strip_comments_and_strings(fh.read()))
            # Methods of the evaluator (`impl .. Evaluator<..> { .. }`) only: other types may
            # name a method `evaluate`.
            blocks = []
            for m in re.finditer(r"\bimpl\b[^{;]*\bEvaluator\b[^{;]*\{", text):
                blocks.append((m.start(), item_end(text, m.end() - 1)))
            for m in entry.finditer(text):
                if not any(s <= m.start() < e for s, e in blocks):
                    continue
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"the general path's entry `{m.group(1)}` defined in the fast path: {os.path.relpath(f, ROOT)}:{line}")
    for (a, b), where in sorted(edges.items()):
        if a[: len(FAST_PATH)] == FAST_PATH and any(b[: len(c)] == c for c in CYCLE_MODULES):
            problems.append(f"the fast path imports the general path's cycle: {name(a)} -> {name(b)} ({', '.join(where[:3])})")
    return problems


def name(mod):
    return "::".join(mod) if mod else TOP


def sccs(nodes, adj):
    """Tarjan's strongly connected components."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(adj[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def shortest_cycle(start, adj, members):
    """One shortest cycle through `start` within `members` (breadth first), as a list of modules."""
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(adj[v]):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", action="store_true", help="also print longer cycles; fail on any cycle")
    ap.add_argument("--edges", action="store_true", help="print every edge and the lines it comes from")
    ap.add_argument("--binder", action="store_true", help="check the binder's crate (binder-agent/src) instead")
    args = ap.parse_args()
    if args.binder:
        global ENGINE, PREFIX, TOP, SKIP, INLINE_PATH
        ENGINE = os.path.join(ROOT, "binder-agent", "src")
        PREFIX, TOP, SKIP = ["crate"], "binder", ("bin" + os.sep, "main.rs")
        INLINE_PATH = inline_path()

    modules, edges = collect()
    adj = defaultdict(set)
    for a, b in edges:
        adj[a].add(b)

    if args.edges:
        for (a, b), where in sorted(edges.items()):
            print(f"{name(a)} -> {name(b)}  ({', '.join(where[:3])}{', ..' if len(where) > 3 else ''})")
        print()

    mutual = sorted((a, b) for (a, b) in edges if a < b and (b, a) in edges)
    failed = False
    if mutual:
        failed = True
        print(f"{TOP} modules that import each other: {len(mutual)}")
        for a, b in mutual:
            print(f"  {name(a)} <-> {name(b)}")
            print(f"    {name(a)} -> {name(b)}: {', '.join(edges[(a, b)][:3])}")
            print(f"    {name(b)} -> {name(a)}: {', '.join(edges[(b, a)][:3])}")
    else:
        print(f"{TOP}: no two modules import each other ({len(modules)} modules, {len(edges)} edges)")

    if not args.binder:
        problems = fast_path_problems(edges)
        for p in problems:
            print(p)
        if problems:
            failed = True
        else:
            print(f"{TOP}: the fast path ({'/'.join(FAST_PATH)}) defines no entry of the general path and imports none of its cycle's modules")

    if args.cycles:
        comps = [c for c in sccs(modules, adj) if len(c) > 1]
        if comps:
            failed = True
        for comp in comps:
            print(f"cycle group of {len(comp)} modules: {', '.join(name(m) for m in comp)}")
            print("  a shortest cycle through each:")
            seen = set()
            for m in comp:
                c = shortest_cycle(m, adj, set(comp))
                # The same cycle, rotated, is printed once.
                k = c.index(min(c))
                c = c[k:] + c[:k]
                if tuple(c) not in seen:
                    seen.add(tuple(c))
                    print("    " + " -> ".join(name(x) for x in c + [c[0]]))
        if not comps:
            print("engine: no import cycles")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
