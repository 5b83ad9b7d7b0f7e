"""Message writes and reads, on both stores (transaction logic, run by the backend)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from threadloom.errors import InvalidMessage, MessageNotFound, ThreadTerminated
from threadloom.records import MESSAGE_FIELDS_SET, Message, decode_tool_calls
from threadloom.store.base import Clock, Order, StoredEvent
from threadloom.store.core.codec import (
    MESSAGE_COLUMNS,
    OF_THREAD,
    QUEUE_COLUMNS,
    THREAD_RANGE,
    NeedsProjection,
    copy_with,
    dump_attachments,
    dump_json,
    message_from_row,
    message_wire_from_row,
    queue_entry_from_row,
)
from threadloom.store.core.conn import Conn, Dialect, ThreadChanged
from threadloom.store.core.files import drop_unreferenced_attachments
from threadloom.store.core.null_literals import NullFree
from threadloom.store.core.tx import Tx, adjust_count

_CHUNK = 500
T = TypeVar("T")


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _marks(n: int) -> str:
    return ",".join("?" * n)


_TOOL_CALL_INSERT = (
    "INSERT INTO tool_calls(thread_id, id, message_id, name, arguments, created_at) VALUES "
)
_TOOL_CALL_INSERTS: dict[int, str] = {}
"""The INSERT of a message's calls, by their number (up to 16 kept)."""


def _write_tool_calls(tx: Tx, message: Message) -> None:
    if not message.tool_calls:
        return
    rows = [
        (tx.thread_id, call.id, message.id, call.function.name, call.function.arguments, tx.now)
        for call in decode_tool_calls(message.tool_calls)
    ]
    if tx.from_kept:  # all of them, checked by the backend (else the write runs again)
        text = _TOOL_CALL_INSERTS.get(len(rows))
        if text is None:
            values = ",".join(["(?, ?, ?, ?, ?, ?)"] * len(rows))
            text = f"{_TOOL_CALL_INSERT}{values} ON CONFLICT DO NOTHING"
            if len(rows) <= 16:
                _TOOL_CALL_INSERTS[len(rows)] = text
        tx.conn.defer_expect(text, [v for r in rows for v in r], len(rows))
        return
    # a call id another message of the thread holds is skipped, not an error (that would
    # abort a PostgreSQL transaction), and then reported
    inserted = tx.conn.executemany(
        "INSERT INTO tool_calls(thread_id, id, message_id, name, arguments, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        rows,
    ).rowcount
    if inserted == len(rows):
        return
    taken = [
        r[0]
        for r in tx.conn.execute(
            f"SELECT id FROM tool_calls WHERE thread_id = ? AND id IN ({_marks(len(rows))})"
            " AND message_id != ?",
            (tx.thread_id, *(r[1] for r in rows), message.id),
        )
    ]
    call_id = taken[0] if taken else rows[0][1]
    raise InvalidMessage(
        f"tool_calls: call id '{call_id}' is already used by another message of this thread"
    )


def insert_message(
    conn: Conn, clock: Clock, thread_id: str, message: Message, require_live: bool
) -> tuple[Message, StoredEvent]:
    tx = Tx(conn, thread_id, clock)
    if require_live and tx.terminated is not None:
        raise ThreadTerminated(thread_id, tx.terminated)
    stored = insert_in_tx(tx, message)
    event = tx.event("message", stored.id)
    tx.flush()
    return stored, event


_INSERT_TEXT = (
    f"INSERT INTO messages(rid, thread_id, seq, {MESSAGE_COLUMNS}{{search}})"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?{vector})"
)


def _insert(sql: Dialect) -> NullFree:
    """The message INSERT of a dialect: with the search vector where the store writes it
    (``Dialect.search_vector``), its text the last value."""
    if not sql.search_vector:
        return NullFree(_INSERT_TEXT.format(search="", vector=""))
    return NullFree(_INSERT_TEXT.format(search=", search", vector=f", {sql.search_vector}"))


