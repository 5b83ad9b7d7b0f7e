"""``threadloom serve`` on a PostgreSQL store it cannot use: one clear line naming the URL
(never its password) and exit code 2, before listening — never a traceback (spec 12 §12.8,
spec 08 §8.11)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from test_serve import LISTENING, serve_refused

from pg_support import PG_URL, admin_execute, require_postgres, schema_url


@pytest.fixture
def pg() -> str:
    require_postgres()
    return PG_URL


def _with(
    url: str, *, user: str | None = None, port: int | None = None, db: str | None = None
) -> str:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{user or parts.username or 'postgres'}@{host}:{port or parts.port or 5432}"
    return parts._replace(netloc=netloc, path=f"/{db}" if db else parts.path).geturl()


def _refused(tmp_path: Path, url: str) -> str:
    done = serve_refused(tmp_path, "--store", url)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output
    assert not any(line in output for line in LISTENING)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_an_unreachable_server_is_one_line_naming_the_url(tmp_path: Path, pg: str) -> None:
    url = _with(pg, port=1)
    line = _refused(tmp_path, url)
    assert "cannot open PostgreSQL database" in line and "127.0.0.1:1" in line
    assert "refused" in line.lower()


def test_the_password_is_never_shown(tmp_path: Path, pg: str) -> None:
    parts = urlsplit(_with(pg, port=1))
    url = parts._replace(netloc=f"postgres:s3cr3t-pw@{parts.hostname}:1").geturl()
    line = _refused(tmp_path, url)
    assert "s3cr3t-pw" not in line and "postgres@127.0.0.1:1" in line


def test_a_missing_database_and_a_missing_role_say_so(tmp_path: Path, pg: str) -> None:
    name = f"tl_missing_{uuid.uuid4().hex[:8]}"
    line = _refused(tmp_path, _with(pg, db=name))
    assert f'database "{name}" does not exist' in line
    line = _refused(tmp_path, _with(pg, user=name))
    assert f'role "{name}" does not exist' in line


@pytest.fixture
def locked_schema(pg: str) -> Iterator[tuple[str, str]]:
    """A role that may log in and a schema it has no right to create tables in."""
    role = f"tl_role_{uuid.uuid4().hex[:8]}"
    schema = f"tl_locked_{uuid.uuid4().hex[:8]}"
    admin_execute(f'CREATE ROLE "{role}" LOGIN', f'CREATE SCHEMA "{schema}"')
    try:
        yield role, schema
    finally:
        admin_execute(f'DROP SCHEMA "{schema}" CASCADE', f'DROP ROLE "{role}"')


def test_a_database_without_rights_says_what_is_missing(
    tmp_path: Path, pg: str, locked_schema: tuple[str, str]
) -> None:
    role, schema = locked_schema
    url = schema_url(schema, _with(pg, user=role))
    line = _refused(tmp_path, url)  # not even USAGE: the schema is not the role's to use
    assert "no schema to create the tables in" in line and role in line
    admin_execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
    line = _refused(tmp_path, url)  # USAGE, but no CREATE
    assert "permission denied for schema" in line and role in line
