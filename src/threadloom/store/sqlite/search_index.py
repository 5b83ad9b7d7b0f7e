"""Migration 26 of the SQLite store: the full-text index of message text (spec 08 §8.14).

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
"""

from __future__ import annotations

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