def searched_text(role: str, depth: int, silent: bool | int, content: str | None) -> str | None:
    """The text of a message the full-text search covers — a visible top-level user or
    assistant message with text (spec 08 §8.14.1 rule 1) — else ``None``. Where the store
    writes the search vector (``Dialect.search_vector``), this decides it; SQLite's
    triggers test the same condition in SQL (``store/sqlite/search_index.INDEXED``)."""
    if depth == 0 and not silent and (role == "user" or role == "assistant") and content:
        return content
    return None


def insert_in_tx(tx: Tx, message: Message, created_at: int | None = None) -> Message:
    """Insert inside an open transaction: next seq, a thread-clock stamp (``created_at``
    when given: an imported message keeps its own, spec 21), tool call rows."""
    seq = tx.next_msg_seq()
    stamp = tx.stamp() if created_at is None else created_at
    # stored, every field has its value, as a read gives it: the shared full fields set,
    # and a dictionary whose keys are shared with the class (288 bytes instead of 832: the
    # engine holds the stored message while its step runs, issue 40)
    stored = copy_with(message, {"created_at": stamp}, MESSAGE_FIELDS_SET, shared_keys=True)
    sql = tx.sql

    def duplicate(exc: BaseException) -> BaseException | None:
        if not isinstance(exc, sql.integrity_error) or sql.unique_violation(exc) != "messages.id":
            return None  # a CHECK, a trigger …
        return InvalidMessage(f"message id '{stored.id}' already exists")

    # sent with the transaction's next statement (PostgreSQL's pipeline), its error told
    # apart when it comes
    values: tuple[Any, ...] = (
        tx.key_base + seq,
        tx.thread_id,
        seq,
        stored.id,
        stored.role,
        stored.content,
        stored.name,
        stored.tool_calls,
        stored.tool_call_id,
        stored.tool_status,
        stored.status,
        dump_attachments(stored.attachments),
        stored.reasoning_content,
        stored.reasoning_details,
        stored.prompt,
        stored.created_at,
        stored.parent_id,
        stored.depth,
        int(stored.silent),
        dump_json(stored.metadata),
        stored.subagent_id,
        stored.log_id,
    )
    if sql.search_vector:
        text = searched_text(stored.role, stored.depth, stored.silent, stored.content)
        values = (*values, text)
    tx.conn.defer_checked(*sql.statements(_insert).bind(values), duplicate)
    _write_tool_calls(tx, stored)
    adjust_count(tx, stored.depth, stored.silent, 1)
    return stored


def update_message(
    conn: Conn, clock: Clock, thread_id: str, message: Message
) -> tuple[Message, StoredEvent]:
    tx = Tx(conn, thread_id, clock)
    stored = update_in_tx(tx, message)
    event = tx.event("message", stored.id)
    tx.flush()
    return stored, event


_COLUMN_AT = {name.strip(): i for i, name in enumerate(MESSAGE_COLUMNS.split(","))}
_DEPTH, _SILENT, _TOOL_CALLS = _COLUMN_AT["depth"], _COLUMN_AT["silent"], _COLUMN_AT["tool_calls"]
_ROLE = _COLUMN_AT["role"]


def _mutable_values(message: Message) -> tuple[tuple[str, Any], ...]:
    """The columns an update may change, as they are stored."""
    return (
        ("content", message.content),
        ("name", message.name),
        ("tool_calls", message.tool_calls),
        ("tool_status", message.tool_status),
        ("status", message.status),
        ("attachments", dump_attachments(message.attachments)),
        ("reasoning_content", message.reasoning_content),
        ("reasoning_details", message.reasoning_details),
        ("silent", int(message.silent)),
        ("metadata", dump_json(message.metadata)),
        ("log_id", message.log_id),
    )


