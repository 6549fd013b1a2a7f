#!/usr/bin/env python3
"""The layering check: the library's top-level modules import one another in one direction.

Data flows one way (docs/layout.md): `load` -> `model` -> `analysis` -> `wording` -> the views.
A module may use its own layer's modules and the layers below it, never a layer above; and no
two top-level modules may reach each other, directly or through others (an import circle),
even within one layer.

The library's top-level modules are the `mod` lines of `src/lib.rs`; the binary's files (every
other file of `src/` that `lib.rs` does not declare: `main.rs`, `cli.rs`, `cmd/`, ...) sit above
them all and are not read. A module's references are every `crate::X` path in its code (a
`use crate::{X, Y::Z}` names X and Y) and every `super::` path that climbs out of it, with
comments and string literals removed, so a doc link is no edge.

Prints the module graph (each module, its layer, what it uses), then each violation, and exits
1 on any. `python3 tools/layers.py [SRC]` (default: `src` beside this file's folder).
"""

import os
import re
import sys
from collections import defaultdict

# The layers, lowest first. A module not named here is a violation of its own (unplaced).
LAYERS = [
    # Leaf utilities that every layer may use: byte and float formatting, escaping capture
    # strings for a terminal or a file, signal flags, the rank-naming conventions of file names,
    # the thread count (`MEMSCOPE_THREADS`) the decoders and the analysis share.
    ("base", ["units", "escape", "signals", "rank_name", "threads", "arenas"]),
    # The model's types (segments, blocks, events, interned frames, traces) are what `load`
    # builds, so `load` sits on `model`, though the data flows from `load` into it.
    ("model", ["model"]),
    ("load", ["load"]),
    ("analysis", ["analysis"]),
    ("wording", ["wording"]),
    # The views read the analysis product and its words. Among themselves they may use one
    # another (job reads the gate's summaries; mcp reads query), but never in a circle.
    # `inputs` (the driver that reads the files `check`, `baseline` and `diff` are given into
    # the gate's summaries) sits among them: it uses `check` and `job`, and `report` and `mcp`
    # say its errors. `summarize` (the map step's tables, and the job view read back from them)
    # uses `job`, `check` and `inputs`.
    ("views", ["check", "job", "inputs", "report", "query", "tui", "mcp", "summarize"]),
]

# Edges that are forbidden by name, whatever the layers say (issue #38's list).
FORBIDDEN = [("tui", "report"), ("wording", "job")]

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def strip_comments_and_strings(src):
    """The code of a Rust file, with comments, string and char literals blanked out."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', src[i:i + 258]) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', src[i:]).group(1)
            end = src.find('"' + hashes, i + len(hashes) + 2)
            i = n if end < 0 else end + 1 + len(hashes)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'":
            if src.startswith("\\", i + 1):
                end = src.find("'", i + 3)
                i = n if end < 0 else end + 1
                out.append("' '")
            elif i + 2 < n and src[i + 2] == "'":
                i += 3
                out.append("' '")
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_tests(code):
    """`code` without its `#[cfg(test)]` items (a test module may reach any layer to assert
    what a view says of a module's result; the library's own code may not)."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", code):
        if m.start() < i:
            continue
        out.append(code[i:m.start()])
        j = m.end()
        brace, semi = code.find("{", j), code.find(";", j)
        if semi >= 0 and (brace < 0 or semi < brace):
            i = semi + 1
            continue
        depth, k = 0, brace
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1
    out.append(code[i:])
    return "".join(out)


def brace_items(text, start):
    """The first identifier of each top-level item of the `{...}` group opening at `start`."""
    depth, item, items, i = 0, "", [], start
    while i < len(text):
        c = text[i]
        if c == "{":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif c == "}":
            depth -= 1
            if depth == 0:
                items.append(item)
                break
        if depth == 1 and c == ",":
            items.append(item)
            item = ""
        elif depth >= 1:
            item += c
        i += 1
    firsts = []
    for it in items:
        m = IDENT.search(it)
        if m:
            firsts.append(m.group(0))
    return firsts


PATH_START = re.compile(r"(?<![A-Za-z0-9_$])(crate|(?:super\s*::\s*)+)\s*::\s*|(?<![A-Za-z0-9_$])crate\s*::\s*")


