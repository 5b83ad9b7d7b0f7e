"""PostgreSQL for the tests: is it reachable, and a schema of its own per test.

Each store URL names its schema twice: in ``search_path`` (where the store creates its
tables) and as ``application_name``, so the teardown can end the connections a test left
open before it drops the schema.
"""

from __future__ import annotations

import functools
import os
from typing import Any
from urllib.parse import quote

from needs import cannot_run

# Nodes on PostgreSQL with short liveness timings (spec 12 §12.9 rule 2), so a test that
# kills a node waits seconds, not the default 15 s TTL: heartbeat 0.5 s, TTL 6 s, sweep 1 s.
# A node fences itself when no heartbeat got through for half the TTL: 3 s, which a busy
# test machine does not reach by accident (with a 2 s TTL, 1 s did: a loaded full run
# fenced a test's runtime; with 4 s, 2 s did on a machine running four workers and more).
# Runtime.open reads them (NodeTimings.from_env); so do the child processes tests start.
NODE_TIMINGS = {
    "THREADLOOM_NODE_HEARTBEAT_SECONDS": "0.5",
    "THREADLOOM_NODE_TTL_SECONDS": "6",
    "THREADLOOM_SWEEP_SECONDS": "1",
}
for _key, _value in NODE_TIMINGS.items():
    os.environ.setdefault(_key, _value)
NODE_TTL_S = float(os.environ["THREADLOOM_NODE_TTL_SECONDS"])

PG_URL = os.environ.get("THREADLOOM_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _admin(url: str = PG_URL) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=3)


@functools.cache
def pg_unreachable() -> str | None:
    """Why PostgreSQL cannot be used (``None`` when it can), checked once a session."""
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    try:
        with _admin() as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None


def require_postgres() -> None:
    """Skip (or, under ``CI=true``, fail) when PostgreSQL cannot be reached."""
    reason = pg_unreachable()
    if reason is not None:
        cannot_run(f"PostgreSQL at {PG_URL} is unreachable: {reason}", "the PostgreSQL tests")


def schema_url(name: str, url: str = PG_URL) -> str:
    """``url`` whose connections use schema ``name`` (and are named after it)."""
    options = quote(f"-csearch_path={name}")
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options={options}&application_name={name}"


def create_schema(name: str, url: str = PG_URL) -> None:
    with _admin(url) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')


def drop_schema(name: str, url: str = PG_URL) -> None:
    """End the connections still open on schema ``name``, then drop it with its tables."""
    with _admin(url) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def integrity_errors() -> tuple[type[BaseException], ...]:
    """The exception classes of a violated constraint, on either store."""
    import sqlite3

    try:
        import psycopg
    except ImportError:
        return (sqlite3.IntegrityError,)
    return (sqlite3.IntegrityError, psycopg.errors.IntegrityError)


def admin_execute(*statements: str) -> None:
    """Run statements as the test server's administrator (roles, schemas)."""
    with _admin() as conn:
        for statement in statements:
            conn.execute(statement)
