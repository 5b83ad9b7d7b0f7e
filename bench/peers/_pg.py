"""PostgreSQL for the peer benchmark: a schema of its own for each system run, the URLs
that point a system at it, and the probe that reads it from the outside.

Every system on PostgreSQL gets a libpq URL whose ``options`` set its ``search_path`` to
the run's schema and whose ``application_name`` is the schema's name, so the probe can
find the system's own server processes (their CPU time, read from ``/proc``) and the
driver can end any connection left open before it drops the schema. psycopg 3 is imported
where it is used: it is in both venvs (the project's ``postgres`` extra and
bench/peers/requirements.txt), but the SQLite runners never need it."""

from __future__ import annotations

import os
import secrets
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

DEFAULT_URL = os.environ.get("THREADLOOM_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
"""The server and database the PostgreSQL scenarios run on (a schema per system run)."""


def _connect(url: str, **kw: Any) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=3, **kw)


def unreachable(url: str = DEFAULT_URL) -> str | None:
    """Why the PostgreSQL scenarios cannot run (``None`` when they can)."""
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    try:
        with _connect(url) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        text = str(exc).strip()
        return text.splitlines()[0] if text else type(exc).__name__
    return None


def new_schema_name(system: str, scenario: str) -> str:
    """A fresh schema name for one system run (lower case, within 63 characters)."""
    stem = f"bench_{system}_{scenario}".replace("-", "_")[:48]
    return f"{stem}_{secrets.token_hex(4)}"


def schema_url(schema: str, url: str = DEFAULT_URL, app: str | None = None) -> str:
    """``url`` whose connections use ``schema`` and are named ``app`` (the schema)."""
    options = quote(f"-csearch_path={schema}")
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options={options}&application_name={quote(app or schema)}"


def create_schema(schema: str, url: str = DEFAULT_URL) -> None:
    with _connect(url) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')


def drop_schema(schema: str, url: str = DEFAULT_URL) -> None:
    """End the connections still open on ``schema`` (by application name), then drop it."""
    with _connect(url) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (schema,),
        )
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def parts(url: str) -> tuple[str, str, str]:
    """``(url without its query, schema, application name)`` of a :func:`schema_url`."""
    split = urlsplit(url)
    query = dict(parse_qsl(split.query))
    schema = ""
    for option in unquote(query.get("options", "")).split():
        if option.startswith("-csearch_path="):
            schema = option.split("=", 1)[1]
    base = url.split("?", 1)[0]
    return base, schema, query.get("application_name", schema)


def server_facts(url: str = DEFAULT_URL) -> dict[str, str]:
    """The server's version and the settings that decide a commit's durability."""
    names = ("server_version", "synchronous_commit", "fsync", "wal_sync_method", "commit_delay")
    with _connect(url) as conn:
        rows = conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(names),)
        ).fetchall()
    return {str(k): str(v) for k, v in rows}


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _process_cpu_s(pid: int) -> float | None:
    """CPU time of a process on this machine: Linux's ``/proc/PID/schedstat`` (time on a
    CPU, in nanoseconds), else ``/proc/PID/stat``'s user + system time (in clock ticks,
    too coarse for a server process that works a few milliseconds)."""
    try:
        with open(f"/proc/{pid}/schedstat", encoding="ascii") as stat:
            return int(stat.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, ValueError, IndexError):
        return None


class PgProbe:
    """Reads a system's schema from the outside, on a connection of its own (named apart
    from the system's): how many rows its tables hold, how large they are (every table
    with its indexes and TOAST, ``pg_total_relation_size``), and the CPU time of the
    server processes serving the system's connections."""

    def __init__(self, url: str) -> None:
        base, self.schema, self.app = parts(url)
        self.url = schema_url(self.schema, base, app=f"{self.schema}-probe")

    def measure(self) -> tuple[int, int]:
        with _connect(self.url) as conn:
            tables = [
                str(r[0])
                for r in conn.execute(
                    "SELECT c.relname FROM pg_class c JOIN pg_namespace n"
                    " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                    (self.schema,),
                )
            ]
            rows = size = 0
            for name in tables:
                qualified = f'"{self.schema}"."{name}"'
                rows += int(conn.execute(f"SELECT count(*) FROM {qualified}").fetchone()[0])
                size += int(
                    conn.execute(
                        "SELECT pg_total_relation_size(%s::regclass)", (qualified,)
                    ).fetchone()[0]
                )
            return rows, size

    def server_cpu(self) -> dict[int, float] | None:
        """CPU seconds each server process of the system's connections has used so far, by
        process id; ``None`` when the server is not on this machine (nothing to read)."""
        with _connect(self.url) as conn:
            pids = [
                int(r[0])
                for r in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (self.app,)
                )
            ]
        times = {pid: t for pid in pids if (t := _process_cpu_s(pid)) is not None}
        return None if pids and not times else times


def cpu_between(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
    """Server CPU seconds used between two :meth:`PgProbe.server_cpu` readings (a process
    that started in between counts whole; one that ended in between is not seen)."""
    if before is None or after is None:
        return None
    return sum(t - before.get(pid, 0.0) for pid, t in after.items())


def describe(url: str) -> str:
    """The server's version and durability settings, as one line."""
    facts = server_facts(url)
    return (
        f"PostgreSQL {facts.get('server_version', '?')}, synchronous_commit="
        f"{facts.get('synchronous_commit', '?')}, fsync={facts.get('fsync', '?')}"
    )
