#!/usr/bin/env python3
"""The house rules of `src/`, checked from the source text (issue 24):

    python3 scripts/layers.py            # exit 1 and name each breach
    python3 scripts/layers.py --graph    # also print every module's imports

1. No import cycle among the library's modules, except the star of `archive/engine/` files
   that add methods to `Archive` (they and `engine/mod.rs` may name each other); and inside
   `archive/`, imports only point down the layers: layout and clock, error, format, then io
   and plan (side by side, never naming each other), config, engine.
2. No file-system or object-store call outside `src/archive/io/`: `std::fs`, `fs::`, `File`,
   `OpenOptions` and `object_store::` appear nowhere else in the library (test modules, the
   binary and the `serve`/`eventd` front ends excepted: they are the command line's).

An import is any `crate::`/`super::`/`self::` path, or a path starting with a child module's
name, outside `#[cfg(test)]` modules. A name that a module re-exports is followed to the module
that defines it, so `crate::archive::Archive` counts as an import of wherever `Archive` lives.
A parent's `mod child;` is not an import. Python 3 standard library only.
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
# Front ends: they may use the file system (they are the command line's), and are checked
# for cycles like the rest.
FS_ALLOWED = ("archive/io/", "bin/", "serve/", "eventd/")
STAR = "archive::engine"
# The archive's layers, lowest first: a module may import its own layer's and lower ones;
# `io` and `plan` stand side by side and never name each other.
LAYERS = {
    "archive::layout": 0, "archive::clock": 0, "archive::error": 1, "archive::format": 2,
    "archive::io": 3, "archive::plan": 3, "archive::config": 4, "archive::engine": 5,
}


def layer(module):
    for prefix, rank in LAYERS.items():
        if module == prefix or module.startswith(prefix + "::"):
            return prefix, rank
    return None, None

ITEM = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+|unsafe\s+|const\s+)*"
    r"(?:struct|enum|fn|trait|type|const|static|union|mod|macro_rules!)\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)
MACRO_EXPORT = re.compile(r"macro_rules!\s+([A-Za-z_][A-Za-z0-9_]*)")
USE = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M | re.S)
PATH = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
FS = re.compile(r"std::fs\b|(?<![A-Za-z0-9_:])fs::|\bFile::|\bFile\b|\bOpenOptions\b|object_store::")


def module_of(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return "::".join(parts)


def strip(text: str) -> str:
    """The text without comments, string literals and `#[cfg(test)]` modules."""
    text = re.sub(r"//[^\n]*", "", text)
    keep_lines = lambda m: '""' + "\n" * m.group(0).count("\n")
    text = re.sub(r"/\*.*?\*/", keep_lines, text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', keep_lines, text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', keep_lines, text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def expand(tree: str):
    """`a::{b, c::{d as e}}` → [("a::b","b"), ("a::c::d","e")]."""
    tree = re.sub(r"\s+", "", tree)

    def split(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += (ch == "{") - (ch == "}")
            cur += ch
        if cur:
            parts.append(cur)
        return parts

    def walk(prefix, s):
        if "{" in s and s.endswith("}"):
            head, body = s.split("{", 1)
            head = head.rstrip(":").rstrip(":")
            base = f"{prefix}::{head}" if prefix and head else (head or prefix)
            for part in split(body[:-1]):
                yield from walk(base, part)
            return
        alias = None
        if "as" in s and re.search(r"[A-Za-z0-9_]as[A-Za-z_]", s):
            s, alias = re.split(r"(?<=[A-Za-z0-9_])as(?=[A-Za-z_])", s, maxsplit=1)
        full = f"{prefix}::{s}" if prefix else s
        last = full.split("::")[-1]
        if last == "self":
            full = full[: -len("::self")]
            last = full.split("::")[-1]
        yield full, alias or last

    return list(walk("", tree))


class Crate:
    def __init__(self, files):
        self.text = {}
        self.items = {}
        self.reexports = {}
        self.globs = {}
        self.children = {}
        for f in files:
            m = module_of(f)
            raw = f.read_text()
            body = strip(raw)
            self.text[m] = (f, body)
            self.items[m] = set(ITEM.findall(body))
            self.children[m] = set(re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", body, re.M))
            self.reexports[m], self.globs[m] = {}, []
        # `#[macro_export]` macros live at the crate root.
        for m, (_, body) in self.text.items():
            if "#[macro_export]" in body:
                self.items[""].update(MACRO_EXPORT.findall(body))
        for m, (_, body) in self.text.items():
            for vis, tree in USE.findall(body):
                for full, name in expand(tree):
                    target = self.absolute(m, full)
                    if target is None:
                        continue
                    if name == "*":
                        if vis:
                            self.globs[m].append(target[: -len("::*")])
                    elif vis:
                        self.reexports[m][name] = target

    def absolute(self, here: str, path: str):
        parts = path.split("::")
        base = here.split("::") if here else []
        if parts[0] == "crate":
            base, parts = [], parts[1:]
        elif parts[0] in ("super", "self"):
            while parts and parts[0] in ("super", "self"):
                if parts[0] == "super":
                    base = base[:-1]
                parts = parts[1:]
        elif parts[0] in self.children.get(here, ()):
            pass
        else:
            return None  # an external crate or std
        return "::".join(base + parts)

    def resolve(self, path: str, seen=None):
        """The module defining what `path` (absolute, `a::b::Name`) names."""
        seen = seen or set()
        if path in seen:
            return None
        seen.add(path)
        parts = path.split("::") if path else []
        # The longest prefix that is a module.
        for k in range(len(parts), -1, -1):
            mod = "::".join(parts[:k])
            if mod in self.text:
                break
        rest = parts[k:]
        if not rest:
            return mod
        name = rest[0]
        if name in self.items[mod]:
            return mod
        if name in self.reexports[mod]:
            target = self.reexports[mod][name]
            if target.split("::")[-1] != name:  # `use x::Y as Name`
                target = "::".join(target.split("::")[:-1] + [target.split("::")[-1]])
            return self.resolve("::".join(target.split("::") + rest[1:]), seen)
        for g in self.globs[mod]:
            r = self.resolve("::".join([g] + rest), seen)
            if r is not None and r != g:
                return r
        return mod

    def edges(self):
        graph = {m: set() for m in self.text}
        for m, (_, body) in self.text.items():
            paths = set(PATH.findall(body))
            for _, tree in USE.findall(body):
                paths.update(full for full, _ in expand(tree))
            # Paths through a child module named bare (`manifest::State`).
            for child in self.children[m]:
                for tail in re.findall(rf"(?<![A-Za-z0-9_:]){child}((?:::[A-Za-z_][A-Za-z0-9_]*)+)", body):
                    paths.add(child + tail)
            for p in paths:
                target = self.absolute(m, p)
                if target is None:
                    continue
                r = self.resolve(target)
                if r is None or r == m:
                    continue
                # A parent naming its own child for a re-export is not an import.
                graph[m].add(r)
        # `pub use child::X` in a parent: declaration, not a dependency.
        for m in graph:
            used = set()
            _, body = self.text[m]
            plain = USE.sub("", body)
            for p in set(PATH.findall(plain)):
                t = self.absolute(m, p)
                if t:
                    used.add(self.resolve(t))
            for child in self.children[m]:
                for tail in re.findall(rf"(?<![A-Za-z0-9_:]){child}((?:::[A-Za-z_][A-Za-z0-9_]*)+)", plain):
                    t = self.absolute(m, child + tail)
                    if t:
                        used.add(self.resolve(t))
            for _, tree in USE.findall(body):
                for full, name in expand(tree):
                    t = self.absolute(m, full)
                    if t is None:
                        continue
                    r = self.resolve(t)
                    if r is None:
                        continue
                    if name != "*" and re.search(rf"(?<![A-Za-z0-9_:]){re.escape(name)}\b", plain):
                        used.add(r)
            for r in list(graph[m]):
                if r.startswith(m + "::" if m else "") and r not in used:
                    graph[m].discard(r)
        return graph


def sccs(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in graph:
                continue
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

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", action="store_true", help="print each module's imports")
    ap.add_argument("--src", type=Path, default=None, help="the source tree (default: src/)")
    args = ap.parse_args()
    global SRC
    SRC = (args.src or SRC).resolve()
    files = sorted(p for p in SRC.rglob("*.rs") if not p.relative_to(SRC).parts[0] == "bin")
    crate = Crate(files)
    graph = crate.edges()
    if args.graph:
        for m in sorted(graph):
            print(f"{m or 'crate'} -> {', '.join(sorted(x or 'crate' for x in graph[m]))}")
    breaches = 0
    for comp in sccs(graph):
        if len(comp) < 2:
            continue
        if all(c == STAR or c.startswith(STAR + "::") for c in comp):
            continue
        breaches += 1
        print(f"cycle of {len(comp)} modules: {' '.join(comp)}")
        members = set(comp)
        for c in comp:
            inside = sorted(x for x in graph[c] if x in members)
            print(f"    {c} -> {', '.join(inside)}")
    for m in sorted(graph):
        here, rank = layer(m)
        if rank is None:
            continue
        for t in sorted(graph[m]):
            there, trank = layer(t)
            if trank is None or there == here:
                continue
            if trank > rank or trank == rank:
                breaches += 1
                print(f"{m} imports {t}: {there} is not beneath {here}")
    for m, (f, body) in sorted(crate.text.items()):
        rel = f.relative_to(SRC).as_posix()
        if rel.startswith(FS_ALLOWED):
            continue
        for n, line in enumerate(body.splitlines(), 1):
            hit = FS.search(line)
            if hit:
                breaches += 1
                print(f"src/{rel}:{n}: {hit.group(0).strip()} outside src/archive/io/: {line.strip()}")
    if breaches:
        print(f"{breaches} breach(es) of the house rules (scripts/layers.py)")
        return 1
    print(f"ok: {len(graph)} modules, no import cycle outside {STAR}'s star, imports only down the layers, no file-system call outside src/archive/io/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
