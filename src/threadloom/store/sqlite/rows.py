"""Row ⇄ record conversion and the per-thread write transaction helper of the SQLite store."""

from __future__ import annotations

import json
import operator
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from threadloom.errors import StoreError, ThreadNotFound
from threadloom.records import (
    AttachmentRef,
    LogRow,
    Message,
    QueueEntry,
    SubagentRegistryEntry,
    ThreadStatus,
    json_compact,
)
from threadloom.store.base import Clock, StoredEvent, ThreadRow
from threadloom.stored_fields import MESSAGE_FIELDS_SET
from threadloom.unvalidated import copy_with as copy_with

MESSAGE_COLUMNS = (
    "id, role, content, name, tool_calls, tool_call_id, tool_status, status, attachments, "
    "reasoning_content, reasoning_details, prompt, created_at, parent_id, depth, silent, "
    "metadata, subagent_id, log_id"
)
QUEUE_COLUMNS = "id, role, content, attachments, silent, metadata, source, created_at"
THREAD_COLUMNS = (
    "id, agent_id, origin_agent_id, user_id, tags, parent_id, arguments, created_at_us, "
    "terminated, status_state, status_since, status_reason, stopped, overlap, event_seq, "
    "events_pruned_through, session_turns_a, session_turns_b, env_types, last_activity_us"
)
# Read-time summary columns of a thread list item (spec 08 §8.2.2): the newest visible
# top-level user text, and the time of the newest visible user or final assistant message.
KEY_SPAN = 1 << 32
"""A thread's event rows and messages are keyed ``threads.tnum * KEY_SPAN + seq``
(migrations 6 and 8): one key range per thread, in seq order."""
_OWN = f"m.rid > threads.tnum * {KEY_SPAN} AND m.rid < (threads.tnum + 1) * {KEY_SPAN}"
THREAD_SUMMARY = (
    f"(SELECT m.content FROM messages m WHERE {_OWN} AND m.depth = 0"
    " AND m.silent = 0 AND m.role = 'user' ORDER BY m.rid DESC LIMIT 1),"
    f" (SELECT m.created_at FROM messages m WHERE {_OWN} AND m.depth = 0"
    " AND m.silent = 0 AND (m.role = 'user' OR (m.role = 'assistant'"
    " AND m.status = 'completed' AND m.tool_calls IS NULL)) ORDER BY m.rid DESC LIMIT 1)"
)
_PREVIEW_LIMIT = 140
REGISTRY_COLUMNS = (
    "reference, relationship, owner, name, title, description, blocking, resumable, "
    "parent_communication, status, initial_arguments, thread_name, spawn_group_id, created_at"
)
# ``request_delta`` is a storage hint (store/sqlite/bodies.py), never a column.
LOG_FIELDS: tuple[str, ...] = tuple(f for f in LogRow.model_fields if f != "request_delta")
# The request and response bodies (often large) live in log_bodies, one row each, so
# updating a row's small columns, or adding the response, never rewrites the request; a
# request stored as a delta lives in log_requests instead (bodies.py). A short response
# body (``bodies.INLINE_RESPONSE_MAX``) lives in the row itself (``logs.response_body``,
# migration 11): each body is in one place or the other, never both; a read takes it from
# either.
BODY_FIELDS: tuple[str, ...] = ("request_body", "response_body")
ROW_FIELDS: tuple[str, ...] = tuple(f for f in LOG_FIELDS if f not in BODY_FIELDS)
LOG_COLUMNS = ", ".join(ROW_FIELDS)
LOG_SELECT = (
    ", ".join(f"l.{f}" for f in ROW_FIELDS)
    + ", rq.body, COALESCE(l.response_body, (SELECT rs.body FROM log_bodies rs"
    " WHERE rs.log_id = l.id AND rs.part = 'response')), rr.base_id IS NOT NULL"
    " FROM logs l"
    " LEFT JOIN log_bodies rq ON rq.log_id = l.id AND rq.part = 'request'"
    " LEFT JOIN log_requests rr ON rr.log_id = l.id"
)
_LOG_KEYS = (*ROW_FIELDS, *BODY_FIELDS)
_LOG_BOOL = frozenset(("is_complete", "standard_agents_router_used"))


def dump_json(value: Any) -> str | None:
    return None if value is None else json_compact(value)


def dump_attachments(attachments: Sequence[AttachmentRef] | None) -> str | None:
    return json_compact([a.to_wire() for a in attachments]) if attachments else None


