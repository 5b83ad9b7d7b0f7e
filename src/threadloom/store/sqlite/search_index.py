"""Migrations 26 and 27 of the SQLite store: the full-text index of message text (spec 08
§8.14), and its backlog.

``messages_fts`` is an FTS5 table with external content (``content='messages'``,
``content_rowid='rid'``): it keeps only the index, and reads a hit's text (for its snippet)
from ``messages`` by ``rid``, so no text is stored twice. Three triggers keep it in step
with every write of the messages the search covers — the visible top-level user and
assistant messages with text — whatever path writes them (a send, a run, an edit, an
import, a message or thread deletion, retention): one index insert per such message
stored, a delete and an insert when its text or visibility changes. An external-content
index must be told a removed row's exact old text, so each trigger tests on the old row
the condition the insert tested on the new one.

FTS5 is part of the SQLite of every CPython build the project supports (the amalgamation's
default build enables it since SQLite 3.9); a SQLite without it fails the migration with
"no such module: fts5". The migration only adds (a table, its rows, triggers): the code of
an older release keeps working on the database, its message writes indexed by the triggers.

Migration 27 takes the index insert off the write path: FTS5 writes a new segment of the
index at every commit that changed it (and merges segments as they pile up), and a turn
commits each message on its own, so each stored user or assistant message cost a segment
write — 4–7 % of a turn's instructions. Instead, the insert trigger notes the message's
``rid`` in ``messages_fts_backlog`` (one small B-tree row), and :data:`CATCH_UP` moves the
backlog into the index in one transaction — one segment for all of it: before each search
(so a search sees every message stored before it) and in the store's background pass
(``SqliteStore``, so the backlog stays small). Rowids are not in commit order (``rid`` is
the thread's number and the message's ``seq``), so the backlog is a set of rows, not a
watermark.

The invariant the triggers keep: a message the index covers is either in the index, with
its current text, or in the backlog — never both. A delete or an edit of a message still in
the backlog has nothing to take out of the index (FTS5's ``'delete'`` needs the exact text
it indexed); the catch-up reads the row as it is then and indexes it only if it is still
covered; a message deleted from the backlog leaves its backlog row too.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Mapping

from threadloom.errors import StoreError

log = logging.getLogger(__name__)

INDEXED = (
    "{r}.depth = 0 AND {r}.silent = 0 AND ({r}.role = 'user' OR {r}.role = 'assistant')"
    " AND {r}.content <> ''"
)
"""The messages the index holds, as a condition on row ``{r}`` (``new``, ``old``)."""

_NEW, _OLD = INDEXED.format(r="new"), INDEXED.format(r="old")

SQL = f"""
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content, content='messages', content_rowid='rid', tokenize='unicode61 remove_diacritics 0'
);
INSERT INTO messages_fts(rowid, content)
    SELECT rid, content FROM messages m WHERE {INDEXED.format(r="m")}
    AND NOT EXISTS (SELECT 1 FROM messages_fts_idx);
CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages WHEN {_NEW} BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.rid, new.content);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages WHEN {_OLD} BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES ('delete', old.rid, old.content);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_update AFTER UPDATE OF content, silent ON messages
WHEN ({_OLD}) OR ({_NEW}) BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        SELECT 'delete', old.rid, old.content WHERE {_OLD};
    INSERT INTO messages_fts(rowid, content) SELECT new.rid, new.content WHERE {_NEW};
END;
"""
"""The migration's text (triggers' bodies hold ``;``: ``schema.statements`` keeps them whole).

