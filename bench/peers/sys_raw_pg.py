"""The PostgreSQL floor: plain psycopg 3 committing the rows a Threadloom turn stores — the
twin of ``sys_raw.py`` (``RawTurns`` of bench/_raw_floor.py): the same table and row shape
(``turn_rows``), one transaction per row, committed with the server's
``synchronous_commit`` (on), so four WAL flushes a turn. No model, no framework.

Each row is one ``INSERT`` on a connection in autocommit mode: a transaction of one
statement, one round trip to the server — the least a durable commit of a row costs.
(``BEGIN``, ``INSERT``, ``COMMIT`` as three round trips, as psycopg's default transaction
handling sends them, costs more.) In the empty and history scenarios one connection,
used synchronously on the event loop's thread; in the concurrent scenario ten
``AsyncConnection``\\ s (as many as Threadloom's store opens) shared by the 1,000 threads,
each row taking whichever is free, with the model latency slept between the rows as the
SQLite floor does."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import psycopg
from _common import System

from _raw_floor import turn_rows

CONNECTIONS = 10
"""The concurrent scenario's connections (Threadloom's PostgreSQL store opens 10)."""

SCHEMA = """
CREATE TABLE threads (
    id         TEXT COLLATE "C" PRIMARY KEY,
    created_at BIGINT NOT NULL
);
CREATE TABLE messages (
    id           TEXT COLLATE "C" PRIMARY KEY,
    thread_id    TEXT COLLATE "C" NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    seq          BIGINT NOT NULL,
    role         TEXT COLLATE "C" NOT NULL
                 CHECK (role IN ('system','user','assistant','tool')),
    content      TEXT COLLATE "C",
    name         TEXT COLLATE "C",
    tool_calls   TEXT COLLATE "C",
    tool_call_id TEXT COLLATE "C",
    tool_status  TEXT COLLATE "C",
    status       TEXT COLLATE "C" NOT NULL,
    created_at   BIGINT NOT NULL,
    depth        INTEGER NOT NULL DEFAULT 0,
    silent       SMALLINT NOT NULL DEFAULT 0,
    metadata     TEXT COLLATE "C"
);
CREATE UNIQUE INDEX messages_thread_seq ON messages(thread_id, seq);
"""
INSERT = (
    "INSERT INTO messages(id, thread_id, seq, role, content, name, tool_calls, tool_call_id,"
    " tool_status, status, created_at)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 'completed', %s)"
)


class RawPg(System):
    name = "raw-psycopg"
    backend = "postgresql"
    packages = ("psycopg", "psycopg-binary")
    persistence = (
        "psycopg 3, autocommit: each row one INSERT, its own transaction (4 commits per turn);"
        " concurrent: 10 AsyncConnections shared by the threads"
    )

    async def open(self, path: str, latency: float, concurrent: bool) -> None:
        self.conn = psycopg.connect(path, autocommit=True)
        self.conn.execute(SCHEMA)
        self.latency = latency
        self.concurrent = concurrent
        self.seqs: dict[str, int] = {}
        self.free: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()
        self.pool: list[psycopg.AsyncConnection[Any]] = []
        if concurrent:
            for _ in range(CONNECTIONS):
                conn = await psycopg.AsyncConnection.connect(path, autocommit=True)
                self.pool.append(conn)
                self.free.put_nowait(conn)

    async def new_thread(self) -> Any:
        thread_id = str(uuid.uuid4())
        self.conn.execute(
            "INSERT INTO threads(id, created_at) VALUES (%s, %s)",
            (thread_id, time.time_ns() // 1000),
        )
        self.seqs[thread_id] = 0
        return thread_id

    async def turn(self, thread: Any, i: int) -> None:
        rows = turn_rows(self.seqs, thread, i)
        if not self.concurrent:
            execute = self.conn.execute
            for row in rows:
                execute(INSERT, row)
            return
        # the same four commits, with the two model calls' latency between them
        for row, wait in zip(rows, (True, False, True, False), strict=True):
            conn = await self.free.get()
            try:
                await conn.execute(INSERT, row)
            finally:
                self.free.put_nowait(conn)
            if wait:
                await asyncio.sleep(self.latency)

    async def seed(self, thread: Any, messages: int) -> None:
        rows: list[tuple[object, ...]] = []
        i = 0
        while len(rows) < messages:
            rows.extend(turn_rows(self.seqs, thread, -1 - i))
            i += 1
        self.seqs[thread] -= len(rows) - messages
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany(INSERT, rows[:messages])

    async def count(self, thread: Any) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM messages WHERE thread_id = %s", (thread,)
        ).fetchone()
        assert row is not None
        return int(row[0])

    async def close(self) -> None:
        for conn in self.pool:
            await conn.close()
        self.conn.close()


SYSTEM = RawPg()