def update_in_tx(tx: Tx, message: Message) -> Message:
    """Replace a stored message's mutable fields inside an open transaction; returns the
    stored message as a read would. Only the columns whose value changes are written, so
    the partial indexes on columns an update leaves alone (``silent``, ``log_id``) are not
    rewritten."""
    row = tx.conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ? AND {OF_THREAD}",
        (message.id, tx.thread_id),
    ).fetchone()
    if row is None:
        raise MessageNotFound(message.id)
    fresh = list(row)
    changed: list[tuple[str, Any]] = []
    for column, value in _mutable_values(message):
        at = _COLUMN_AT[column]
        if row[at] != value or type(row[at]) is not type(value):
            changed.append((column, value))
            fresh[at] = value
    if changed:
        sets = [f"{c} = ?" for c, _ in changed]
        values = [v for _, v in changed]
        vector = tx.sql.search_vector
        if vector and any(c == "content" or c == "silent" for c, _ in changed):
            sets.append(f"search = {vector}")
            values.append(
                searched_text(
                    fresh[_ROLE], fresh[_DEPTH], fresh[_SILENT], fresh[_COLUMN_AT["content"]]
                )
            )
        tx.conn.execute(
            f"UPDATE messages SET {', '.join(sets)} WHERE id = ?", (*values, message.id)
        )
    depth, old_silent, old_calls = row[_DEPTH], bool(row[_SILENT]), row[_TOOL_CALLS]
    if old_silent != message.silent:
        adjust_count(tx, depth, old_silent, -1)
        adjust_count(tx, depth, message.silent, 1)
    if old_calls != message.tool_calls:
        if old_calls is not None:
            tx.conn.execute("DELETE FROM tool_calls WHERE message_id = ?", (message.id,))
        _write_tool_calls(tx, message)
    return message_from_row(fresh)


def _cascade_ids(conn: Conn, thread_id: str, root_id: str) -> list[str]:
    """The message and everything that goes with it (spec 01 §1.11.3 rules 1 and 2)."""
    doomed = {root_id}
    call_ids = [
        r[0] for r in conn.execute("SELECT id FROM tool_calls WHERE message_id = ?", (root_id,))
    ]
    frontier: list[str] = [root_id]
    for chunk in _chunks(call_ids):
        for (mid,) in conn.execute(
            "SELECT id FROM messages WHERE thread_id = ? AND tool_call_id IS NOT NULL"
            f" AND tool_call_id IN ({_marks(len(chunk))})",
            (thread_id, *chunk),
        ):
            if mid not in doomed:
                doomed.add(mid)
                frontier.append(mid)
    while frontier:
        found: list[str] = []
        for chunk in _chunks(frontier):
            for (mid,) in conn.execute(
                "SELECT id FROM messages WHERE thread_id = ? AND parent_id IS NOT NULL"
                f" AND parent_id IN ({_marks(len(chunk))})",
                (thread_id, *chunk),
            ):
                if mid not in doomed:
                    doomed.add(mid)
                    found.append(mid)
        frontier = found
    return list(doomed)


def delete_message(conn: Conn, clock: Clock, thread_id: str, message_id: str) -> list[StoredEvent]:
    tx = Tx(conn, thread_id, clock)
    exists = conn.execute(
        f"SELECT 1 FROM messages WHERE id = ? AND {OF_THREAD}", (message_id, thread_id)
    ).fetchone()
    if exists is None:
        queued = conn.execute(
            f"SELECT silent, attachments FROM message_queue WHERE id = ? AND {OF_THREAD}",
            (message_id, thread_id),
        ).fetchone()
        if queued is None:
            return []
        conn.execute("DELETE FROM message_queue WHERE id = ?", (message_id,))
        tx.event("message_deleted", message_id, {"depth": 0, "silent": bool(queued[0])})
        # Spec 01 §1.11.3: a cancelled entry's attachment files go as for messages.
        drop_unreferenced_attachments(tx, [queued[1]])
        return tx.flush()
    ids = _cascade_ids(conn, thread_id, message_id)
    rows: list[tuple[int, str, int, int, str | None]] = []
    for chunk in _chunks(ids):
        rows.extend(
            conn.execute(
                "SELECT seq, id, depth, silent, attachments FROM messages"
                f" WHERE id IN ({_marks(len(chunk))})",
                tuple(chunk),
            )
        )
    rows.sort()
    for chunk in _chunks(ids):
        marks = _marks(len(chunk))
        # spec 01 §1.11.3 rule 3 and the log rule, written out: PostgreSQL keeps no foreign
        # key on tool_calls and logs (migration 20)
        doomed = tuple(chunk)
        conn.execute(f"DELETE FROM tool_calls WHERE message_id IN ({marks})", doomed)
        conn.execute(f"UPDATE logs SET message_id = NULL WHERE message_id IN ({marks})", doomed)
        conn.execute(f"DELETE FROM messages WHERE id IN ({marks})", doomed)
    for _seq, mid, depth, silent, _attachments in rows:
        adjust_count(tx, depth, bool(silent), -1)
        tx.event("message_deleted", mid, {"depth": depth, "silent": bool(silent)})
    # Spec 01 §1.11.3 rule 4: after the message_deleted events, in the same transaction,
    # delete the attachment files of the deleted rows that no remaining message or queue
    # entry of the thread refers to (one file_deleted event each).
    drop_unreferenced_attachments(tx, [row[4] for row in rows])
    return tx.flush()


