"""Tx.flush writes a few events with NULL in the statement text for their None entity ids
and payloads, more by binding them: both store the same rows. Real Runtime, real file."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any

import pytest

from threadloom import Runtime
from threadloom.store.core.codec import dump_json
from threadloom.store.core.tx import Tx

pytestmark = pytest.mark.sqlite_only  # about the SQLite store itself

_PATTERNS: list[tuple[str | None, dict[str, Any] | None]] = [
    ("e1", None),
    (None, None),
    ("e2", {"k": 1}),
    (None, {"k": [2]}),
]


def _write_events(count: int) -> Any:
    def write(conn: sqlite3.Connection, clock: Any, thread_id: str) -> list[int]:
        tx = Tx(conn, thread_id, clock)
        seqs = [tx.event("note", *_PATTERNS[i % len(_PATTERNS)]).seq for i in range(count)]
        tx.flush()
        return seqs

    return write


async def test_few_and_many_events_store_the_same_rows(runtime: Runtime) -> None:
    tid = (await runtime.create_thread("a")).thread_id
    store: Any = runtime.store
    for count in (4, 8, 9, 13):  # up to 8: NULL in the text; more: bound None values
        seqs = await store._write(_write_events(count), tid)
        with closing(sqlite3.connect(str(store.path))) as conn:
            rows = conn.execute(
                "SELECT seq, kind, entity_id, payload, typeof(entity_id), typeof(payload)"
                " FROM thread_events WHERE thread_id = ? AND kind = 'note'"
                f" AND seq IN ({','.join('?' * len(seqs))}) ORDER BY seq",
                (tid, *seqs),
            ).fetchall()
        expected = []
        for i, seq in enumerate(seqs):
            entity, payload = _PATTERNS[i % len(_PATTERNS)]
            text = dump_json(payload)
            expected.append(
                (
                    seq,
                    "note",
                    entity,
                    text,
                    "null" if entity is None else "text",
                    "null" if payload is None else "text",
                )
            )
        assert rows == expected
