"""The package's floors (README.md, Layout; bottom to top in ``FLOORS``): dependencies point
down, and nothing above store/ knows SQLite — one Store protocol, two backends (decision D13
of docs/spec/README.md)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "threadloom"

# Bottom to top. A room may import from its own floor and the floors below it.
FLOORS: list[tuple[str, ...]] = [
    (
        "errors",
        "records",
        "retry_after",
    ),
    ("store",),
    ("wire",),
    ("providers", "testing"),
    ("define",),
    ("thread",),
    ("node",),
    ("engine",),
    ("client",),
    ("server",),
    ("cli",),
]


def _floor(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "threadloom" or len(parts) < 2:
        return None
    for level, rooms in enumerate(FLOORS):
        if parts[1] in rooms:
            return level
    return None


def _imports(path: Path) -> list[str]:
    """Every ``threadloom`` module ``path`` imports, wherever the import stands (module
    level, in a function, under ``TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return [m for m in found if m.startswith("threadloom")]


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        out.append((".".join(rel.parts).removesuffix(".__init__"), path))
    return out


def test_dependencies_point_down() -> None:
    violations = []
    for module, path in _modules():
        own = _floor(module)
        if own is None:
            continue
        for imported in _imports(path):
            target = _floor(imported)
            if target is not None and target > own:
                violations.append(f"{module} imports {imported}")
    assert violations == []


def test_nothing_above_store_depends_on_sqlite() -> None:
    violations = [
        f"{module} imports {imported}"
        for module, path in _modules()
        if not module.startswith("threadloom.store")
        for imported in _imports(path)
        if imported.startswith("threadloom.store.sqlite")
    ]
    assert violations == []
    assert len(_modules()) > 20  # the walk found the package


def _resolved(module: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``module`` imports (``from a.b import c``: ``a.b.c`` when
    that is a module, else ``a.b``), wherever the import stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in known:
                    found.add(full)
                elif node.module in known:
                    found.add(node.module)
    found.discard(module)
    return found


def _circle_in(room: str) -> list[str]:
    """The modules of ``room`` that lie on an import circle within it (every import counted:
    module level, local, ``TYPE_CHECKING``)."""
    prefix = f"threadloom.{room}"
    paths = {m: p for m, p in _modules() if m == prefix or m.startswith(prefix + ".")}
    edges = {m: _resolved(m, p, set(paths)) for m, p in paths.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), list(edges[start])
        while todo:
            current = todo.pop()
            if current == goal:
                return True
            if current not in seen:
                seen.add(current)
                todo.extend(edges.get(current, ()))
        return False

    return sorted(m for m in edges if reaches(m, m))


def test_node_has_no_import_circle() -> None:
    """node/ (spec 12: cluster, liveness, relay, ordered delivery) is a room without an import
    circle, not even through ``TYPE_CHECKING`` or a function-local import."""
    assert len([m for m, _ in _modules() if m.startswith("threadloom.node.")]) >= 5
    assert _circle_in("node") == []


def test_wire_imports_only_the_records_floor() -> None:
    """``wire/`` is the HTTP contract: pydantic models over records, nothing of the engine,
    the thread floor, the store or the server (so the client can use it without them)."""
    allowed = (*FLOORS[0], "wire")
    violations = [
        f"{module} imports {imported}"
        for module, path in _modules()
        if module.startswith("threadloom.wire")
        for imported in _imports(path)
        if imported == "threadloom" or imported.split(".")[1] not in allowed
    ]
    assert violations == []
