"""Shared fixtures: a real Runtime on a real SQLite file in a temporary directory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from fakes import FakeClock  # noqa: F401 - re-exported for older imports
from threadloom import Runtime


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'threadloom.db'}"


@pytest.fixture
async def runtime(db_url: str) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(db_url)
    yield rt
    await rt.close()


@pytest.fixture
def open_runtime(db_url: str) -> Callable[..., Any]:
    """Open further Runtimes on the same file (closed by the test)."""

    async def opener(**options: Any) -> Runtime:
        return await Runtime.open(db_url, **options)

    return opener