def load_attachments(text: str | None) -> list[AttachmentRef] | None:
    if not text:
        return None
    return [AttachmentRef.model_construct(**item) for item in json.loads(text)]


_new_object = object.__new__
_set = object.__setattr__


def message_from_row(row: Sequence[Any]) -> Message:
    """A stored row as a Message, built without validation (the store wrote it valid).

    Equivalent to ``Message.model_construct(**every_field)`` but without its per-field
    loop, which was most of the cost of reading a page (measured: ~3× faster)."""
    message = _new_object(Message)
    _set(
        message,
        "__dict__",
        {
            "id": row[0],
            "role": row[1],
            "content": row[2],
            "name": row[3],
            "tool_calls": row[4],
            "tool_call_id": row[5],
            "tool_status": row[6],
            "status": row[7],
            "attachments": load_attachments(row[8]),
            "reasoning_content": row[9],
            "reasoning_details": row[10],
            "prompt": row[11],
            "created_at": row[12],
            "parent_id": row[13],
            "depth": row[14],
            "silent": bool(row[15]),
            "metadata": json.loads(row[16]) if row[16] else None,
            "subagent_id": row[17],
            "subagent_relationship": None,
            "subagent_name": None,
            "subagent_title": None,
            "subagent_description": None,
            "subagent_status": None,
            "subagent_blocking": None,
            "subagent_thread_name": None,
            "subagent_spawn_group_id": None,
            "log_id": row[18],
        },
    )
    _set(message, "__pydantic_fields_set__", MESSAGE_FIELDS_SET)
    _set(message, "__pydantic_extra__", None)
    _set(message, "__pydantic_private__", None)
    return message


def queue_entry_from_row(row: Sequence[Any]) -> QueueEntry:
    return QueueEntry.model_construct(
        id=row[0],
        role=row[1],
        content=row[2],
        attachments=load_attachments(row[3]),
        silent=bool(row[4]),
        metadata=json.loads(row[5]) if row[5] else None,
        source=row[6],
        created_at=row[7],
    )


def preview(text: str | None) -> str | None:
    """Whitespace runs collapsed, trimmed, cut to 140 characters (139 + …)."""
    if text is None:
        return None
    collapsed = " ".join(text.split())
    if not collapsed:
        return None
    if len(collapsed) > _PREVIEW_LIMIT:
        return collapsed[: _PREVIEW_LIMIT - 1] + "…"
    return collapsed


def thread_from_row(
    row: Sequence[Any], *, has_children: bool = False, summary: bool = False
) -> ThreadRow:
    """A ``threads`` row; ``has_children`` / ``summary`` say which extra columns follow."""
    extra = 20
    children: bool | None = None
    if has_children:
        children = bool(row[extra])
        extra += 1
    return _thread(
        row,
        terminated=row[8],
        status=ThreadStatus(state=row[9], since=row[10], reason=row[11]),
        stopped=bool(row[12]),
        event_seq=row[14],
        session=(row[16], row[17]),
        has_children=children,
        last_activity_us=row[19],
        last_message_preview=preview(row[extra]) if summary else None,
        last_message_at_us=row[extra + 1] if summary else None,
    )


def _thread(
    row: Sequence[Any],
    *,
    terminated: int | None,
    status: ThreadStatus,
    stopped: bool,
    event_seq: int,
    session: tuple[int, int],
    has_children: bool | None,
    last_activity_us: int | None,
    last_message_preview: str | None = None,
    last_message_at_us: int | None = None,
) -> ThreadRow:
    """A ``ThreadRow`` of a ``THREAD_COLUMNS`` row, with the state columns given."""
    return ThreadRow(
        id=row[0],
        agent_id=row[1],
        origin_agent_id=row[2],
        user_id=row[3],
        tags=tuple(json.loads(row[4])),
        parent_id=row[5],
        arguments=json.loads(row[6]) if row[6] else {},
        created_at_us=row[7],
        terminated=terminated,
        status=status,
        stopped=stopped,
        overlap=row[13],
        event_seq=event_seq,
        events_pruned_through=row[15],
        session_turns_a=session[0],
        session_turns_b=session[1],
        has_children=has_children,
        env_types=json.loads(row[18]) if row[18] else None,
        last_activity_us=last_activity_us,
        last_message_preview=last_message_preview,
        last_message_at_us=last_message_at_us,
    )