Run again (its record lost, as ``threadloom migrate`` may do one behind) it changes nothing:
``IF NOT EXISTS``, and the index is filled only while it holds nothing — once the table and
its triggers exist, the index holds every message it covers, so an empty index means there
is none (``messages_fts_idx``: FTS5's own table of the index's segments)."""

BACKLOG = "messages_fts_backlog"
"""The messages stored or edited since the index last caught up, by ``rid``."""

MIGRATION_27 = f"""
CREATE TABLE IF NOT EXISTS {BACKLOG} (rid INTEGER PRIMARY KEY);
DROP TRIGGER IF EXISTS messages_fts_insert;
DROP TRIGGER IF EXISTS messages_fts_delete;
DROP TRIGGER IF EXISTS messages_fts_update;
CREATE TRIGGER IF NOT EXISTS messages_fts_backlog_insert AFTER INSERT ON messages
WHEN {_NEW} BEGIN
    INSERT OR IGNORE INTO {BACKLOG}(rid) VALUES (new.rid);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_backlog_delete AFTER DELETE ON messages
WHEN {_OLD} BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        SELECT 'delete', old.rid, old.content
        WHERE NOT EXISTS (SELECT 1 FROM {BACKLOG} WHERE rid = old.rid);
    DELETE FROM {BACKLOG} WHERE rid = old.rid;
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_backlog_update
AFTER UPDATE OF content, silent ON messages WHEN ({_OLD}) OR ({_NEW}) BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        SELECT 'delete', old.rid, old.content
        WHERE {_OLD} AND NOT EXISTS (SELECT 1 FROM {BACKLOG} WHERE rid = old.rid);
    INSERT OR IGNORE INTO {BACKLOG}(rid) SELECT new.rid WHERE {_NEW};
END;
"""
"""Migration 27: the backlog table, and the three triggers of migration 26 replaced by
three that keep the invariant above (the index then holds every message it covers, so the
backlog starts empty). Run again it changes nothing: ``IF EXISTS``, ``IF NOT EXISTS``."""

CATCH_UP = (
    f"INSERT INTO messages_fts(rowid, content) SELECT m.rid, m.content FROM {BACKLOG} b"
    f" JOIN messages m ON m.rid = b.rid WHERE {INDEXED.format(r='m')}",
    f"DELETE FROM {BACKLOG}",
)
"""The index brought up to date, in one write transaction: the backlog's messages that are
still covered indexed with their text as it is now, and the backlog emptied."""

INDEX_EVERY_S = 1.0
"""How often the store's background pass indexes the backlog, when something was written
(``THREADLOOM_SEARCH_INDEX_SECONDS``; ``off``: no pass, a search still catches up)."""

ENV = "THREADLOOM_SEARCH_INDEX_SECONDS"


def every_s_from_env(env: Mapping[str, str]) -> float:
    """The pass's interval from ``env`` (:data:`ENV`): a positive number of seconds, or
    ``off`` (0: no pass); :data:`INDEX_EVERY_S` when unset."""
    raw = (env.get(ENV) or "").strip()
    if not raw:
        return INDEX_EVERY_S
    if raw.lower() == "off":
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise StoreError(f"{ENV} must be a positive number of seconds or 'off', not {raw!r}")
    return value


class BacklogPass:
    """The SQLite store's background pass over the index's backlog: every ``every_s``
    seconds, when the store committed a write since the last pass, ``catch_up()`` (one
    write transaction, off any turn's path). A search catches up first anyway; the pass
    keeps the backlog — and so that first search's work — small."""

    def __init__(
        self, catch_up: Callable[[], Awaitable[int]], writes: Callable[[], int], every_s: float
    ) -> None:
        self._catch_up = catch_up
        self._writes = writes
        self.every_s = every_s
        self.passes = 0
        """Passes run (diagnostics and tests)."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None and self.every_s > 0:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="threadloom-search-backlog"
            )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None or task.done():  # also: its loop ended (``asyncio.run`` cancels it)
            return
        task.cancel()
        if task.get_loop() is asyncio.get_running_loop():
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        seen = self._writes()
        while True:
            await asyncio.sleep(self.every_s)
            if self._writes() == seen:
                continue
            try:
                await self._catch_up()
            except asyncio.CancelledError:
                raise
            except Exception:  # a store closing under it, a full disk: tried again later
                log.exception("indexing the search backlog failed")
            self.passes += 1
            seen = self._writes()
