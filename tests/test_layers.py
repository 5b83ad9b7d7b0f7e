"""The package's floors (ARCHITECTURE.md; bottom to top in ``FLOORS``): dependencies point
down, and nothing above store/ knows SQLite — one Store protocol, two backends (decision D13
of docs/spec/README.md)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "threadloom"
HOUSE = Path(__file__).resolve().parent.parent / "scripts" / "house.py"

# Bottom to top. A room may import from its own floor and the floors below it.
FLOORS: list[tuple[str, ...]] = [
    (
        "errors",
        "metrics",
        "records",
        "retry_after",
        "version",
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


def _house() -> ModuleType:
    """``scripts/house.py``, whose reading of the imports this test shares."""
    spec = importlib.util.spec_from_file_location("house", HOUSE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _circles_in(room: str) -> list[list[str]]:
    """The import circles that hold a module of ``room``, counting every import: module
    level, inside functions and under ``TYPE_CHECKING`` (a circle closed by a type-only
    import is still one a reader has to walk)."""
    house = _house()
    prefix = f"threadloom.{room}"
    return [
        group
        for group in house.circles(house.graph(PACKAGE))
        if any(m == prefix or m.startswith(prefix + ".") for m in group)
    ]


def test_engine_has_no_import_circle() -> None:
    """engine/ (all its sub-rooms together) is in no import circle. A step's helpers see the
    run through the protocols of ``engine/env.py``, the run's endings see the manager
    through ``ending.Runs``; a new circle needs such a protocol, not a late import."""
    assert len([m for m, _ in _modules() if m.startswith("threadloom.engine.")]) >= 20
    assert _circles_in("engine") == []


def test_node_has_no_import_circle() -> None:
    """node/ (spec 12: cluster, liveness, relay, ordered delivery) is in no import circle:
    it sees the engine through ``node/host.py``'s ``NodeHost``, never the ``Runtime``."""
    assert len([m for m, _ in _modules() if m.startswith("threadloom.node.")]) >= 5
    assert _circles_in("node") == []


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
