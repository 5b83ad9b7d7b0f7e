"""The raw sqlite3 floor of the turn benchmark: the same four rows a turn stores."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid

from _workload import question
from threadloom.store.sqlite.wal_prefill import prefill_wal, wal_size

ROWS_PER_TURN = 4
_ARGUMENTS = '{"v":1}'


RAW_SCHEMA = """
CREATE TABLE threads (
    id         TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
CREATE TABLE messages (
    id           TEXT PRIMARY KEY,
    thread_id    TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('system','user','assistant','tool')),
    content      TEXT,
    name         TEXT,
    tool_calls   TEXT,
    tool_call_id TEXT,
    tool_status  TEXT,
    status       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    depth        INTEGER NOT NULL DEFAULT 0,
    silent       INTEGER NOT NULL DEFAULT 0,
    metadata     TEXT
);
CREATE UNIQUE INDEX messages_thread_seq ON messages(thread_id, seq);
"""
RAW_INSERT = (
    "INSERT INTO messages(id, thread_id, seq, role, content, name, tool_calls, tool_call_id,"
    " tool_status, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'completed', ?)"
)


def turn_rows(seqs: dict[str, int], thread_id: str, i: int) -> list[tuple[object, ...]]:
    """The four rows of turn ``i`` in ``thread_id``, as Threadloom stores them (ids, seq,
    JSON calls), in the order of :data:`RAW_INSERT`'s columns; ``seqs`` holds each thread's
    last sequence number and is advanced by four."""
    call_id = "call_" + uuid.uuid4().hex[:8]
    calls = json.dumps(
        [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "echo", "arguments": _ARGUMENTS},
            }
        ],
        separators=(",", ":"),
    )
    shapes: list[tuple[str, str | None, str | None, str | None, str | None, str | None]] = [
        ("user", question(i), None, None, None, None),
        ("assistant", None, "Agent", calls, None, None),
        ("tool", "echo 1", "echo", None, call_id, "success"),
        ("assistant", "done", "Agent", None, None, None),
    ]
    out: list[tuple[object, ...]] = []
    for role, content, name, tool_calls, tool_call_id, tool_status in shapes:
        seqs[thread_id] += 1
        out.append(
            (
                str(uuid.uuid4()),
                thread_id,
                seqs[thread_id],
                role,
                content,
                name,
                tool_calls,
                tool_call_id,
                tool_status,
                time.time_ns() // 1000,
            )
        )
    return out


class RawTurns:
    """The floor: the four rows of a turn with plain ``sqlite3``, WAL, ``synchronous=FULL``;
    ``commits`` is 4 (one transaction per row) or 1 (one transaction per turn).

    ``steady`` (default): the WAL file starts at the size it reaches once SQLite reuses it
    (the size at its checkpoint threshold, zeros), as in a database that has been written
    to for a while, and as Threadloom's own WAL starts (``wal_prefill``). Without it the
    floor's first ~70 turns of a new file also pay the file's growth (every synced commit
    then commits the file system's journal too): 1.2–1.5 ms a turn against ~0.65 ms once
    grown, measured on the dev VM, a floor no longer the same for both sides."""

    def __init__(self, path: str, commits: int, steady: bool = True) -> None:
        self.commits = commits
        self.conn = sqlite3.connect(path, isolation_level=None)
        mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise RuntimeError(f"raw sqlite3: could not switch to WAL (got {mode!r})")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.executescript(RAW_SCHEMA)
        self.seqs: dict[str, int] = {}
        self.steady = steady and self.prefill()
        self.pause_s = 0.0
        """A sleep after each commit (section F's paused side; 0: none)."""

    def prefill(self) -> bool:
        """Grow the WAL to its steady-state size now (see the class); False if it could not."""
        pages = int(self.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        page_size = int(self.conn.execute("PRAGMA page_size").fetchone()[0])
        path = self.conn.execute("PRAGMA database_list").fetchone()[2]
        return prefill_wal(self.conn, path, wal_size(pages, page_size))

    def new_thread(self) -> str:
        thread_id = str(uuid.uuid4())
        self.conn.execute(
            "INSERT INTO threads(id, created_at) VALUES (?, ?)",
            (thread_id, time.time_ns() // 1000),
        )
        self.seqs[thread_id] = 0
        return thread_id

    def rows(self, thread_id: str, i: int) -> list[tuple[object, ...]]:
        """The four rows of turn ``i``, as Threadloom stores them (ids, seq, JSON calls)."""
        return turn_rows(self.seqs, thread_id, i)

    def turn(self, thread_id: str, i: int) -> None:
        """One turn's rows, durable: four transactions, or one."""
        execute = self.conn.execute
        if self.commits == 1:
            execute("BEGIN")
            for row in self.rows(thread_id, i):
                execute(RAW_INSERT, row)
            execute("COMMIT")
            return
        for row in self.rows(thread_id, i):
            execute("BEGIN")
            execute(RAW_INSERT, row)
            execute("COMMIT")
            if self.pause_s:
                time.sleep(self.pause_s)

    def seed(self, thread_id: str, messages: int) -> None:
        """``messages`` rows of whole turns into ``thread_id``, one transaction, not timed."""
        rows: list[tuple[object, ...]] = []
        i = 0
        while len(rows) < messages:
            rows.extend(self.rows(thread_id, -1 - i))
            i += 1
        self.seqs[thread_id] -= len(rows) - messages
        self.conn.execute("BEGIN")
        self.conn.executemany(RAW_INSERT, rows[:messages])
        self.conn.execute("COMMIT")
        if self.steady:  # the seeding's frames out of the WAL, which starts steady again
            self.prefill()

    def count(self, thread_id: str) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM messages WHERE thread_id = ?", (thread_id,)
        ).fetchone()
        return int(row[0])

    def close(self) -> None:
        self.conn.close()


def time_raw(raw: RawTurns, thread_id: str, start: int, count: int, out: list[int]) -> None:
    """``count`` sequential floor turns, each timed on its own."""
    clock = time.perf_counter_ns
    for i in range(start, start + count):
        t0 = clock()
        raw.turn(thread_id, i)
        out.append(clock() - t0)
