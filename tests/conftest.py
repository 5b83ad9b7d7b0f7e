"""Shared fixtures: a real Runtime on a real store — every test that takes ``db_url`` runs
on SQLite (a file in a temporary directory) and on PostgreSQL (a schema of its own).

PostgreSQL is ``THREADLOOM_TEST_PG_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``).
When it cannot be reached, the PostgreSQL half is skipped with the reason
(``pg_support.require_postgres``); under ``CI=true`` such a skip is a failure. A test
about SQLite itself (its pragmas, WAL, migrations, process lock) is marked
``sqlite_only`` and runs on SQLite alone; one about several nodes sharing the store,
``postgres_only``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes import FakeClock  # noqa: F401 - re-exported for older imports
from pg_support import create_schema, drop_schema, require_postgres, schema_url
from threadloom import Runtime


def pytest_configure(config: pytest.Config) -> None:
    # The examples' demo model streams at a reader's pace for people (examples/models/demo.py);
    # the tests, and the servers they start (which inherit this environment), want it at once.
    os.environ.setdefault("DEMO_CHUNK_SECONDS", "0")
    config.addinivalue_line(
        "markers", "sqlite_only: about SQLite itself; runs on the SQLite store only"
    )
    config.addinivalue_line(
        "markers",
        "postgres_only: about several nodes sharing a store; runs on PostgreSQL only",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "db_url" in metafunc.fixturenames:
        marked = metafunc.definition.get_closest_marker
        backends = ["sqlite", "postgresql"]
        if marked("sqlite_only") is not None:
            backends = ["sqlite"]
        elif marked("postgres_only") is not None:
            backends = ["postgresql"]
        metafunc.parametrize("db_url", backends, indirect=True)


@pytest.fixture
def backend(db_url: str) -> str:
    """``"sqlite"`` or ``"postgresql"``: the store under ``db_url``."""
    return "postgresql" if db_url.startswith("postgresql://") else "sqlite"


@pytest.fixture
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if getattr(request, "param", "sqlite") == "sqlite":
        yield f"sqlite:///{tmp_path / 'threadloom.db'}"
        return
    require_postgres()
    name = f"tl_{uuid.uuid4().hex[:16]}"
    create_schema(name)
    try:
        yield schema_url(name)
    finally:
        drop_schema(name)


@pytest.fixture
async def runtime(db_url: str) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(db_url)
    yield rt
    await rt.close()


@pytest.fixture
def open_runtime(db_url: str) -> Callable[..., Any]:
    """Open further Runtimes on the same store (closed by the test)."""

    async def opener(**options: Any) -> Runtime:
        return await Runtime.open(db_url, **options)

    return opener
