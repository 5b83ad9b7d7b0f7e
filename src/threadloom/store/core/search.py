"""Full-text search of threads by the text of their messages (spec 08 §8.14), once for both
backends: the dialect supplies the index's part (``Dialect.search_hits``: the matching
messages with a rank; ``search_snippets``: a snippet of each), this module the rest — the
thread list's filters, one hit per thread (its best message), the order, the page and
the count.

The index covers a thread's visible top-level user and assistant messages with text:
SQLite's FTS5 table ``messages_fts`` (migration 26, ``store/sqlite/search_index.py``),
whose messages stored since it last caught up wait in a backlog (migration 27) that
:func:`catch_up` indexes before each search; PostgreSQL's ``messages.search`` column
(migration 16) and its GIN index, the column written by the store's own statements
(``Dialect.search_vector``, ``messages.searched_text``; migration 21).
"""

from __future__ import annotations

from collections.abc import Sequence

from threadloom.store.core.codec import (
    THREAD_COLUMNS,
    THREAD_LINEAGE,
    THREAD_SUMMARY,
    thread_from_row,
)
from threadloom.store.core.conn import Conn
from threadloom.store.core.threads import thread_filters
from threadloom.store.shapes import Clock, SearchHit, SearchTerm, ThreadQuery

MARK_START, MARK_END = "\x02", "\x03"
"""What the dialects' snippets put around a matched word."""


def catch_up(conn: Conn, clock: Clock) -> int:
    """Bring the index up to date (``Dialect.search_catch_up``; nothing where each write
    keeps it in step): how many messages it indexed."""
    counts = [conn.execute(statement).rowcount for statement in conn.sql.search_catch_up]
    return max(counts[0], 0) if counts else 0


def search_threads(
    conn: Conn, q: ThreadQuery, terms: Sequence[SearchTerm]
) -> tuple[list[SearchHit], int]:
    if not any(not t.exclude for t in terms):
        return [], 0
    match = conn.sql.search_match(terms)
    where, params = thread_filters(conn, q)
    hits = (
        f"WITH hits AS ({conn.sql.search_hits}),"
        " best AS (SELECT hits.thread_id AS hit_thread, hits.rid AS hit_rid,"
        " hits.score AS hit_score,"
        " ROW_NUMBER() OVER (PARTITION BY hits.thread_id"
        " ORDER BY hits.score DESC, hits.rid DESC) AS hit_n,"
        " COUNT(*) OVER (PARTITION BY hits.thread_id) AS hit_count"
        f" FROM hits JOIN threads ON threads.id = hits.thread_id{where})"
    )
    total = int(
        conn.execute(
            f"{hits} SELECT COUNT(*) FROM best WHERE hit_n = 1", (match, *params)
        ).fetchone()[0]
    )
    if total == 0 or q.offset >= total:
        return [], total
    rows = conn.execute(
        f"{hits} SELECT {THREAD_COLUMNS}, {THREAD_SUMMARY}, {THREAD_LINEAGE},"
        " best.hit_rid, best.hit_score, best.hit_count"
        " FROM best JOIN threads ON threads.id = best.hit_thread"
        " WHERE best.hit_n = 1"
        " ORDER BY best.hit_score DESC, threads.last_activity_us DESC, threads.id"
        " LIMIT ? OFFSET ?",
        (match, *params, q.limit, q.offset),
    ).fetchall()
    rids = [int(r[-3]) for r in rows]
    marks = ",".join("?" * len(rids))
    ids = dict(
        conn.execute(f"SELECT rid, id FROM messages WHERE rid IN ({marks})", rids).fetchall()
    )
    snippets = dict(conn.execute(conn.sql.search_snippets(len(rids)), (match, *rids)).fetchall())
    return [
        SearchHit(
            thread=thread_from_row(r[:-3], summary=True, lineage=True),
            message_id=ids[int(r[-3])],
            snippet=snippet_parts(conn.sql.snippet_text(snippets.get(int(r[-3])) or "")),
            rank=float(r[-2]),
            matches=int(r[-1]),
        )
        for r in rows
    ], total


def snippet_parts(marked: str) -> tuple[tuple[str, bool], ...]:
    """A snippet with its marks as parts: ``(text, matched)``, neighbours merged, the
    marks gone (a mark character in a message's own text only toggles a highlight)."""
    parts: list[tuple[str, bool]] = []
    matched = False
    text: list[str] = []
    for ch in marked + MARK_START:
        if ch in (MARK_START, MARK_END):
            chunk = "".join(text)
            if chunk:
                if parts and parts[-1][1] == matched:
                    parts[-1] = (parts[-1][0] + chunk, matched)
                else:
                    parts.append((chunk, matched))
            text = []
            matched = ch == MARK_START
        else:
            text.append(ch)
    return tuple(parts)


def _quoted(term: SearchTerm) -> str:
    return '"' + term.text.replace('"', '""') + '"'


def fts5_match(terms: Sequence[SearchTerm]) -> str:
    """The terms as an FTS5 query: every included term, quoted (a phrase of its words),
    ``AND``-ed; the excluded ones ``NOT`` (FTS5's ``NOT`` is binary, so they follow)."""
    wanted = " AND ".join(_quoted(t) for t in terms if not t.exclude)
    unwanted = " OR ".join(_quoted(t) for t in terms if t.exclude)
    return f"({wanted}) NOT ({unwanted})" if unwanted else wanted


def websearch_text(terms: Sequence[SearchTerm]) -> str:
    """The terms as ``websearch_to_tsquery`` text: each quoted (a phrase of its words, so
    ``or`` is a word as in FTS5, not an operator), excluded ones with ``-``."""
    return " ".join(("-" if t.exclude else "") + _quoted(t) for t in terms)