def registry_from_row(row: Sequence[Any]) -> SubagentRegistryEntry:
    return SubagentRegistryEntry(
        reference=row[0],
        relationship=row[1],
        owner=row[2],
        name=row[3],
        title=row[4],
        description=row[5],
        blocking=bool(row[6]),
        resumable=bool(row[7]),
        parent_communication=row[8],
        status=row[9],
        initial_arguments=json.loads(row[10]) if row[10] else None,
        thread_name=row[11],
        spawn_group_id=row[12],
        created_at=row[13],
    )


def log_from_row(row: Sequence[Any], rebuild: Callable[[str], str]) -> LogRow:
    """A LogRow from a ``SELECT {LOG_SELECT}`` row (the bodies, then whether the request
    is stored as a delta, last); ``rebuild`` gives such a request's text from the row id."""
    values = dict(zip(_LOG_KEYS, row[:-1], strict=True))
    if row[-1]:
        values["request_body"] = rebuild(values["id"])
    for key in _LOG_BOOL:
        if values[key] is not None:
            values[key] = bool(values[key])
    return LogRow.model_construct(**values)


_ROW_VALUES = operator.attrgetter(*ROW_FIELDS)


def log_values(row: LogRow) -> tuple[Any, ...]:
    """The ``logs`` table columns of a row (without the bodies), in ROW_FIELDS order."""
    values: tuple[Any, ...] = _ROW_VALUES(row)
    return values


_TX_STATE = (
    "msg_seq, clock_us, queue_seq, event_seq, log_seq, terminated, stopped, status_state,"
    " status_since, status_reason, parent_id, last_activity_us, session_turns_a, session_turns_b,"
    " tnum, top_visible_count"
)
_TX_ROW = (
    f", {THREAD_COLUMNS},"
    " EXISTS(SELECT 1 FROM subagent_registry WHERE parent_thread_id = threads.id)"
)
_TX_WAITING = ", EXISTS(SELECT 1 FROM message_queue WHERE thread_id = threads.id)"
_TX_SELECT = {
    (row, waiting): f"SELECT {_TX_STATE}{_TX_ROW if row else ''}{_TX_WAITING if waiting else ''}"
    " FROM threads WHERE id = ?"
    for row in (False, True)
    for waiting in (False, True)
}
"""The texts ``Tx`` reads a thread with, by (row, waiting): made once, so the statement
cache finds them without hashing a new string each time."""
_EVENT_INSERT = (
    "INSERT INTO thread_events(key, thread_id, seq, kind, entity_id, payload, created_at) VALUES "
)
THREAD_RANGE = (
    f"rid > (SELECT tnum FROM threads WHERE id = ?) * {KEY_SPAN}"
    f" AND rid < ((SELECT tnum FROM threads WHERE id = ?) + 1) * {KEY_SPAN}"
)
"""A WHERE fragment: the messages of one thread (bind its id twice)."""
_EVENT_ROWS_PER_INSERT = 500


