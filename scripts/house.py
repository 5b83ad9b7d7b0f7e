"""The house as the code has it: rooms, their files and lines, and the import circles.

    python scripts/house.py [SRC_DIR]      (default: src/threadloom of this checkout)

A room is a sub-package of ``threadloom`` (``engine/run/`` is a room of its own), or the
package root's loose modules. An import circle is a strongly connected group of modules
where *every* import counts: module level, inside functions, and under ``TYPE_CHECKING`` —
a circle closed by a type-only import is still a circle a reader has to walk. The same
reading backs ``tests/test_layers.py``, which forbids circles in ``engine/`` and ``node/``.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent.parent / "src" / "threadloom"


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name → file, for every ``.py`` under ``package``."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        found[".".join(rel.parts).removesuffix(".__init__")] = path
    return found


def imports(path: Path, known: dict[str, Path], module: str) -> set[str]:
    """The package's modules that ``path`` imports, wherever the import statement stands."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in known:
                    out.add(full)
                elif base in known:
                    out.add(base)
    out.discard(module)
    return out


def graph(package: Path) -> dict[str, set[str]]:
    known = modules(package)
    return {name: imports(path, known, name) for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found, key=lambda g: (-len(g), g))


def room(module: str, path: Path) -> str:
    parts = module.split(".")
    if path.name == "__init__.py":
        parts = [*parts, "__init__"]
    return "/".join(parts[1:-1]) or "(root)"


def main(argv: list[str]) -> int:
    package = Path(argv[1]) if len(argv) > 1 else DEFAULT
    known = modules(package)
    files: dict[str, int] = defaultdict(int)
    lines: dict[str, int] = defaultdict(int)
    typed: dict[str, int] = defaultdict(int)
    for name, path in known.items():
        text = path.read_text(encoding="utf-8")
        where = room(name, path)
        files[where] += 1
        lines[where] += text.count("\n")
        typed[where] += "if TYPE_CHECKING" in text
    print(f"{'room':<24} {'files':>5} {'lines':>7} {'TYPE_CHECKING':>13}")
    for where in sorted(files):
        print(f"{where:<24} {files[where]:>5} {lines[where]:>7} {typed[where]:>13}")
    print(
        f"{'total':<24} {sum(files.values()):>5} {sum(lines.values()):>7} {sum(typed.values()):>13}"
    )
    groups = circles(graph(package))
    print(f"\nimport circles (every import counted): {len(groups)}")
    for group in groups:
        print(f"  {len(group):>2}: {' '.join(m.removeprefix('threadloom.') for m in group)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
