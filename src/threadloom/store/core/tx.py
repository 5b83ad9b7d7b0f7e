"""The per-thread write transaction of the store (``Tx``) and the row helpers around it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.errors import LeaseLost, StoreError, ThreadNotFound
from threadloom.records import ThreadStatus
from threadloom.store.core.codec import (
    KEY_SPAN,
    THREAD_COLUMN_COUNT,
    THREAD_COLUMNS,
    dump_json,
    dump_status_error,
    status_from_row,
    thread_with_state,
)
from threadloom.store.core.conn import ELSEWHERE, WATCHED, Conn, Dialect
from threadloom.store.shapes import Clock, Lease, StoredEvent, ThreadRow

STATE_COLUMNS = (
    "msg_seq, clock_us, queue_seq, event_seq, log_seq, terminated, stopped, status_state,"
    " status_since, status_reason, parent_id, last_activity_us, session_turns_a, session_turns_b,"
    " tnum, top_visible_count"
)
KEPT_ACTIVITY = 11
"""Where a kept state (``Tx._keep_state``, ``Conn.kept_state``) holds ``last_activity_us``
(its first 16 entries are ``STATE_COLUMNS``)."""
KEPT_LEASE = 16
"""… the lease's node, token and liveness (three entries),"""
KEPT_QUEUE_EMPTY = 19
"""… whether the thread's queue is known to be empty,"""
KEPT_REQUEST_BASE = 20
"""… and the last request row (``Tx.request_base``)."""

_TX_ROW = (
    f", {THREAD_COLUMNS},"
    " EXISTS(SELECT 1 FROM subagent_registry WHERE parent_thread_id = threads.id)"
)
_TX_WAITING = ", EXISTS(SELECT 1 FROM message_queue WHERE thread_id = threads.id)"


def _tx_selects(sql: Dialect) -> dict[tuple[bool, bool, bool], str]:
    """The texts ``Tx`` reads (and, where the backend needs it, locks) a thread with, by
    (row, waiting, fenced): made once per dialect, so the statement cache finds them
    without hashing a new string each time."""
    return {
        (row, waiting, fenced): f"SELECT {STATE_COLUMNS}{_TX_ROW if row else ''}"
        f"{_TX_WAITING if waiting else ''}{sql.lease_columns}{sql.tx_versions} FROM threads"
        f" WHERE id = ?{sql.fenced if fenced else ''}{sql.lock_thread}"
        for row in (False, True)
        for waiting in (False, True)
        for fenced in (False, True)
    }


