"""C01-061: the PostgreSQL store's write transactions (and reads) go to the server in
libpq's pipeline mode through ``store.postgres.wire.Wire``: statements are prepared once
they repeat, and the Wire knows from the results which ones the server holds — so a
statement whose PREPARE was in a segment the server aborted is prepared again, a failed
segment leaves the connection idle and serving, and a statement's error is psycopg's class
for it. Real PostgreSQL, a connection of its own (no store around it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import psycopg.errors
import pytest

from pg_support import require_postgres
from threadloom.store.postgres import wire as wire_module
from threadloom.store.postgres.wire import PREPARE_AFTER, Wire

pytestmark = pytest.mark.postgres_only

_INSERT = b"INSERT INTO w(id, v) VALUES ($1, $2)"
_SELECT = b"SELECT id, v FROM w WHERE id >= $1 ORDER BY id"


@pytest.fixture
def table_conn(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection of the test's database with a temporary table ``w`` of its own."""
    require_postgres()
    with psycopg.connect(db_url, autocommit=True) as c:
        c.execute("CREATE TEMP TABLE w (id bigint PRIMARY KEY, v text)")
        yield c


def _server_prepared(c: psycopg.Connection[Any]) -> set[str]:
    return {r[0] for r in c.execute("SELECT name FROM pg_prepared_statements").fetchall()}


def _held(c: psycopg.Connection[Any]) -> list[str]:
    """The first word of each statement the server holds prepared for ``c``."""
    rows = c.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    return sorted(r[0].split()[0] for r in rows)


def _run(w: Wire, *statements: tuple[bytes, tuple[Any, ...]]) -> list[Any]:
    """The statements as one pipeline segment; their row lists."""
    w.enter()
    try:
        sent = [w.send(sql, params) for sql, params in statements]
        w.sync()
    finally:
        w.leave()
    return [r.fetchall() for r in sent]


def test_c01_061_rows_row_counts_and_preparing(table_conn: psycopg.Connection[Any]) -> None:
    """Rows come back typed as psycopg loads them, row counts as the server reports them; a
    statement is prepared at its second execution and the server holds it then."""
    c = table_conn
    w = Wire(c)
    assert _run(w, (_INSERT, (1, "a")), (_SELECT, (0,))) == [[], [(1, "a")]]
    assert not _server_prepared(c)
    w.enter()
    inserted = w.send(_INSERT, (2, None))
    found = w.send(_SELECT, (0,))
    w.sync()
    w.leave()
    assert inserted.rowcount == 1 and found.rowcount == 2
    assert found.fetchone() == (1, "a") and found.fetchone() == (2, None)
    assert found.fetchone() is None
    assert len(_server_prepared(c)) == 2  # both seen twice now
    assert _run(w, (_SELECT, (2,))) == [[(2, None)]]
    assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_c01_061_a_prepare_the_server_skipped_is_not_taken_as_prepared(
    table_conn: psycopg.Connection[Any],
) -> None:
    """A segment fails before a statement's second execution (its PREPARE is skipped with
    the rest of the segment) → the statement's error is psycopg's class, the connection is
    idle, and the statement's next execution prepares it again and runs."""
    c = table_conn
    w = Wire(c)
    for _ in range(PREPARE_AFTER - 1):
        _run(w, (_SELECT, (0,)))
    _run(w, (_INSERT, (1, "a")))
    with pytest.raises(psycopg.errors.UniqueViolation):
        _run(w, (_INSERT, (1, "again")), (_SELECT, (0,)))  # the SELECT's PREPARE: skipped
    assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert _held(c) == ["INSERT"]  # its PREPARE ran before the failure; the SELECT's did not
    for _ in range(PREPARE_AFTER):
        assert _run(w, (_SELECT, (0,))) == [[(1, "a")]]
    assert _held(c) == ["INSERT", "SELECT"]


def test_c01_061_a_failed_transaction_rolls_back_whole(
    table_conn: psycopg.Connection[Any],
) -> None:
    """BEGIN, a write, a failing write, COMMIT in one segment → nothing stored, the
    connection idle, the next transaction on it stores."""
    c = table_conn
    w = Wire(c)
    _run(w, (_INSERT, (1, "a")))
    w.enter()
    w.send(b"BEGIN", prepare=False)
    w.send(_INSERT, (2, "b"))
    w.send(_INSERT, (1, "dup"))
    w.send(b"COMMIT", prepare=False)
    with pytest.raises(psycopg.errors.UniqueViolation):
        w.sync()
    w.leave()
    if c.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        c.execute("ROLLBACK")
    assert c.execute("SELECT id FROM w ORDER BY id").fetchall() == [(1,)]
    assert _run(w, (_INSERT, (2, "b")), (_SELECT, (0,)))[1] == [(1, "a"), (2, "b")]


def test_c01_061_past_its_bound_the_least_recently_used_is_deallocated(
    table_conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """More repeated statements than the bound → the server holds at most the bound, the
    oldest deallocated, and every statement still runs."""
    monkeypatch.setattr(wire_module, "PREPARED_MAX", 3)
    c = table_conn
    w = Wire(c)
    texts = [b"SELECT $1::bigint + %d" % i for i in range(6)]
    for _ in range(3):
        for i, text in enumerate(texts):
            assert _run(w, (text, (10,))) == [[(10 + i,)]]
    assert len(_server_prepared(c)) == 3


def test_c01_061_leaving_after_statements_never_synced(
    table_conn: psycopg.Connection[Any],
) -> None:
    """Statements sent and never synced (a transaction abandoned midway) → leaving reads
    them, the connection leaves pipeline mode and serves psycopg's own statements."""
    c = table_conn
    w = Wire(c)
    w.enter()
    w.send(b"BEGIN", prepare=False)
    w.send(_INSERT, (5, "x"))
    w.leave()
    assert c.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF
    c.execute("ROLLBACK")
    assert c.execute("SELECT count(*) FROM w").fetchone() == (0,)