class Tx:
    """One write transaction on one thread: loads the thread's counters and state once,
    hands out sequence numbers, clock stamps and event numbers, and writes them back in
    ``flush`` with one ``UPDATE`` of the thread row (the counters and the visible
    top-level count, and the status, the activity time and the session counters when
    they changed) and one ``INSERT`` of the event rows.

    ``row=True`` also loads the whole thread row (``thread_row``); ``waiting=True``
    whether the thread's queue holds an entry (``waiting``)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        thread_id: str,
        clock: Clock,
        *,
        row: bool = False,
        waiting: bool = False,
    ) -> None:
        found = conn.execute(_TX_SELECT[row, waiting], (thread_id,)).fetchone()
        if found is None:
            raise ThreadNotFound(thread_id)
        self.conn = conn
        self.thread_id = thread_id
        self.clock = clock
        self.msg_seq, self.clock_us, self.queue_seq, self.event_seq, self.log_seq = found[:5]
        self.terminated: int | None = found[5]
        self.stopped = bool(found[6])
        self.status_state: str = found[7]
        self.status_since: int = found[8]
        self.status: ThreadStatus | None = None
        """The status written by this transaction, if any."""
        self.parent_id: str | None = found[10]
        self.activity: int | None = found[11]
        self.session: tuple[int, int] = (found[12], found[13])
        self._loaded_activity = self.activity
        self._loaded_session = self.session
        self._touched_at: int | None = None
        self.key_base: int = found[14] * KEY_SPAN
        """The thread's first key (``tnum * KEY_SPAN``) of messages and event rows."""
        self.top_visible_count: int = found[15]
        """Visible top-level messages (migration 7); the other counts are in message_counts."""
        self._loaded_top_visible_count = self.top_visible_count
        self._row: Sequence[Any] | None = found[16:37] if row else None
        self.waiting: bool | None = bool(found[-1]) if waiting else None
        self.now = clock()
        self.events: list[StoredEvent] = []

    def renew_clock(self) -> None:
        """Read the clock again: the writes that follow are stamped as of now."""
        self.now = self.clock()

    def stamp(self) -> int:
        """The next stamp of the thread clock: ``max(now, last + 1)`` (spec 01 §1.3.3)."""
        self.clock_us = max(self.now, self.clock_us + 1)
        return int(self.clock_us)

    def next_msg_seq(self) -> int:
        self.msg_seq += 1
        if self.msg_seq >= KEY_SPAN:
            raise StoreError(f"thread {self.thread_id} has used every message number")
        return int(self.msg_seq)

    def key_range(self) -> tuple[int, int]:
        """``rid > low AND rid < high``: the thread's messages."""
        return self.key_base, self.key_base + KEY_SPAN

    def next_queue_seq(self) -> int:
        self.queue_seq += 1
        return int(self.queue_seq)

    def next_log_seq(self) -> int:
        self.log_seq += 1
        return int(self.log_seq)

    def set_status(self, status: ThreadStatus) -> None:
        """The thread's new status, written by ``flush``."""
        self.status = status
        self.status_state = status.state

    def touch(self, now: int) -> None:
        """Bump ``last_activity_us`` of the thread (and, in ``flush``, of every ancestor) to
        at least ``now`` (spec 08 §8.2.2)."""
        self.activity = max(self.activity or 0, now)
        self._touched_at = max(self._touched_at or 0, now)

    def agent_id(self) -> str:
        """The thread's agent (``row=True`` only)."""
        assert self._row is not None
        agent_id: str = self._row[1]
        return agent_id

    def thread_row(self, last_activity_us: int | None) -> ThreadRow:
        """The thread row as this transaction has changed it so far, with the activity
        time given (``row=True`` only)."""
        row = self._row
        assert row is not None
        status = self.status
        if status is None:
            status = ThreadStatus(state=row[9], since=row[10], reason=row[11])
        return _thread(
            row,
            terminated=self.terminated,
            status=status,
            stopped=self.stopped,
            event_seq=int(self.event_seq),
            session=self.session,
            has_children=bool(row[20]),
            last_activity_us=last_activity_us,
        )

    def event(
        self,
        kind: str,
        entity_id: str | None,
        payload: dict[str, Any] | None = None,
        data: dict[str, Any] | None = None,
    ) -> StoredEvent:
        """The next event of the thread (``data``: what to publish, never stored)."""
        self.event_seq += 1
        event = StoredEvent(
            self.thread_id, int(self.event_seq), kind, entity_id, payload, self.now, data
        )
        self.events.append(event)
        return event

    def flush(self) -> list[StoredEvent]:
        """Write the thread row and the event rows; returns the events in order."""
        params: list[Any] = [
            self.msg_seq,
            self.clock_us,
            self.queue_seq,
            self.event_seq,
            self.log_seq,
            int(self.stopped),
        ]
        status = self.status
        if status is not None:
            params += (status.state, status.since, status.reason)
        activity = self.activity != self._loaded_activity  # only then: the column is indexed
        if activity:
            params.append(self.activity)
        session = self.session != self._loaded_session
        if session:
            params += self.session
        top = self.top_visible_count != self._loaded_top_visible_count
        if top:
            params.append(self.top_visible_count)
        params.append(self.thread_id)
        self.conn.execute(_thread_update(status is not None, activity, session, top), params)
        if self._touched_at is not None and self.parent_id is not None:
            touch_activity(self.conn, self.parent_id, self._touched_at)
        events = self.events
        if 0 < len(events) <= _NULL_FREE_EVENTS:
            self._insert_events_null_free(events)
            return events
        for start in range(0, len(events), _EVENT_ROWS_PER_INSERT):
            chunk = events[start : start + _EVENT_ROWS_PER_INSERT]
            if chunk[-1].seq >= KEY_SPAN:
                raise StoreError(f"thread {self.thread_id} has used every event number")
            values: list[Any] = []
            for e in chunk:
                values += (self.key_base + e.seq, e.thread_id, e.seq, e.kind, e.entity_id)
                values += (dump_json(e.payload), e.created_at)
            self.conn.execute(_event_insert(len(chunk)), values)
        return events

    def _insert_events_null_free(self, events: list[StoredEvent]) -> None:
        """The few event rows of a common transaction in one INSERT whose text holds
        ``NULL`` for each ``None`` entity id and payload (``nulls.NullFree``: a bound
        ``None`` costs ``sqlite3`` its adaptation protocol); the same rows."""
        if events[-1].seq >= KEY_SPAN:
            raise StoreError(f"thread {self.thread_id} has used every event number")
        values: list[Any] = []
        pattern: list[int] = []
        for e in events:
            entity, payload = e.entity_id, dump_json(e.payload)
            values += (self.key_base + e.seq, e.thread_id, e.seq, e.kind)
            if entity is not None:
                values.append(entity)
            if payload is not None:
                values.append(payload)
            values.append(e.created_at)
            pattern.append((entity is None) + 2 * (payload is None))
        key = tuple(pattern)
        text = _NULL_FREE_EVENT_INSERTS.get(key)
        if text is None:
            text = _EVENT_INSERT + ",".join([_EVENT_ROW_TEXTS[code] for code in key])
            if len(_NULL_FREE_EVENT_INSERTS) < _NULL_FREE_TEXTS:
                _NULL_FREE_EVENT_INSERTS[key] = text
        self.conn.execute(text, values)