def references(code, modpath):
    """The crate-level names `code` (of the module at `modpath`, e.g. ['check', 'rules']) uses."""
    refs = set()
    for m in re.finditer(r"(?<![A-Za-z0-9_$])((?:super\s*::\s*)+|crate\s*::\s*)", code):
        head = m.group(1)
        rest = m.end()
        if head.startswith("crate"):
            base = []
        else:
            ups = head.count("super")
            if ups < len(modpath):
                continue  # stays inside the top-level module
            base = []
            if ups > len(modpath):
                continue
        # `base` is the crate root: the next segment names the top-level module.
        tail = code[rest:].lstrip()
        if tail.startswith("{"):
            refs.update(brace_items(code, rest + (len(code[rest:]) - len(tail))))
        else:
            mm = IDENT.match(tail)
            if mm:
                refs.add(mm.group(0))
    return refs


def lib_modules(src):
    text = strip_comments_and_strings(open(os.path.join(src, "lib.rs"), encoding="utf-8").read())
    return re.findall(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;", text)


def module_files(src, mod):
    """(file, path of modules inside the crate) of every file of top-level module `mod`."""
    single = os.path.join(src, mod + ".rs")
    files = []
    if os.path.isfile(single):
        files.append((single, [mod]))
    folder = os.path.join(src, mod)
    if os.path.isdir(folder):
        for root, _, names in os.walk(folder):
            for name in sorted(names):
                if not name.endswith(".rs"):
                    continue
                rel = os.path.relpath(os.path.join(root, name), src)[:-3].split(os.sep)
                if rel[-1] == "mod":
                    rel = rel[:-1]
                files.append((os.path.join(root, name), rel))
    return files


def graph(src):
    mods = lib_modules(src)
    edges = defaultdict(set)
    for mod in mods:
        for path, modpath in module_files(src, mod):
            code = strip_tests(strip_comments_and_strings(open(path, encoding="utf-8").read()))
            # A file's own `super::` climbs from its parent module (`mod.rs`: from itself).
            parent = modpath if path.endswith("mod.rs") or len(modpath) == 1 else modpath[:-1]
            if len(modpath) == 1 and not path.endswith("mod.rs"):
                parent = modpath
            for r in references(code, parent):
                if r in mods and r != mod:
                    edges[mod].add(r)
    return mods, edges


def cycles(mods, edges):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in mods:
        if v not in index:
            visit(v)
    return out


def check(src):
    mods, edges = graph(src)
    layer_of = {}
    for rank, (name, members) in enumerate(LAYERS):
        for m in members:
            layer_of[m] = (rank, name)
    lines, bad = [], []
    lines.append("module graph (layer: module -> what it uses):")
    for m in sorted(mods, key=lambda m: (layer_of.get(m, (99, "?"))[0], m)):
        layer = layer_of.get(m, (99, "unplaced"))[1]
        uses = ", ".join(sorted(edges.get(m, ()))) or "-"
        lines.append(f"  {layer:9} {m:10} -> {uses}")
        if m not in layer_of:
            bad.append(f"unplaced: {m} is in no layer of tools/layers.py")
    for m in sorted(mods):
        for t in sorted(edges.get(m, ())):
            if m in layer_of and t in layer_of and layer_of[t][0] > layer_of[m][0]:
                bad.append(
                    f"upward: {m} ({layer_of[m][1]}) uses {t} ({layer_of[t][1]}), a higher layer"
                )
            elif (m, t) in FORBIDDEN:
                bad.append(f"forbidden: {m} uses {t}")
    for comp in cycles(mods, edges):
        pairs = [f"{a} <-> {b}" for a in comp for b in comp if a < b and b in edges.get(a, ()) and a in edges.get(b, ())]
        bad.append("circle among " + ", ".join(comp) + (f" ({'; '.join(pairs)})" if pairs else ""))
    return lines, bad


def main(argv):
    src = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    lines, bad = check(src)
    print("\n".join(lines))
    if bad:
        print(f"{len(bad)} layering violation(s):")
        for b in bad:
            print("  " + b)
        return 1
    print("layering: no circle, no upward import")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
