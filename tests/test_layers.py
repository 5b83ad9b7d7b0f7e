"""The package's floors (README.md, Layout; bottom to top in ``FLOORS``): dependencies point
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
        "records",
        "thread_records",
        "file_records",
        "log_records",
        "cost_records",
        "ids",
        "stored_fields",
        "unvalidated",
        "retry_after",
        "version",
    ),
    ("store",),
    ("providers", "testing"),
    ("define",),
    ("thread",),
    ("engine",),
    ("client",),
    ("server",),
    ("cli", "cli_auth", "cli_chat", "cli_init"),
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


LEAVING_ENGINE = {"threadloom.engine.liveness", "threadloom.engine.relay"}
"""The node's modules, on their way out of engine/ to node/ (issue 32): their circle with
``engine/run/runtime.py`` goes with the ``NodeHost`` protocol they get there."""


def test_engine_has_no_import_circle() -> None:
    """engine/ (all its sub-rooms together) is in no import circle, counting every import:
    module level, inside functions and under ``TYPE_CHECKING`` (a circle closed by a
    type-only import is still one a reader has to walk). A step's helpers see the run
    through the protocols of ``engine/env.py``, the run's endings see the manager through
    ``ending.Runs``; a new circle needs such a protocol, not a late import."""
    house = _house()
    edges = {
        module: targets - LEAVING_ENGINE
        for module, targets in house.graph(PACKAGE).items()
        if module not in LEAVING_ENGINE
    }
    engine = [
        group
        for group in house.circles(edges)
        if any(m == "threadloom.engine" or m.startswith("threadloom.engine.") for m in group)
    ]
    assert engine == []