_THREAD_UPDATES: dict[tuple[bool, bool, bool, bool], str] = {}
_EVENT_INSERTS: dict[int, str] = {}
_NULL_FREE_EVENTS = 8
"""Up to this many events a transaction writes them with ``NULL`` in the text (a turn's
transactions write 2 or 3); more (a bulk delivery …) bind their ``None`` values."""
_NULL_FREE_TEXTS = 256
"""Texts kept by pattern of ``None`` values (a workload sees a handful); past that a
new pattern's text is made for its statement only."""
_NULL_FREE_EVENT_INSERTS: dict[tuple[int, ...], str] = {}
_EVENT_ROW_TEXTS = (
    "(?,?,?,?,?,?,?)",
    "(?,?,?,?,NULL,?,?)",
    "(?,?,?,?,?,NULL,?)",
    "(?,?,?,?,NULL,NULL,?)",
)
"""An event row's values by code: 1 when its entity id is ``None``, + 2 when its payload is."""


def _thread_update(status: bool, activity: bool, session: bool, top: bool) -> str:
    """``Tx.flush``'s UPDATE of the thread row: the counters, then the columns that
    changed. Each text is made once (the statement cache then finds it by a string whose
    hash is known)."""
    key = (status, activity, session, top)
    text = _THREAD_UPDATES.get(key)
    if text is None:
        sets = "msg_seq = ?, clock_us = ?, queue_seq = ?, event_seq = ?, log_seq = ?, stopped = ?"
        if status:
            sets += ", status_state = ?, status_since = ?, status_reason = ?"
        if activity:
            sets += ", last_activity_us = MAX(COALESCE(last_activity_us, 0), ?)"
        if session:
            sets += ", session_turns_a = ?, session_turns_b = ?"
        if top:
            sets += ", top_visible_count = ?"
        text = _THREAD_UPDATES[key] = f"UPDATE threads SET {sets} WHERE id = ?"
    return text


def _event_insert(rows: int) -> str:
    """The INSERT of ``rows`` event rows (made once per count)."""
    text = _EVENT_INSERTS.get(rows)
    if text is None:
        text = _EVENT_INSERTS[rows] = _EVENT_INSERT + ",".join(["(?,?,?,?,?,?,?)"] * rows)
    return text


def touch_activity(conn: sqlite3.Connection, thread_id: str, now: int) -> None:
    """Bump ``last_activity_us`` of the thread and every ancestor (spec 08 §8.2.2): one
    primary-key update per level (a root thread, the common case, costs one)."""
    current: str | None = thread_id
    seen: set[str] = set()
    while current is not None and current not in seen:
        seen.add(current)
        row = conn.execute(
            "UPDATE threads SET last_activity_us = MAX(COALESCE(last_activity_us, 0), ?)"
            " WHERE id = ? RETURNING parent_id",
            (now, current),
        ).fetchone()
        current = row[0] if row is not None else None


def adjust_count(tx: Tx, depth: int, silent: bool, delta: int) -> None:
    """Count a message in (or out of) its thread's counts: visible top-level messages in
    the thread row (written by ``flush``), the others in ``message_counts``."""
    if depth == 0 and not silent:
        tx.top_visible_count += delta
        return
    tx.conn.execute(
        "INSERT INTO message_counts(thread_id, depth, silent, count) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(thread_id, depth, silent) DO UPDATE SET count = count + excluded.count",
        (tx.thread_id, depth, int(silent), delta),
    )