def get_stored(conn: Conn, thread_id: str, message_id: str) -> Message | None:
    row = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ? AND {OF_THREAD}",
        (message_id, thread_id),
    ).fetchone()
    return message_from_row(row) if row else None


def _terminated(conn: Conn, thread_id: str, version: str | None = None) -> bool:
    """Whether the thread was terminated; with ``version`` (``_page``), while its row had
    that ``Dialect.row_version`` (``ThreadChanged`` otherwise)."""
    if not version:
        row = conn.execute("SELECT terminated FROM threads WHERE id = ?", (thread_id,)).fetchone()
        return row is not None and row[0] is not None
    row = conn.execute(
        f"SELECT terminated FROM threads WHERE id = ? AND {conn.sql.row_version} = ?",
        (thread_id, version),
    ).fetchone()
    if row is None:
        raise ThreadChanged(thread_id)
    return row[0] is not None


def get_message(conn: Conn, thread_id: str, message_id: str) -> Message | None:
    stored = get_stored(conn, thread_id, message_id)
    if stored is not None:
        return stored
    row = conn.execute(
        f"SELECT {QUEUE_COLUMNS} FROM message_queue WHERE id = ? AND {OF_THREAD}",
        (message_id, thread_id),
    ).fetchone()
    if row is None:
        return None
    return queue_entry_from_row(row).pending_view(cancelled=_terminated(conn, thread_id))


def _filter(include_silent: bool, max_depth: int | None) -> tuple[str, tuple[Any, ...]]:
    """WHERE fragments that repeat the partial index predicates literally."""
    if max_depth == 0:
        return ("depth = 0" if include_silent else "depth = 0 AND silent = 0"), ()
    silent = "" if include_silent else " AND silent = 0"
    if max_depth is None:
        return "1 = 1" + silent, ()
    return "depth <= ?" + silent, (max_depth,)


_TOP_VISIBLE_COUNT = "(SELECT top_visible_count FROM threads WHERE id = ?)"


def count_terms(
    thread_id: str, include_silent: bool, max_depth: int | None
) -> tuple[str, str, tuple[Any, ...]]:
    """The two counts a page needs, as SQL expressions of one select list: the stored
    messages and the queue entries it counts, and their parameters in order."""
    stored = "SELECT COALESCE(SUM(count), 0) FROM message_counts WHERE thread_id = ?"
    params: list[Any] = [thread_id]
    if max_depth is not None:
        stored += " AND depth <= ?"
        params.append(max_depth)
    if not include_silent:
        stored += " AND silent = 0"
    if max_depth is None or max_depth >= 0:  # the visible top-level ones: in the thread row
        stored = f"SELECT ({stored}) + COALESCE({_TOP_VISIBLE_COUNT}, 0)"
        params.append(thread_id)
    silent_q = "" if include_silent else " AND silent = 0"
    queued = f"SELECT COUNT(*) FROM message_queue WHERE thread_id = ?{silent_q}"
    return f"({stored})", f"({queued})", (*params, thread_id)


