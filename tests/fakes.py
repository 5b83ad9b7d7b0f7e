"""Test doubles of things outside Threadloom (never of Threadloom's own parts)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_provider_fake(name: str) -> ModuleType:
    """``tests/providers/<name>.py`` (a provider's fake HTTP server) under the module name
    the provider tests import it by, so every test shares one module object."""
    module = sys.modules.get(name)
    if module is None:
        path = Path(__file__).resolve().parent / "providers" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


class FakeClock:
    """A settable µs clock for the store (C01-001, C01-002)."""

    def __init__(self, start: int = 1_700_000_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now