_EVENT_INSERT = (
    "INSERT INTO thread_events(key, thread_id, seq, kind, entity_id, payload, created_at) VALUES "
)
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
        conn: Conn,
        thread_id: str,
        clock: Clock,
        *,
        row: bool = False,
        waiting: bool = False,
    ) -> None:
        sql = conn.sql
        fence = conn.fence if sql.leases else None
        self.fenced = fence is not None and fence.thread_id == thread_id
        """An execution's own write: checked against its lease, and its state kept."""
        kept = None
        if fence is not None and self.fenced:
            # where the backend kept the row as this execution's last write left it, that,
            # checked by the backend's first statement (PostgreSQL: no round trip to read)
            kept = None if row else conn.kept_state(thread_id, waiting)
            if kept is None:
                lease = fence.lease
                text = sql.statements(_tx_selects)[row, waiting, True]
                found = conn.execute(text, (thread_id, lease.node_id, lease.token)).fetchone()
                if found is None:
                    if conn.execute("SELECT 1 FROM threads WHERE id = ?", (thread_id,)).fetchone():
                        raise LeaseLost(thread_id)
                    raise ThreadNotFound(thread_id)
            else:
                found = kept
        else:
            text = sql.statements(_tx_selects)[row, waiting, False]
            found = conn.execute(text, (thread_id,)).fetchone()
            if found is None:
                raise ThreadNotFound(thread_id)
        self.xid: str | None = None
        """This transaction's id, where the read answered it (``Dialect.tx_versions``)."""
        request_base = None
        if kept is None and sql.tx_versions:  # the row's version, then the reader's id
            version, self.xid = found[-2:]
            found = found[:-2]
            request_base = conn.kept_base(thread_id, version)
        self.conn = conn
        self.sql = sql
        self.from_kept = kept is not None
        """Started from a kept state (``Conn.kept_state``): a count the logic would check
        can be left to the backend instead (``Conn.defer_expect``)."""
        self.thread_id = thread_id
        self.clock = clock
        self.msg_seq, self.clock_us, self.queue_seq, self.event_seq, self.log_seq = found[:5]
        self.terminated: int | None = found[5]
        self.stopped = bool(found[6])
        self.status_state: str = found[7]
        self.status_since: int = found[8]
        self.status_reason: str | None = found[9]
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
        self._row: Sequence[Any] | None = found[16 : 17 + THREAD_COLUMN_COUNT] if row else None
        self.waiting: bool | None = None
        if kept is not None:
            self.waiting = False if waiting else None  # kept_state: known empty if asked
            self.queue_empty = bool(kept[KEPT_QUEUE_EMPTY])
        else:
            if waiting:
                self.waiting = bool(found[-4 if sql.leases else -1])
            self.queue_empty = self.waiting is False
        """Whether the thread's queue is known to be empty: it was when loaded, and this
        transaction queued nothing (``insert_entry``). Kept with the state (``Conn
        .keep_state``), it spares the next end-of-run check its read."""
        self.request_base: tuple[Any, ...] | None = (
            kept[KEPT_REQUEST_BASE] if kept else request_base
        )
        """The request row (``log_requests``: its id, base, depth, keep, count, size, suffix
        hash) the thread's last LLM row wrote, where known: kept with the state, it spares
        the next LLM row the read of its base (``bodies._insert_request``)."""
        self.now = clock()
        self.events: list[StoredEvent] = []
        self.wake = False
        """Whether this transaction queued work for the thread (other nodes are told)."""
        self.lease_node: str | None = None
        """The node whose execution holds the thread (where ``sql.leases``)."""
        self.lease_token = 0
        self.lease_live = False
        """Whether ``lease_node`` is live (its heartbeat within the TTL)."""
        self._lease_changed = False
        if sql.leases:
            lease_at = found[KEPT_LEASE : KEPT_LEASE + 3] if kept else found[-3:]
            self.lease_node, self.lease_token, live = lease_at
            self.lease_live = bool(live)

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

    def acquire(self, node_id: str) -> Lease:
        """Take the thread's lease for ``node_id`` with a new fencing token (spec 12
        §12.3.2; the caller checked that no other live node holds it)."""
        self.lease_node, self.lease_token = node_id, self.lease_token + 1
        self.lease_live = True
        self._lease_changed = True
        return Lease(node_id, int(self.lease_token))

    def release(self) -> None:
        """Give the thread's lease up (spec 12 §12.3.4); the token is kept."""
        if self.lease_node is not None:
            self.lease_node = None
            self._lease_changed = True

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
            status = status_from_row(row)
        return thread_with_state(
            row,
            terminated=self.terminated,
            status=status,
            stopped=self.stopped,
            event_seq=int(self.event_seq),
            session=self.session,
            has_children=bool(row[THREAD_COLUMN_COUNT]),
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
        status_key = 0
        if status is not None:
            params += (status.state, status.since, status.reason)
            status_key = 1
            if status.error is not None:  # else NULL in the text: no bound None
                params.append(dump_status_error(status.error))
                status_key = 2
        activity = self.activity != self._loaded_activity  # only then: the column is indexed
        if activity:
            params.append(self.activity)
        session = self.session != self._loaded_session
        if session:
            params += self.session
        top = self.top_visible_count != self._loaded_top_visible_count
        if top:
            params.append(self.top_visible_count)
        lease = self._lease_changed
        if lease:
            params += (self.lease_node, self.lease_token)
        params.append(self.thread_id)
        events = self.events
        conn = self.conn
        announce = conn.announce
        notify = 0
        if announce and events:  # told to the nodes that watch, or to the one that runs it
            notify = WATCHED if conn.watched(self.thread_id, events) else ELSEWHERE
            if notify == ELSEWHERE:
                params.append(conn.node_id)
            params.append(events_notice(self.thread_id, events, conn))
        wake = announce and self.wake
        if wake:  # to the node that runs it (the sweep is the safety net)
            params += (conn.node_id, wake_notice(self.thread_id, conn))
        key = (status_key, activity, session, top, lease, notify, wake)
        self.conn.defer(_thread_update(self.sql, key), params)
        if self.fenced or lease:  # an execution's write, or the start that took the lease
            self._keep_state()
        elif self.sql.tx_versions:  # written here: a state kept of it is out of date
            self.conn.keep_state(self.thread_id, None, None)
        if self._touched_at is not None and self.parent_id is not None:
            touch_activity(self.conn, self.parent_id, self._touched_at)
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
            self.conn.defer(_event_insert(len(chunk)), values)
        return events

    def _keep_state(self) -> None:
        """The row as ``flush`` leaves it, in the layout of the read (``STATE_COLUMNS``, the
        lease's), whether the queue is known empty and the last request row, for the
        backend to keep (``Conn.keep_state``): the run's next write starts from it while
        the lease in it is the run's; after the lease is released, the next run's start
        takes the request row from it while the row is unchanged (``Conn.kept_base``)."""
        status = self.status
        self.conn.keep_state(
            self.thread_id,
            (
                self.msg_seq,
                self.clock_us,
                self.queue_seq,
                self.event_seq,
                self.log_seq,
                self.terminated,
                int(self.stopped),
                self.status_state,
                self.status_since if status is None else status.since,
                self.status_reason if status is None else status.reason,
                self.parent_id,
                self.activity,
                *self.session,
                self.key_base // KEY_SPAN,
                self.top_visible_count,
                self.lease_node,
                self.lease_token,
                True,  # this node's own lease: live while it writes
                self.queue_empty,
                self.request_base,
            ),
            self.xid,
        )

    def _insert_events_null_free(self, events: list[StoredEvent]) -> None:
        """The few event rows of a common transaction in one INSERT whose text holds
        ``NULL`` for each ``None`` entity id and payload (``null_literals.NullFree``: a bound
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
        self.conn.defer(text, values)


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


def _thread_updates(sql: Dialect) -> dict[tuple[int, ...], str]:
    """The texts of ``_thread_update`` of a dialect, filled as they are first made."""
    return {}


def events_notice(thread_id: str, events: Sequence[StoredEvent], conn: Conn) -> str:
    """The payload of the notification that a transaction wrote the thread's event rows
    ``events`` (spec 12 §12.7.1): the thread, the first and last ``seq``, the writing node,
    and ``"a"`` when one is a status change: the last one's status and termination as
    committed (``1`` when the event does not carry them), which thread-list subscribers
    elsewhere show as ``thread_activity`` (spec 12 §12.7.5) without reading the row."""
    activity = ""
    for event in reversed(events):
        if event.kind == "status":  # the last one, as it was committed, when it is known
            data = event.data
            if data:
                shown = {"status": data.get("status"), "terminated": data.get("terminated")}
                activity = f',"a":{dump_json(shown)}'
            else:
                activity = ',"a":1'
            break
    first, last = events[0].seq, events[-1].seq
    return f'{{"t":"{thread_id}","f":{first},"s":{last},"n":"{conn.node_id}"{activity}}}'


def wake_notice(thread_id: str, conn: Conn) -> str:
    """The payload of the notification that a transaction queued work for the thread
    (spec 12 §12.4 rule 1)."""
    return f'{{"t":"{thread_id}","n":"{conn.node_id}"}}'


def _thread_update(sql: Dialect, key: tuple[int, bool, bool, bool, bool, int, bool]) -> str:
    """``Tx.flush``'s UPDATE of the thread row: the counters, then the columns that
    changed (``key``: status — 1 without an error, 2 with one —, activity, session
    counters, top-level count, lease), and the notifications of its events (``notify``:
    0, ``ELSEWHERE`` or ``WATCHED``) and of new work (``wake``). Each text is made once
    (the statement cache then finds it by a string whose hash is known)."""
    texts = sql.statements(_thread_updates)
    text = texts.get(key)
    if text is None:
        status, activity, session, top, lease, notify, wake = key
        sets = "msg_seq = ?, clock_us = ?, queue_seq = ?, event_seq = ?, log_seq = ?, stopped = ?"
        if status:
            sets += ", status_state = ?, status_since = ?, status_reason = ?"
            sets += ", status_error = ?" if status == 2 else ", status_error = NULL"
        if activity:
            sets += f", last_activity_us = {sql.greatest}(COALESCE(last_activity_us, 0), ?)"
        if session:
            sets += ", session_turns_a = ?, session_turns_b = ?"
        if top:
            sets += ", top_visible_count = ?"
        if lease:
            sets += ", lease_node = ?, lease_token = ?, lease_acquired_at = now()"
        tail = sql.notify_tail(notify, wake) if notify or wake else ""
        text = texts[key] = f"UPDATE threads SET {sets} WHERE id = ?{tail}"
    return text


def _event_insert(rows: int) -> str:
    """The INSERT of ``rows`` event rows (made once per count)."""
    text = _EVENT_INSERTS.get(rows)
    if text is None:
        text = _EVENT_INSERTS[rows] = _EVENT_INSERT + ",".join(["(?,?,?,?,?,?,?)"] * rows)
    return text


def _touch_text(sql: Dialect) -> str:
    return (
        f"UPDATE threads SET last_activity_us = {sql.greatest}(COALESCE(last_activity_us, 0), ?)"
        " WHERE id = ? RETURNING parent_id"
    )


def _touch_read(sql: Dialect) -> str:
    return f"SELECT parent_id, {sql.row_version} FROM threads WHERE id = ?{sql.lock_thread}"


def _touch_write(sql: Dialect) -> str:
    return (
        f"UPDATE threads SET last_activity_us = {sql.greatest}(COALESCE(last_activity_us, 0), ?)"
        " WHERE id = ?"
    )


def touch_activity(conn: Conn, thread_id: str, now: int) -> None:
    """Bump ``last_activity_us`` of the thread and every ancestor (spec 08 §8.2.2): one
    primary-key update per level (a root thread, the common case, costs one). Where rows
    carry a version (``Dialect.row_version``) each level is read, locked, first: the
    version it had goes to ``Conn.touched``, so a state kept of it (a parent's run on this
    node) stays usable after its child's write."""
    sql = conn.sql
    versioned = bool(sql.row_version)
    text = sql.statements(_touch_read if versioned else _touch_text)
    current: str | None = thread_id
    seen: set[str] = set()
    while current is not None and current not in seen:
        seen.add(current)
        if versioned:
            row = conn.execute(text, (current,)).fetchone()
            if row is not None:
                conn.defer(sql.statements(_touch_write), (now, current))
                conn.touched(current, row[1], now)
        else:
            row = conn.execute(text, (now, current)).fetchone()
        current = row[0] if row is not None else None


def adjust_count(tx: Tx, depth: int, silent: bool, delta: int) -> None:
    """Count a message in (or out of) its thread's counts: visible top-level messages in
    the thread row (written by ``flush``), the others in ``message_counts``."""
    if depth == 0 and not silent:
        tx.top_visible_count += delta
        return
    tx.conn.defer(
        "INSERT INTO message_counts(thread_id, depth, silent, count) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(thread_id, depth, silent)"
        " DO UPDATE SET count = message_counts.count + excluded.count",
        (tx.thread_id, depth, int(silent), delta),
    )