def _counts(
    conn: Conn, thread_id: str, include_silent: bool, max_depth: int | None
) -> tuple[int, int]:
    """The stored messages and the queue entries a page counts, in one statement."""
    stored, queued, params = count_terms(thread_id, include_silent, max_depth)
    row = conn.execute(f"SELECT {stored}, {queued}", params).fetchone()
    return int(row[0]), int(row[1])


def read_page(
    conn: Conn,
    thread_id: str,
    limit: int | None,
    offset: int,
    order: Order,
    include_silent: bool,
    max_depth: int | None,
) -> tuple[list[Message], int]:
    """A page of the thread's messages (queued entries as pending views) and the total."""
    return _page(
        conn, thread_id, limit, offset, order, include_silent, max_depth, message_from_row, _same
    )


def read_page_wire(
    conn: Conn,
    thread_id: str,
    limit: int | None,
    offset: int,
    order: Order,
    include_silent: bool,
    max_depth: int | None,
    counts: tuple[int, int] | None = None,
    version: str | None = None,
) -> tuple[list[dict[str, Any]], int] | None:
    """``read_page`` as wire records (``Message.to_wire``), built from the rows without the
    records in between; ``None`` when a message of the page names a subagent (its projected
    fields are the thread layer's: read it with ``read_page``). ``counts``: the page's two
    counts (``count_terms``) when this read read them already; ``version``: the thread
    row's ``Dialect.row_version`` they were read with, which the page's statements must
    see too (``ThreadChanged`` otherwise)."""
    try:
        return _page(
            conn,
            thread_id,
            limit,
            offset,
            order,
            include_silent,
            max_depth,
            message_wire_from_row,
            _pending_wire,
            counts,
            version,
        )
    except NeedsProjection:
        return None


def _same(message: Message) -> Message:
    return message


def _pending_wire(message: Message) -> dict[str, Any]:
    if message.subagent_id is not None:  # a pending view may name one (its metadata)
        raise NeedsProjection(message.subagent_id)
    return message.to_wire(copy_metadata=False)  # a pending view's metadata is its own


def _page(
    conn: Conn,
    thread_id: str,
    limit: int | None,
    offset: int,
    order: Order,
    include_silent: bool,
    max_depth: int | None,
    stored_item: Callable[[Sequence[Any]], T],
    pending_item: Callable[[Message], T],
    counts: tuple[int, int] | None = None,
    version: str | None = None,
) -> tuple[list[T], int]:
    """``version``: the thread row's ``Dialect.row_version`` the counts were read with.
    Each statement here then reads only while the row has it (no row at all otherwise),
    and a part the counts say has rows that reads none raises ``ThreadChanged``."""
    silent_q = "" if include_silent else " AND silent = 0"
    check = ""
    same: tuple[str, ...] = ()
    if version:
        check = f" AND (SELECT {conn.sql.row_version} FROM threads WHERE id = ?) = ?"
        same = (thread_id, version)
    if counts is None:
        counts = _counts(conn, thread_id, include_silent, max_depth)
    stored_total, queued_total = counts
    total = stored_total + queued_total
    window = total if limit is None else limit
    where, params = _filter(include_silent, max_depth)
    direction = "DESC" if order == "desc" else "ASC"
    # Candidates in the requested order: desc = queue (newest first) then stored;
    # asc = stored then queue. Split the [offset, offset + window) range between the two.
    first_n, first_is_queue = (queued_total, True) if order == "desc" else (stored_total, False)
    a, b = min(offset, first_n), min(offset + window, first_n)
    c, d = max(offset - first_n, 0), max(offset + window - first_n, 0)
    parts: list[tuple[bool, int, int]] = [
        (first_is_queue, a, b - a),
        (not first_is_queue, c, d - c),
    ]
    out: list[T] = []
    cancelled: bool | None = None
    for is_queue, skip, take in parts:
        if take <= 0:
            continue
        before = len(out)
        if is_queue:
            if cancelled is None:
                cancelled = _terminated(conn, thread_id, version)
            rows = conn.execute(
                f"SELECT {QUEUE_COLUMNS} FROM message_queue WHERE thread_id = ?{silent_q}{check}"
                f" ORDER BY qseq {direction} LIMIT ? OFFSET ?",
                (thread_id, *same, take, skip),
            ).fetchall()  # psycopg: every row in one call, not one each
            out.extend(
                pending_item(queue_entry_from_row(r).pending_view(cancelled=cancelled))
                for r in rows
            )
        else:
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE {THREAD_RANGE} AND {where}{check}"
                f" ORDER BY rid {direction} LIMIT ? OFFSET ?",
                (thread_id, thread_id, *params, *same, take, skip),
            ).fetchall()
            out.extend(stored_item(r) for r in rows)
        counted = queued_total if is_queue else stored_total
        if check and len(out) == before and counted > skip:  # rows were due: none came
            raise ThreadChanged(thread_id)
    return out, total


