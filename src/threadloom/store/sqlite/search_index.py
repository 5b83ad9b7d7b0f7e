"""Migration 27 of the SQLite store: the full-text index of message text (spec 08 §8.14).

``messages_fts`` is an FTS5 table with external content (``content='messages'``,
``content_rowid='rid'``): it keeps only the index, and reads a hit's text (for its snippet)
from ``messages`` by ``rid``, so no text is stored twice. Three triggers keep it in step
with every write of the messages the search covers — the visible top-level user and
assistant messages with text — whatever path writes them (a send, a run, an edit, an
import, a message or thread deletion, retention): one index insert per stored message,
one delete and insert when its text or visibility changes. An external-content index
must be told a removed row's exact old text, so each trigger tests the same condition on
the old row that the insert tested on the new one.

The trigger bodies hold ``;``, which the migration runner splits SQL text on: they are
created here, inside the migration's transaction. FTS5 is part of the SQLite of every
CPython build the project supports (the amalgamation enables it by default); a SQLite
without it fails the migration with "no such module: fts5".
"""

from __future__ import annotations

import sqlite3

INDEXED = (
    "{r}.depth = 0 AND {r}.silent = 0 AND ({r}.role = 'user' OR {r}.role = 'assistant')"
    " AND {r}.content <> ''"
)
"""The messages the index holds, as a condition on row ``{r}`` (``new``, ``old``)."""

_NEW, _OLD = INDEXED.format(r="new"), INDEXED.format(r="old")

STATEMENTS = (
    "CREATE VIRTUAL TABLE messages_fts USING fts5("
    "content, content='messages', content_rowid='rid',"
    " tokenize='unicode61 remove_diacritics 0')",
    f"INSERT INTO messages_fts(rowid, content) SELECT rid, content FROM messages m"
    f" WHERE {INDEXED.format(r='m')}",
    f"CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages WHEN {_NEW} BEGIN"
    " INSERT INTO messages_fts(rowid, content) VALUES (new.rid, new.content); END",
    f"CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages WHEN {_OLD} BEGIN"
    " INSERT INTO messages_fts(messages_fts, rowid, content)"
    " VALUES ('delete', old.rid, old.content); END",
    f"CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, silent ON messages"
    f" WHEN ({_OLD}) OR ({_NEW}) BEGIN"
    " INSERT INTO messages_fts(messages_fts, rowid, content)"
    f" SELECT 'delete', old.rid, old.content WHERE {_OLD};"
    " INSERT INTO messages_fts(rowid, content)"
    f" SELECT new.rid, new.content WHERE {_NEW}; END",
)


def create_search_index(conn: sqlite3.Connection) -> None:
    """Create the index, fill it with the messages already stored, and add its triggers,
    inside the caller's transaction."""
    for statement in STATEMENTS:
        conn.execute(statement)
