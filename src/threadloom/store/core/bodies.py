"""The bodies of log rows on both stores, LLM request bodies as deltas (spec 04 §4.25).

Every model request repeats its thread's history: at 2,000 messages each LLM row's
``request_body`` is ~250 KB, and differs from the previous row's by a few messages. A row
inserted with ``LogRow.request_delta`` is stored in ``log_requests`` (migration 5) as the
messages it adds to an earlier row of its thread (its *base*), so a turn writes what is
new instead of the whole history:

- a *root* (no usable base) keeps its full text in ``log_bodies`` as before, plus where
  each message's JSON text starts and ends in it, so later rows can take its leading
  messages;
- a *delta row* keeps its prefix, its own message fragments and its suffix (``NULL`` when
  it is the base's), and takes its first ``keep`` messages from its base.

A chain is at most ``MAX_CHAIN_DEPTH`` deltas long. An insert checks the base with one
indexed lookup (a few more only when the row keeps fewer messages than its base took from
further up) and the text's length against the base's; it never reads nor compares the
history's text. A delta that does not add up is stored as plain text, so a read always
returns exactly the ``request_body`` that was inserted. Updates never touch a request.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from threadloom.errors import StoreError
from threadloom.records import LogRow, RequestDelta
from threadloom.store.core.codec import OF_THREAD
from threadloom.store.core.conn import Conn
from threadloom.store.core.tx import Tx

logger = logging.getLogger(__name__)

MAX_CHAIN_DEPTH = 64
"""The most delta rows between a request and its root. A row whose base is this deep is
stored as a new root instead: a read follows at most 64 rows, and a chain writes the full
history once per 65 requests."""

_DECODER = json.JSONDecoder()
_BASE = (
    "SELECT base_id, depth, keep, count, size, suffix_hash FROM log_requests"
    f" WHERE log_id = ? AND {OF_THREAD}"
)
_INSERT_REQUEST = (
    "INSERT INTO log_requests(log_id, thread_id, base_id, depth, keep, count, size, lengths,"
    " prefix, suffix, suffix_hash, fragments) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_READ = (
    "SELECT r.base_id, r.keep, r.count, r.size, r.lengths, r.prefix, r.suffix, r.fragments,"
    " b.body"
    " FROM log_requests r LEFT JOIN log_bodies b ON b.log_id = r.log_id AND b.part = 'request'"
    " WHERE r.log_id = ?"
)


INLINE_RESPONSE_MAX = 2048
"""The longest response body (in characters) kept in its ``logs`` row (migration 11)
rather than in a ``log_bodies`` row of its own: a turn's LLM rows then write one table
and its indexes instead of three b-trees (6 of the ~55 pages a tool turn wrote). Longer
bodies stay beside the row, so an update of its small columns (a tool result) never
rewrites a large body."""


def inline_response(row: LogRow) -> str | None:
    """The value of ``logs.response_body`` for ``row``: its response when short enough."""
    body = row.response_body
    return body if body is not None and len(body) <= INLINE_RESPONSE_MAX else None


def write_bodies(
    conn: Conn,
    row: LogRow,
    *,
    insert: bool,
    parts: tuple[str, ...] = ("request", "response"),
) -> None:
    """Store the named bodies that ``logs`` does not hold (``inline_response``; the
    caller writes that column) as plain text, one ``log_bodies`` row each; an update
    writes the response only when it changed, and never the request, which is written at
    insert only (spec 04 §4.25): comparing it would cost the whole history's text, and a
    request stored as a delta has no text here to compare."""
    for part, body in (("request", row.request_body), ("response", row.response_body)):
        if part not in parts or (part == "request" and not insert):
            continue
        if part == "response" and body is not None and len(body) <= INLINE_RESPONSE_MAX:
            body = None  # in the row: none beside it (an update drops one stored before)
        if body is None:
            if not insert:
                conn.defer("DELETE FROM log_bodies WHERE log_id = ? AND part = ?", (row.id, part))
            continue
        if insert:
            conn.defer(
                "INSERT INTO log_bodies(log_id, part, body) VALUES (?, ?, ?)",
                (row.id, part, body),
            )
            continue
        conn.defer(  # no write when the stored body is the same text
            "INSERT INTO log_bodies(log_id, part, body) VALUES (?, ?, ?)"
            " ON CONFLICT(log_id, part) DO UPDATE SET body = excluded.body"
            " WHERE log_bodies.body <> excluded.body",
            (row.id, part, body),
        )


def insert_bodies(tx: Tx, row: LogRow) -> None:
    """Store a new row's bodies: the request as a delta or a root when the row carries a
    ``request_delta`` that adds up, otherwise (and the response) as plain text."""
    conn = tx.conn
    delta = row.request_delta
    lazy = row.request_body is None and delta is not None and delta.whole is not None
    structured = (
        delta is not None
        and (row.request_body is not None or lazy)
        and _insert_request(tx, row.id, row.request_body, delta)
    )
    if lazy and not structured:  # kept as plain text after all: build it now
        assert delta is not None and delta.whole is not None
        conn.defer(
            "INSERT INTO log_bodies(log_id, part, body) VALUES (?, 'request', ?)",
            (row.id, delta.whole()),
        )
    write_bodies(
        conn,
        row,
        insert=True,
        parts=("response",) if structured or lazy else ("request", "response"),
    )


class _Base(NamedTuple):
    """The columns of a base row that an insert checks (a tuple: built from the row
    without a frozen dataclass's per-field ``object.__setattr__``)."""

    log_id: str
    base_id: str | None
    depth: int
    keep: int
    messages: int
    """The row's ``count`` column: the messages of its request."""
    size: int
    suffix_hash: bytes


def _lookup(conn: Conn, thread_id: str, log_id: str) -> _Base | None:
    found = conn.execute(_BASE, (log_id, thread_id)).fetchone()
    return _Base(log_id, *found) if found else None


def _int_list(values: Sequence[int]) -> str:
    """``json.dumps(values)`` of a list of ints (the same text), without the encoder."""
    return f"[{', '.join(map(str, values))}]"


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _joined_size(lengths: Sequence[int]) -> int:
    """The length of fragments of these lengths joined by commas."""
    return sum(lengths) + len(lengths) - 1 if lengths else 0


def _insert_request(tx: Tx, log_id: str, body: str | None, delta: RequestDelta) -> bool:
    """Store ``body`` as a delta row or a root; ``False`` (nothing written) when the delta
    does not describe ``body``. ``body`` ``None``: the delta's lazy body (``whole``,
    ``length``), built only for a root, its framing given by construction. The row
    written becomes ``tx.request_base``; the base is read unless it is that already."""
    conn, thread_id = tx.conn, tx.thread_id
    prefix, suffix, own = delta.prefix, delta.suffix, delta.fragments
    if body is not None:
        total = len(body)
        if not body.startswith(prefix) or not body.endswith(suffix):
            return _refused(log_id, "its prefix and suffix do not frame the body")
    elif delta.length is None:
        return _refused(log_id, "its lazy body has no length")
    else:
        total = delta.length
    size = total - len(prefix) - len(suffix)
    if size < 0 or delta.keep < 0:
        return _refused(log_id, "its prefix and suffix do not frame the body")
    own_lengths = [len(fragment) for fragment in own]
    own_size = _joined_size(own_lengths)
    base = None
    if delta.base_log_id is not None:
        known = tx.request_base
        if known is not None and known[0] == delta.base_log_id:
            base = _Base(*known)
        else:
            base = _lookup(conn, thread_id, delta.base_log_id)
    if base is not None and delta.keep <= base.messages and base.depth < MAX_CHAIN_DEPTH:
        kept = _kept_size(conn, thread_id, base, delta.keep)
        comma = 1 if delta.keep and own else 0
        if kept is None or kept + comma + own_size != size:
            return _refused(log_id, "its messages do not add up to the body's length")
        digest = _digest(suffix)
        tx.request_base = (
            log_id,
            base.log_id,
            base.depth + 1,
            delta.keep,
            delta.keep + len(own),
            size,
            digest,
        )
        conn.defer(
            _INSERT_REQUEST,
            (
                log_id,
                thread_id,
                base.log_id,
                base.depth + 1,
                delta.keep,
                delta.keep + len(own),
                size,
                _int_list(own_lengths),
                prefix,
                None if digest == base.suffix_hash else suffix,
                digest,
                ",".join(own),
            ),
        )
        return True
    # a root. The kept messages' boundaries come from the base's chain when it is at its
    # depth cap, else (a missing base, another thread's, a keep beyond it) from parsing
    # the body itself, which costs more (~6 ms at 2,000 messages) but is rare.
    if body is None:
        assert delta.whole is not None
        body = delta.whole()
        if len(body) != total or not body.startswith(prefix) or not body.endswith(suffix):
            return _refused(log_id, "its lazy body does not match its length and framing")
    if base is not None and delta.keep <= base.messages:
        lengths = _chain_lengths(conn, base.log_id, delta.keep)
    else:
        lengths = _leading_lengths(body, len(prefix), delta.keep)
    if lengths is None:
        return _refused(log_id, "its kept messages are not in the body")
    lengths += own_lengths
    if _joined_size(lengths) != size:
        return _refused(log_id, "its messages do not add up to the body's length")
    conn.defer(
        "INSERT INTO log_bodies(log_id, part, body) VALUES (?, 'request', ?)", (log_id, body)
    )
    digest = _digest(suffix)
    tx.request_base = (log_id, None, 0, 0, len(lengths), size, digest)
    conn.defer(
        _INSERT_REQUEST,
        (
            log_id,
            thread_id,
            None,
            0,
            0,
            len(lengths),
            size,
            _int_list(lengths),
            prefix,
            None,
            digest,
            None,
        ),
    )
    return True


def _kept_size(conn: Conn, thread_id: str, base: _Base, keep: int) -> int | None:
    """The text length of the first ``keep`` messages of ``base``'s request, joined;
    ``None`` when the chain is broken."""
    while keep < base.keep:  # they all come from further up the chain
        if base.base_id is None:
            return None
        found = _lookup(conn, thread_id, base.base_id)
        if found is None:
            return None
        base = found
    if keep == 0:
        return 0
    if keep == base.messages:
        return base.size
    text = conn.execute(
        "SELECT lengths FROM log_requests WHERE log_id = ?", (base.log_id,)
    ).fetchone()[0]
    dropped: list[int] = json.loads(text)[keep - base.keep :]
    return base.size - sum(dropped) - len(dropped)


_CHAIN = (
    "WITH RECURSIVE chain(n, base_id, keep, lengths) AS ("
    " SELECT 0, base_id, keep, lengths FROM log_requests WHERE log_id = ?"
    " UNION ALL SELECT chain.n + 1, r.base_id, r.keep, r.lengths"
    " FROM chain JOIN log_requests r ON r.log_id = chain.base_id"
    f" WHERE chain.keep > 0 AND chain.n < {MAX_CHAIN_DEPTH})"
    " SELECT keep, lengths FROM chain ORDER BY n"
)
"""A row and the rows up its chain, nearest first: up to the first that keeps nothing (its
root), at most ``MAX_CHAIN_DEPTH + 1`` rows, fewer when a base is missing."""


def _chain_lengths(conn: Conn, log_id: str, need: int) -> list[int] | None:
    """The lengths of the first ``need`` messages of row ``log_id``'s request, from its
    chain (each row's own lengths, as the reader takes its text); ``None`` when broken.
    One statement for the whole chain (it was one per row: 65 at the depth cap)."""
    if need == 0:
        return []
    runs: list[list[int]] = []
    for keep, lengths in conn.execute(_CHAIN, (log_id,)):
        if need > keep:
            runs.append(json.loads(lengths)[: need - keep])
        need = min(need, keep)
        if need == 0:
            break
    if need:
        return None
    return [length for run in reversed(runs) for length in run]


def store_in_full(conn: Conn, log_id: str) -> bool:
    """Store the request of delta row ``log_id`` as a root (its whole text in
    ``log_bodies``, every message's length in its row), so that it no longer reads from
    its base: before retention deletes the base's body (spec 17 §17.2). Rows whose chains
    go through this one read the same as before (a root keeps nothing from further up).
    ``False`` when the row is no delta or its chain is already broken."""
    found = conn.execute(
        "SELECT count FROM log_requests WHERE log_id = ? AND base_id IS NOT NULL", (log_id,)
    ).fetchone()
    if found is None:
        return False
    lengths = _chain_lengths(conn, log_id, int(found[0]))
    try:
        text = RequestReader(conn).text(log_id)
    except StoreError:
        lengths = None
    if lengths is None:
        logger.warning("log row %s: its request body's chain is broken; left as it is", log_id)
        return False
    conn.execute(
        "UPDATE log_requests SET base_id = NULL, depth = 0, keep = 0, lengths = ?,"
        " suffix = NULL, fragments = NULL WHERE log_id = ?",
        (_int_list(lengths), log_id),
    )
    conn.execute(
        "INSERT INTO log_bodies(log_id, part, body) VALUES (?, 'request', ?)", (log_id, text)
    )
    return True


def _leading_lengths(body: str, start: int, count: int) -> list[int] | None:
    """The lengths of the first ``count`` comma-separated JSON values of ``body`` from
    ``start``; ``None`` when there are not that many there."""
    lengths: list[int] = []
    at = start
    for index in range(count):
        if index:
            if body[at : at + 1] != ",":
                return None
            at += 1
        try:
            _, end = _DECODER.raw_decode(body, at)
        except ValueError:
            return None
        lengths.append(end - at)
        at = end
    return lengths


def _refused(log_id: str, why: str) -> bool:
    logger.warning("log row %s: request delta ignored (%s); stored as plain text", log_id, why)
    return False


@dataclass(frozen=True, slots=True)
class _Stored:
    """One ``log_requests`` row as read; ``text`` is a root's whole body, or the fragments
    a delta row adds, joined."""

    base_id: str | None
    keep: int
    count: int
    size: int
    lengths: str
    prefix: str
    suffix: str | None
    text: str


class RequestReader:
    """Rebuilds the request bodies stored as deltas, for one read call. A body is the
    prefix, then from each row of its chain (root last) the leading run of the messages
    that row stores which the rows below it keep, as one slice of that row's text, then
    the suffix: a few slices and one join, never a list of every message. Each stored row
    is fetched once per reader, so the rows of a chain listed together share the fetches."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self._stored: dict[str, _Stored] = {}
        self._lengths: dict[str, list[int]] = {}

    def text(self, log_id: str) -> str:
        """The request body of a delta row, exactly as it was inserted."""
        top = stored = self._fetch(log_id, log_id)
        need = top.count  # of the messages of the row met so far, how many come from here
        runs: list[str] = []
        suffix = top.suffix
        at = log_id
        for _ in range(MAX_CHAIN_DEPTH + 1):
            take = need - stored.keep
            if take > 0:
                runs.append(self._run(at, stored, take))
            need = min(need, stored.keep)
            if stored.base_id is None:
                if suffix is None:
                    suffix = stored.text[len(stored.prefix) + stored.size :]
                break
            if need == 0 and suffix is not None:
                break
            at = stored.base_id
            stored = self._fetch(log_id, at)
            if suffix is None:
                suffix = stored.suffix
        else:
            raise StoreError(f"the request body of log row {log_id} has a chain too long")
        if suffix is None:
            raise StoreError(f"the request body of log row {log_id} is broken at {at}")
        pieces = [top.prefix]
        for run in reversed(runs):
            pieces += (run, ",")
        if runs:
            pieces.pop()
        pieces.append(suffix)
        return "".join(pieces)  # one copy of the text

    def _fetch(self, log_id: str, at: str) -> _Stored:
        stored = self._stored.get(at)
        if stored is None:
            found = self.conn.execute(_READ, (at,)).fetchone()
            if found is None:
                raise StoreError(f"the request body of log row {log_id} is missing row {at}")
            base_id, keep, count, size, lengths, prefix, suffix, fragments, body = found
            text = body if base_id is None else fragments
            if not isinstance(text, str):
                raise StoreError(f"the request body of log row {log_id} is missing at {at}")
            stored = _Stored(base_id, keep, count, size, lengths, prefix, suffix, text)
            self._stored[at] = stored
        return stored

    def _run(self, at: str, stored: _Stored, take: int) -> str:
        """The first ``take`` messages that row ``at`` stores itself, joined."""
        start = len(stored.prefix) if stored.base_id is None else 0
        if take == stored.count - stored.keep:
            length = stored.size if stored.base_id is None else len(stored.text)
        else:
            lengths = self._lengths.get(at)
            if lengths is None:
                lengths = self._lengths[at] = json.loads(stored.lengths)
            length = sum(lengths[:take]) + take - 1
        return stored.text[start : start + length]