def _is_work(message: Message) -> bool:
    return message.role == "tool" or (message.role == "assistant" and bool(message.tool_calls))


def _walk(
    conn: Conn,
    thread_id: str,
    key: int,
    forward: bool,
    where: str,
    params: tuple[Any, ...],
) -> list[tuple[int, Message]]:
    """Consecutive work messages next to the one at ``key`` (its ``rid``) in the filtered
    canonical list, with their keys."""
    found: list[tuple[int, Message]] = []
    op, direction = (">", "ASC") if forward else ("<", "DESC")
    cursor = key
    while True:
        rows = conn.execute(
            f"SELECT rid, {MESSAGE_COLUMNS} FROM messages WHERE {THREAD_RANGE} AND {where}"
            f" AND rid {op} ? ORDER BY rid {direction} LIMIT 64",
            (thread_id, thread_id, *params, cursor),
        ).fetchall()
        for row in rows:
            message = message_from_row(row[1:])
            if not _is_work(message):
                return found
            found.append((row[0], message))
            cursor = row[0]
        if len(rows) < 64:
            return found


def read_by_ids(
    conn: Conn,
    thread_id: str,
    ids: Sequence[str],
    include_silent: bool,
    max_depth: int | None,
    include_workblocks: bool,
) -> list[Message]:
    where, params = _filter(include_silent, max_depth)
    stored: dict[str, tuple[int, Message]] = {}
    for chunk in _chunks(list(ids)):
        for row in conn.execute(
            f"SELECT rid, {MESSAGE_COLUMNS} FROM messages WHERE thread_id = ? AND {where}"
            f" AND id IN ({_marks(len(chunk))})",
            (thread_id, *params, *chunk),
        ):
            stored[row[1]] = (row[0], message_from_row(row[1:]))
    if include_workblocks:
        for seq, message in list(stored.values()):
            if _is_work(message):
                for forward in (False, True):
                    for s, m in _walk(conn, thread_id, seq, forward, where, params):
                        stored.setdefault(m.id, (s, m))
    out = [m for _, m in sorted(stored.values(), key=lambda item: item[0])]
    silent_q = "" if include_silent else " AND silent = 0"
    queued: list[tuple[int, Message]] = []
    cancelled = _terminated(conn, thread_id)
    for chunk in _chunks([i for i in ids if i not in stored]):
        for row in conn.execute(
            f"SELECT qseq, {QUEUE_COLUMNS} FROM message_queue WHERE thread_id = ?{silent_q}"
            f" AND id IN ({_marks(len(chunk))})",
            (thread_id, *chunk),
        ):
            queued.append((row[0], queue_entry_from_row(row[1:]).pending_view(cancelled=cancelled)))
    out.extend(m for _, m in sorted(queued, key=lambda item: item[0]))
    return out


def newest_top_level_id(conn: Conn, thread_id: str) -> str | None:
    row = conn.execute(
        f"SELECT id FROM messages WHERE {THREAD_RANGE} AND depth = 0 ORDER BY rid DESC LIMIT 1",
        (thread_id, thread_id),
    ).fetchone()
    return row[0] if row else None


def top_level_history(conn: Conn, thread_id: str) -> list[Message]:
    return [
        message_from_row(r)
        for r in conn.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE {THREAD_RANGE} AND depth = 0"
            " ORDER BY rid",
            (thread_id, thread_id),
        )
    ]
