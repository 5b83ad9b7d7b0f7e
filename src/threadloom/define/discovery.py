"""Project folder discovery (spec 04 §4.2.2): import a project's files, register what they define.

Folders are visited in the order models, tools, hooks, prompts, agents; in each, every
``*.py`` not starting with ``_`` is imported in file-name order as the module
``threadloom_project.<folder>.<stem>``, so project files can import each other by those
names. Every module-level ``Model``, ``Prompt``, ``Agent``, ``MCPServer``, ``@tool`` and
``@hook`` object is registered with its file as origin. A file that fails to import is
recorded as a load error and discovery goes on, so that every error of the project is
reported at once.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Final

from threadloom.define.agent import Agent
from threadloom.define.hook import hook_definition_of
from threadloom.define.mcp import MCPServer
from threadloom.define.model import Model
from threadloom.define.prompt import Prompt
from threadloom.define.tool import tool_definition_of
from threadloom.define.validation import IN_CODE, place
from threadloom.errors import DefinitionError, HookIdConflict
from threadloom.records import Schedule

if TYPE_CHECKING:
    from threadloom.define.registry import Definitions

PACKAGE: Final = "threadloom_project"
FOLDERS: Final = ("models", "tools", "hooks", "prompts", "agents")


def project_files(root: Path) -> list[tuple[str, Path]]:
    """``(folder, file)`` pairs in discovery order (§4.2.2 step 1)."""
    found: list[tuple[str, Path]] = []
    for folder in FOLDERS:
        directory = root / folder
        if directory.is_dir():
            files = sorted(p for p in directory.glob("*.py") if not p.name.startswith("_"))
            found.extend((folder, path) for path in files if path.is_file())
    return found


def _package(name: str, directory: Path) -> ModuleType:
    """An in-memory package whose submodules are the ``*.py`` files of ``directory``."""
    spec = importlib.util.spec_from_loader(name, loader=None, is_package=True)
    assert spec is not None and spec.submodule_search_locations is not None
    spec.submodule_search_locations.append(str(directory))
    module = importlib.util.module_from_spec(spec)
    module.__path__ = [str(directory)]
    sys.modules[name] = module
    return module


def reset_project_modules() -> None:
    """Forget every ``threadloom_project`` module, so a project can be loaded afresh."""
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def _import(name: str, path: Path) -> ModuleType:
    """Import ``path`` as ``name`` unless a sibling file already imported it."""
    existing = sys.modules.get(name)
    if existing is not None:
        return existing
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _home(fn: object, root: Path, default: str) -> str:
    """The project file defining ``fn`` (a tool or hook function), else ``default``.

    A function imported from another project file is attributed to the file that defines
    it, whichever file discovery registers it from first.
    """
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    file = getattr(module, "__file__", None)
    if module is None or not module.__name__.startswith(PACKAGE + ".") or not file:
        return default
    try:
        return Path(file).resolve().relative_to(root).as_posix()
    except ValueError:
        return default


def register_module(
    definitions: Definitions, module: ModuleType, origin: str, root: Path | None = None
) -> None:
    """Register the module-level definitions of ``module`` (§4.2.2 step 2)."""
    for value in list(vars(module).values()):
        if isinstance(value, Model | Prompt | Agent | MCPServer | Schedule):
            try:
                definitions.add(value, origin=origin)
            except DefinitionError as exc:  # two different schedules of one id
                definitions.record_load_error(origin, str(exc))
            continue
        tool = tool_definition_of(value)
        if tool is not None:
            home = _home(tool.fn, root, origin) if root is not None else origin
            definitions.add(value, origin=home)
            continue
        hook = hook_definition_of(value)
        if hook is None:
            continue
        origin_of_hook = _home(hook.fn, root, origin) if root is not None else origin
        try:
            definitions.add(hook, origin=origin_of_hook)
        except HookIdConflict:
            first = place(definitions.hook_origin(hook.id) or IN_CODE)
            message = f'Duplicate name "{hook.id}": hook {first} and hook in {origin_of_hook}'
            definitions.record_load_error(origin_of_hook, message)


def load_project(definitions: Definitions, path: str | Path) -> None:
    """Import the project at ``path`` into ``definitions`` (§4.2.2).

    Modules of a previously loaded project are dropped first. A missing folder raises
    ``DefinitionError``; a file that fails to import is recorded as
    ``<file>: <ExceptionType>: <message>`` and reported by ``validate()``.
    """
    root = Path(path).resolve()
    if not root.is_dir():
        raise DefinitionError(f"{path}: project folder does not exist")
    reset_project_modules()
    parent = _package(PACKAGE, root)
    folders: dict[str, ModuleType] = {}
    for folder in FOLDERS:  # all packages first: any file may import any other
        if (root / folder).is_dir():
            folders[folder] = _package(f"{PACKAGE}.{folder}", root / folder)
            setattr(parent, folder, folders[folder])
    for folder, file in project_files(root):
        origin = file.relative_to(root).as_posix()
        try:
            module = _import(f"{PACKAGE}.{folder}.{file.stem}", file)
        except Exception as exc:
            definitions.record_load_error(origin, f"{type(exc).__name__}: {exc}")
            continue
        setattr(folders[folder], file.stem, module)
        register_module(definitions, module, origin, root)
