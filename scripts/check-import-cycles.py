#!/usr/bin/env python3
"""Fails when a crate's modules import each other in a circle.

Each source file is a module; a `crate::a::b` path, or a `super::` path, in a file is an
arrow to the file that defines the module it names (the longest prefix that is a file).
A module and the modules nested in it are one unit of structure (a parent declares its
children, children use their parent's types), so arrows between them do not count.
Comments and the tests at the end of a file (from its first `#[cfg(test)]`) are left
out, and so are the files of a `tests` module: fixtures may reach anywhere.

Folders too: the modules under a folder (`dataplane/` with its files) are one unit, and
two folders whose files import each other, in any of their files, close a circle that no
two files do (`dataplane/x.rs` -> `control/y.rs` and `control/z.rs` -> `dataplane/w.rs`).
Each depth of folders is checked so.

Usage: scripts/check-import-cycles.py [CRATE_SRC_DIR ...]  (default: every crate's src/)
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATH = re.compile(r"\b(crate|super)((?:::\s*[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^{}]*)\}")


def module_of(src: Path, file: Path) -> tuple:
    """The module path of `file` in the crate rooted at `src`."""
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def code(file: Path) -> str:
    """The file's text without comments and without its trailing tests."""
    text = file.read_text(encoding="utf-8")
    text = text.split("#[cfg(test)]", 1)[0]
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def paths_in(text: str):
    """Every (anchor, segments) a text names, `a::{b, c::d}` groups spelled out."""
    for m in GROUP.finditer(text):
        base = [s for s in m.group(2).split("::") if s]
        for item in m.group(3).split(","):
            item = item.strip().split(" as ")[0].strip()
            if item and item != "self":
                yield m.group(1), base + [s.strip() for s in item.split("::") if s.strip()]
            elif item == "self":
                yield m.group(1), base
    for m in PATH.finditer(GROUP.sub("", text)):
        yield m.group(1), [s.strip() for s in m.group(2).split("::") if s.strip()]


def graph(src: Path) -> dict:
    # A `tests` module's files are tests whole, as a file's tail from `#[cfg(test)]` is.
    files = {module_of(src, f): f for f in src.rglob("*.rs") if "tests" not in module_of(src, f)}
    arrows = {m: set() for m in files}
    for here, file in files.items():
        for anchor, segments in paths_in(code(file)):
            if anchor == "crate":
                base = ()
            else:
                # `super` from a file module is its parent; from a mod.rs, the parent's parent.
                base = here[:-1]
                while segments and segments[0] == "super":
                    base, segments = base[:-1], segments[1:]
            target = base + tuple(segments)
            while target and target not in files:
                target = target[:-1]
            if target in files and not nested(here, target):
                arrows[here].add(target)
    return arrows


def nested(a: tuple, b: tuple) -> bool:
    """One module is the other, or inside it."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def circles(arrows: dict) -> list:
    """The strongly connected sets of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in arrows[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(arrows):
        if v not in index:
            visit(v)
    return out


def folder_arrows(arrows: dict, depth: int) -> dict:
    """The arrows between the modules' folders `depth` deep (a module above that depth
    stands for itself), leaving out those between a folder and what is inside it."""
    unit = lambda m: m[:depth]
    out = {unit(m): set() for m in arrows}
    for m, targets in arrows.items():
        for t in targets:
            a, b = unit(m), unit(t)
            if not nested(a, b):
                out[a].add(b)
    return out


def main(argv) -> int:
    dirs = [Path(a) for a in argv] or sorted(
        p.parent for p in ROOT.glob("**/Cargo.toml") if (p.parent / "src").is_dir() and "target" not in p.parts
    )
    found = 0
    for d in dirs:
        src = d if d.name == "src" else d / "src"
        arrows = graph(src)
        deepest = max((len(m) for m in arrows), default=0)
        levels = [("", arrows)] + [(f" (folders {d} deep)", folder_arrows(arrows, d)) for d in range(1, deepest)]
        seen = set()
        for what, level in levels:
            for group in circles(level):
                if tuple(group) in seen:
                    continue
                seen.add(tuple(group))
                found += 1
                name = lambda m: "::".join(m) or "(crate root)"
                print(f"import circle{what} in {src.relative_to(ROOT)}: {' , '.join(name(m) for m in group)}")
                for m in group:
                    for t in sorted(level[m] & set(group)):
                        print(f"  {name(m)} -> {name(t)}")
    if found:
        print(f"{found} import circle(s): move the item that closes each to the module it belongs with")
        return 1
    print(f"no import circles in {len(dirs)} crates")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
