"""The engine's writes, on both stores: queue delivery, settlements, run state columns."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import NamedTuple

from threadloom.errors import ThreadNotFound, ThreadTerminated
from threadloom.records import (
    LogRow,
    Message,
    QueueEntry,
    StatusError,
    ThreadStatus,
    decode_tool_calls,
    new_id,
)
from threadloom.store.base import (
    Clock,
    Lease,
    ParentDelivery,
    RunBegin,
    RunEnd,
    Settled,
    Settlement,
    StoredEvent,
    ThreadRow,
    delivered_message,
)
from threadloom.store.core import approvals
from threadloom.store.core.bodies import inline_response
from threadloom.store.core.codec import (
    MESSAGE_COLUMNS,
    OF_THREAD,
    QUEUE_COLUMNS,
    ROW_FIELDS,
    dump_attachments,
    dump_json,
    message_from_row,
    queue_entry_from_row,
)
from threadloom.store.core.conn import Conn, Dialect
from threadloom.store.core.logs import insert_log_in, write_bodies
from threadloom.store.core.messages import insert_in_tx, searched_text, update_in_tx
from threadloom.store.core.null_literals import NullFree
from threadloom.store.core.queue import enqueue, enqueue_in, insert_entry
from threadloom.store.core.threads import get_thread, set_registry_status, write_status
from threadloom.store.core.tx import Tx


def _deliver_waiting(tx: Tx) -> list[tuple[Message, StoredEvent]]:
    """Every waiting entry of the thread, in queue order, delivered inside ``tx``."""
    rows = tx.conn.execute(
        f"SELECT {QUEUE_COLUMNS} FROM message_queue WHERE thread_id = ? ORDER BY qseq",
        (tx.thread_id,),
    ).fetchall()
    out: list[tuple[Message, StoredEvent]] = []
    for row in rows:
        entry = queue_entry_from_row(row)
        tx.conn.execute("DELETE FROM message_queue WHERE id = ?", (entry.id,))
        stored = insert_in_tx(tx, delivered_message(entry))
        out.append((stored, tx.event("message", stored.id)))
    return out


class _Started(NamedTuple):
    """A run the start gate let through."""

    activity: int | None
    """The thread's activity time before the start: the one its started row reports (the
    caller builds the row once the transaction's events are in: ``Tx.thread_row``)."""
    lease: Lease | None
    """The lease the run took (where threads carry leases)."""
    parked: bool
    """The status before the start was ``awaiting_approval`` (``RunBegin.parked``)."""
    resumed: bool = False
    """The run resumes a lost run (``RunBegin.resumed``, spec 16 §16.4)."""

    @property
    def holds_queue(self) -> bool:
        """The run answers open calls before it delivers the queue."""
        return self.parked or self.resumed


def _may_run_here(tx: Tx) -> bool:
    """Whether this node may take the thread's lease to run it (spec 12 §12.3.2): no live
    node holds it but maybe this one (whose own runs the engine keeps to one a thread), and
    no run lost with a dead node waits for its settlement (the sweeper's, §12.6)."""
    if tx.lease_node is None or tx.lease_node == tx.conn.node_id:
        return True
    return not tx.lease_live and tx.status_state != "running"


def _begin_in(
    tx: Tx,
    status: ThreadStatus | None,
    force: bool,
    runnable: Callable[[str], bool] | None,
) -> _Started | None:
    """The start gate's check inside ``tx`` (loaded with ``row=True``, and ``waiting=True``
    unless ``force``): when the run starts, its status is written."""
    if tx.terminated is not None:
        return None
    if not force and (tx.stopped or not tx.waiting):
        return None
    if runnable is not None and not runnable(tx.agent_id()):
        return None
    lease = None
    if tx.sql.leases:
        node_id = tx.conn.node_id
        if node_id is None or not _may_run_here(tx):
            return None
        lease = tx.acquire(node_id)
    activity = tx.activity
    parked = tx.status_reason == "awaiting_approval"
    resumed = tx.status_reason == "execution_lost" and _resume_pending(tx)
    if status is not None:
        write_status(tx, status)
    return _Started(activity, lease, parked, resumed)


def _resume_pending(tx: Tx) -> bool:
    """Whether the thread's lost run was settled to be resumed and no run started since
    (spec 16 §16.4): read only after a lost run (``execution_lost``), never on a turn."""
    found = tx.conn.execute("SELECT resumes FROM threads WHERE id = ?", (tx.thread_id,)).fetchone()
    return found is not None and int(found[0]) > 0


def pending_resumes(conn: Conn, limit: int) -> list[str]:
    """Threads whose lost run was settled to be resumed and that no run started since
    (``threads_resumes``, a partial index, finds them): ``failed``/``execution_lost``
    with resumes counted, neither stopped nor terminated, no live node holding it."""
    rows = conn.execute(
        "SELECT id FROM threads t WHERE t.resumes > 0 AND t.status_state = 'failed'"
        " AND t.status_reason = 'execution_lost' AND t.stopped = 0 AND t.terminated IS NULL"
        f" AND {conn.sql.unowned('t')} ORDER BY t.tnum LIMIT ?",
        (limit,),
    ).fetchall()
    return [str(r[0]) for r in rows]


def begin_run(
    conn: Conn,
    clock: Clock,
    thread_id: str,
    status: ThreadStatus | None,
    force: bool,
    deliver: bool,
    runnable: Callable[[str], bool] | None,
    only_parked: bool = False,
    only_resumed: bool = False,
) -> RunBegin | None:
    """The start gate's check, the ``running`` status and the first delivery, together;
    ``only_parked``: only a thread parked for approval starts (spec 14 §14.4);
    ``only_resumed``: only a thread whose lost run waits to be resumed (spec 16 §16.4)."""
    try:
        tx = Tx(conn, thread_id, clock, row=True, waiting=not force)
    except ThreadNotFound:
        return None
    if only_parked and (
        tx.status_reason != "awaiting_approval" or tx.status_state == "running" or tx.stopped
    ):
        return None
    if only_resumed and (tx.status_reason != "execution_lost" or tx.status_state == "running"):
        return None
    started = _begin_in(tx, status, force, runnable)
    if started is None or (only_resumed and not started.resumed):
        return None  # (the status is written by the commit only: nothing was)
    # a thread parked for approval, or resumed, keeps its queue: the open calls' results
    # come first
    delivered = _deliver_waiting(tx) if deliver and not started.holds_queue else []
    if not tx.events and started.lease is None:
        return RunBegin(
            tx.thread_row(started.activity),
            [],
            [],
            parked=started.parked,
            resumed=started.resumed,
        )
    events = tx.flush()
    row = tx.thread_row(started.activity)
    delivered_messages = [m for m, _ in delivered]
    return RunBegin(row, delivered_messages, events, started.lease, started.parked, started.resumed)


def enqueue_and_begin_run(
    conn: Conn,
    clock: Clock,
    thread_id: str,
    entry: QueueEntry,
    clear_stop: bool,
    status: ThreadStatus,
    runnable: Callable[[str], bool] | None,
) -> tuple[QueueEntry, StoredEvent, RunBegin | None]:
    """A send to an idle thread: the queue entry, then ``begin_run`` with delivery, in
    one ``Tx``. When the queue was empty and the run starts, the entry is delivered at
    once, never stored in the queue (same events, ids and stamps as queued then
    delivered: the entry's event, the status, the message's)."""
    tx = Tx(conn, thread_id, clock, row=True, waiting=True)
    was_waiting = tx.waiting
    stored, qseq, event = enqueue_in(tx, entry, clear_stop)
    tx.waiting = True
    tx.renew_clock()  # the run starts after the send, as when they were two writes
    mark = len(tx.events)
    started = _begin_in(tx, status, False, runnable)
    if started is None or was_waiting or started.holds_queue:
        insert_entry(tx, stored, qseq)
    if started is None:
        tx.flush()
        return stored, event, None
    if started.holds_queue:  # delivered after the open calls' results (spec 14, 16)
        delivered = []
    elif was_waiting:
        delivered = _deliver_waiting(tx)
    else:
        message = insert_in_tx(tx, delivered_message(_as_read(stored)))
        delivered = [(message, tx.event("message", message.id))]
    events = tx.flush()[mark:]
    row = tx.thread_row(started.activity)
    begun = RunBegin(
        row, [m for m, _ in delivered], events, started.lease, started.parked, started.resumed
    )
    return stored, event, begun


def _as_read(entry: QueueEntry) -> QueueEntry:
    """The entry as reading its queue row back would give it (JSON round trips). Without
    attachments and metadata that is the entry itself (the row's other columns read back
    as they were written), without the round trip and its ``model_construct``."""
    if entry.attachments is None and entry.metadata is None and type(entry.silent) is bool:
        return entry
    return queue_entry_from_row(
        (
            entry.id,
            entry.role,
            entry.content,
            dump_attachments(entry.attachments),
            int(entry.silent),
            dump_json(entry.metadata),
            entry.source,
            entry.created_at,
        )
    )


def deliver_queue(conn: Conn, clock: Clock, thread_id: str) -> list[tuple[Message, StoredEvent]]:
    tx = Tx(conn, thread_id, clock)
    if tx.terminated is not None:
        raise ThreadTerminated(thread_id, tx.terminated)
    delivered = _deliver_waiting(tx)
    if delivered:
        tx.flush()
    return delivered


def deliver_queue_entry(
    conn: Conn, clock: Clock, thread_id: str, entry_id: str, message: Message
) -> tuple[Message, StoredEvent] | None:
    tx = Tx(conn, thread_id, clock)
    if tx.terminated is not None:
        raise ThreadTerminated(thread_id, tx.terminated)
    gone = conn.execute(
        f"DELETE FROM message_queue WHERE id = ? AND {OF_THREAD}", (entry_id, thread_id)
    )
    if gone.rowcount == 0:
        return None
    stored = insert_in_tx(tx, message)
    event = tx.event("message", stored.id)
    tx.flush()
    return stored, event


def _run_start(tx: Tx, since: int) -> int:
    """The key after which a run that started at ``since`` stored its messages: the newest
    message created before it, found scanning back from the newest (a thread's
    ``created_at`` rises with its keys, spec 01 §1.3), so a settlement reads the run's
    messages, not the thread's history."""
    low, high = tx.key_range()
    row = tx.conn.execute(
        "SELECT rid FROM messages WHERE rid > ? AND rid < ? AND created_at < ?"
        " ORDER BY rid DESC LIMIT 1",
        (low, high, since),
    ).fetchone()
    return int(row[0]) if row is not None else low


def _fail_pending(tx: Tx, settlement: Settlement, start: int) -> None:
    # only model messages are stored pending (spec 01 §1.4.5 rule 10), only by a run, and
    # every run ends by finalising or failing them: those of the thread are this run's
    pending = tx.conn.execute(
        "SELECT id, role, depth, silent FROM messages"
        " WHERE rid > ? AND rid < ? AND status = 'pending' ORDER BY rid",
        (start, tx.key_range()[1]),
    ).fetchall()
    vector = tx.sql.search_vector
    # the partial text is the message's text now, its search vector with it where the
    # store writes that (spec 08 §8.14.1 rule 1)
    search = f", search = {vector}" if vector else ""
    for mid, role, depth, silent in pending:
        text = settlement.partial_text.get(mid) or None
        values = (text, searched_text(role, depth, silent, text)) if vector else (text,)
        tx.conn.execute(
            f"UPDATE messages SET status = 'failed', content = ?{search} WHERE id = ?",
            (*values, mid),
        )
        tx.event("message", mid)


def _complete_logs(tx: Tx, settlement: Settlement) -> None:
    rows = tx.conn.execute(
        "SELECT id FROM logs WHERE thread_id = ? AND is_complete = 0 ORDER BY created_at, lseq",
        (tx.thread_id,),
    ).fetchall()
    for (lid,) in rows:
        tx.conn.execute(
            "UPDATE logs SET is_complete = 1, error = ?, error_type = ?, error_origin = 'runtime'"
            " WHERE id = ?",
            (settlement.log_error, settlement.log_error_type, lid),
        )
        tx.event("log", lid)


def _answer_open_calls(
    tx: Tx, settlement: Settlement, since: int, start: int, nested_only: bool = False
) -> None:
    """Answer the run's unanswered tool calls with ``settlement.tool_result_text``;
    ``nested_only``: only those of nested prompts (a resumed run answers the top-level
    ones, spec 16 §16.3)."""
    rows = tx.conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE rid > ? AND rid < ?"
        " AND tool_calls IS NOT NULL AND created_at >= ?"
        f"{' AND depth > 0' if nested_only else ''} ORDER BY rid",
        (start, tx.key_range()[1], since),
    ).fetchall()
    for row in rows:
        message = message_from_row(row)
        for call in decode_tool_calls(message.tool_calls or "[]"):
            answered = tx.conn.execute(
                "SELECT 1 FROM messages WHERE thread_id = ? AND tool_call_id IS NOT NULL"
                " AND tool_call_id = ?",
                (tx.thread_id, call.id),
            ).fetchone()
            if answered:
                continue
            result = insert_in_tx(
                tx,
                Message(
                    id=new_id(),
                    role="tool",
                    content=settlement.tool_result_text,
                    name=call.function.name,
                    tool_call_id=call.id,
                    tool_status="error",
                    depth=message.depth,
                    parent_id=message.parent_id,
                    prompt=message.prompt,
                ),
            )
            tx.event("message", result.id)


def settle_run(
    conn: Conn, clock: Clock, thread_id: str, settlement: Settlement
) -> list[StoredEvent]:
    return _settle(conn, clock, thread_id, settlement).events


def settle_resumable(conn: Conn, clock: Clock, thread_id: str, settlement: Settlement) -> Settled:
    """``settle_run`` with the resume rules of spec 16 §16.3 (``settlement.resume_limit``)."""
    return _settle(conn, clock, thread_id, settlement)


def clear_resumes(conn: Conn, clock: Clock, thread_id: str) -> None:
    conn.execute("UPDATE threads SET resumes = 0 WHERE id = ? AND resumes <> 0", (thread_id,))


def _resume_count(tx: Tx, settlement: Settlement) -> tuple[int, StatusError | None]:
    """Inside a settlement: the number of the resume this lost run gets (0: none), and
    the status error of a run settled for good because the resumes ran out. Writes the
    thread's new count."""
    limit = settlement.resume_limit
    if limit is None:
        return 0, None
    found = tx.conn.execute("SELECT resumes FROM threads WHERE id = ?", (tx.thread_id,)).fetchone()
    done = int(found[0]) if found is not None else 0
    if tx.stopped or tx.terminated is not None:
        resume, error = 0, None
    elif done < limit:
        resume, error = done + 1, None
    else:
        resume = 0
        error = StatusError(
            type="ResumesExhausted",
            message=f"The run was lost again after {done} resumes in a row"
            f" (max_resumes {limit}): it is not resumed",
        )
    if resume != done:
        tx.conn.execute("UPDATE threads SET resumes = ? WHERE id = ?", (resume, tx.thread_id))
    return resume, error


def _settle(conn: Conn, clock: Clock, thread_id: str, settlement: Settlement) -> Settled:
    tx = Tx(conn, thread_id, clock)
    if settlement.only_if_running and tx.status_state != "running":
        return Settled([])
    if settlement.take_over and tx.sql.leases:  # a lost run: only if no live node runs it
        node_id = tx.conn.node_id
        if node_id is None or (tx.lease_live and tx.lease_node != node_id):
            return Settled([])
        tx.acquire(node_id)
    if settlement.skip_events and tx.sql.lost_tails:
        tx.event_seq += settlement.skip_events
        conn.execute(
            "UPDATE threads SET events_pruned_through = ? WHERE id = ?", (tx.event_seq, thread_id)
        )
    resume, exhausted = _resume_count(tx, settlement)
    since = int(tx.status_since if settlement.since is None else settlement.since)
    start = _run_start(tx, since)
    _fail_pending(tx, settlement, start)
    if settlement.logs_first:
        _complete_logs(tx, settlement)
        _answer_open_calls(tx, settlement, since, start, nested_only=resume > 0)
    else:
        _answer_open_calls(tx, settlement, since, start, nested_only=resume > 0)
        _complete_logs(tx, settlement)
    if not resume:  # a resumed run takes its approvals and started calls as they are
        approvals.close_in(
            tx,
            cancel=settlement.reason is not None,
            reason=settlement.reason or "interrupted",
            lost_text=settlement.tool_result_text,
        )
    if settlement.note is not None:
        metadata = {"status_kind": settlement.note_status_kind}
        note = insert_in_tx(
            tx,
            Message(
                id=new_id(),
                role="system",
                content=settlement.note,
                metadata=metadata if settlement.note_status_kind else None,
            ),
        )
        tx.event("message", note.id)
    if settlement.reason is not None:
        error = exhausted or settlement.error
        write_status(tx, ThreadStatus.settled(settlement.reason, tx.now, error))
        tx.release()  # an interrupted run (no reason) is started again by the same node
    events = tx.flush()
    if settlement.delivery is not None and not resume:  # a resumed child's session goes on
        events += deliver_to_parent(conn, clock, settlement.delivery)
    return Settled(events, resume)


def deliver_to_parent(conn: Conn, clock: Clock, delivery: ParentDelivery) -> list[StoredEvent]:
    """The parent's side of a session result (spec 06 §6.8.3), inside the caller's
    transaction: the registry status, then the queue entry unless the parent is
    terminated; nothing when the parent is gone."""
    row = conn.execute(
        "SELECT terminated FROM threads WHERE id = ?", (delivery.parent_id,)
    ).fetchone()
    if row is None:
        return []
    events: list[StoredEvent] = []
    event = set_registry_status(
        conn, clock, delivery.parent_id, delivery.reference, delivery.status
    )
    if event is not None:
        events.append(event)
    if delivery.entry is not None and row[0] is None:
        events.append(enqueue(conn, clock, delivery.parent_id, delivery.entry, False)[1])
    return events


def set_stopped(conn: Conn, clock: Clock, thread_id: str, stopped: bool) -> None:
    tx = Tx(conn, thread_id, clock)
    tx.stopped = stopped
    tx.flush()


def set_session_turns(conn: Conn, clock: Clock, thread_id: str, side_a: int, side_b: int) -> None:
    """A dual_ai run's turn counters, written at each turn: a ``Tx`` (fenced: a run's
    write, checked against its lease, its state kept for its next write)."""
    tx = Tx(conn, thread_id, clock)
    tx.session = (side_a, side_b)
    tx.flush()


def set_agent(conn: Conn, clock: Clock, thread_id: str, agent_id: str) -> ThreadRow:
    cur = conn.execute("UPDATE threads SET agent_id = ? WHERE id = ?", (agent_id, thread_id))
    if cur.rowcount == 0:
        raise ThreadNotFound(thread_id)
    row = get_thread(conn, thread_id)
    assert row is not None
    return row


_LOG_SET = tuple(c for c in ROW_FIELDS if c not in ("id", "created_at"))
# The columns of _LOG_SET that an index holds: written only when their value changes, so
# an update leaves those indexes alone. The others are written by every update.
_LOG_INDEXED = ("kind", "message_id", "parent_log_id", "retry_of_log_id")
_LOG_PLAIN = tuple(c for c in _LOG_SET if c not in _LOG_INDEXED)
_PLAIN_VALUES = operator.attrgetter(*_LOG_PLAIN)
_INDEXED_VALUES = operator.attrgetter(*_LOG_INDEXED)


def _log_updates(sql: Dialect, sets: tuple[str, ...]) -> tuple[NullFree, NullFree]:
    """The row update that returns the indexed columns, and the one matched on them."""
    assignments = ", ".join(f"{c} = ?" for c in sets)
    return (
        NullFree(
            f"UPDATE logs SET {assignments}"
            f" WHERE id = ? AND {OF_THREAD} RETURNING {', '.join(_LOG_INDEXED)}"
        ),
        NullFree(
            f"UPDATE logs SET {assignments} WHERE id = ? AND {OF_THREAD}"
            f" AND {' AND '.join(f'{c} {sql.is_same} ?' for c in _LOG_INDEXED)}"
        ),
    )


class _LogUpdates(NamedTuple):
    """A dialect's log row updates (``_log_updates``)."""

    plain: tuple[NullFree, NullFree]
    """The second is the common update: the indexed columns keep their values. No
    ``RETURNING`` (which costs as much as a second statement): the row is matched on them."""
    response: tuple[NullFree, NullFree]
    """The same with the response body's column (``bodies.inline_response``), for an
    update that writes the response."""


def _log_statements(sql: Dialect) -> _LogUpdates:
    return _LogUpdates(
        _log_updates(sql, _LOG_PLAIN), _log_updates(sql, (*_LOG_PLAIN, "response_body"))
    )


def _update_log_in(tx: Tx, row: LogRow, bodies: tuple[str, ...]) -> StoredEvent:
    """Replace the row's columns in one statement (with ``logs.response_body`` when
    ``bodies`` names the response). When the indexed columns keep their stored values (the
    row matches them), that is all; otherwise a statement that returns their stored
    values, and those that change are written (a third statement), so an update leaves the
    indexes of the columns it does not change alone."""
    plain: tuple[object, ...] = _PLAIN_VALUES(row)
    statements = tx.sql.statements(_log_statements)
    if "response" in bodies:
        plain += (inline_response(row),)
        update, update_same = statements.response
    else:
        update, update_same = statements.plain
    if tx.from_kept:  # the common update, checked by the backend: no round trip here
        tx.conn.defer_expect(
            *update_same.bind((*plain, row.id, tx.thread_id, *_INDEXED_VALUES(row))), 1
        )
        write_bodies(tx.conn, row, insert=False, parts=bodies)
        return tx.event("log", row.id)
    same = tx.conn.execute(*update_same.bind((*plain, row.id, tx.thread_id, *_INDEXED_VALUES(row))))
    if same.rowcount == 1:
        write_bodies(tx.conn, row, insert=False, parts=bodies)
        return tx.event("log", row.id)
    current = tx.conn.execute(*update.bind((*plain, row.id, tx.thread_id))).fetchall()
    if not current:
        raise LookupError(f"log row {row.id} not found in thread {tx.thread_id}")
    changed = [
        (c, new)
        for c, new, old in zip(_LOG_INDEXED, _INDEXED_VALUES(row), current[0], strict=True)
        if new != old
    ]
    if changed:
        # a message deleted while the row was out (ON DELETE SET NULL cleared it) stays
        # unnamed: the row keeps NULL instead of naming a message that is gone (spec 02 §2.8)
        sets = ", ".join(
            "message_id = (SELECT id FROM messages WHERE id = ?)"
            if c == "message_id" and new is not None
            else f"{c} = ?"
            for c, new in changed
        )
        tx.conn.execute(f"UPDATE logs SET {sets} WHERE id = ?", (*(v for _, v in changed), row.id))
    write_bodies(tx.conn, row, insert=False, parts=bodies)
    return tx.event("log", row.id)


def update_log(
    conn: Conn,
    clock: Clock,
    thread_id: str,
    row: LogRow,
    bodies: tuple[str, ...] = ("request", "response"),
) -> StoredEvent:
    tx = Tx(conn, thread_id, clock)
    event = _update_log_in(tx, row, bodies)
    tx.flush()
    return event


def _end_in(tx: Tx, end: RunEnd) -> bool:
    """The end-of-run check inside ``tx`` (loaded with ``waiting=True``, and nothing
    queued since); ``True`` when the status settled."""
    tx.session = (end.session[0], end.session[1])
    waiting = tx.waiting
    settled = not (end.allow_continue and waiting and not tx.stopped and tx.terminated is None)
    if settled:
        write_status(tx, ThreadStatus.settled(end.reason, tx.now, end.error))
        tx.release()
    return settled


def end_run(
    conn: Conn,
    clock: Clock,
    thread_id: str,
    reason: str,
    session: tuple[int, int],
    allow_continue: bool,
    delivery: ParentDelivery | None = None,
    error: StatusError | None = None,
) -> tuple[bool, list[StoredEvent]]:
    """The end-of-run check in one transaction (spec 04 §4.7.3): persist the session
    counters and commit the delivery; when entries wait and the thread is neither stopped
    nor terminated, leave the status ``running`` and return ``False`` (the caller runs
    again); otherwise settle it and return ``True``."""
    tx = Tx(conn, thread_id, clock, waiting=True)
    settled = _end_in(tx, RunEnd(reason, session, allow_continue, error))
    events: list[StoredEvent] = tx.flush()  # none unless settled
    if delivery is not None:
        events += deliver_to_parent(conn, clock, delivery)
    return settled, events


def update_message_and_log(
    conn: Conn,
    clock: Clock,
    thread_id: str,
    message: Message,
    log: LogRow,
    bodies: tuple[str, ...],
) -> tuple[Message, list[StoredEvent]]:
    tx = Tx(conn, thread_id, clock)
    log_event = _update_log_in(tx, log, bodies)
    stored = update_in_tx(tx, message)
    message_event = tx.event("message", stored.id)
    tx.flush()
    return stored, [log_event, message_event]


def finish_run(
    conn: Conn,
    clock: Clock,
    thread_id: str,
    message: Message,
    log: LogRow,
    end: RunEnd,
    new: bool = False,
) -> tuple[Message, LogRow, bool, list[StoredEvent]]:
    """The last model message of a run finalised with its LLM row (inserted, ``new``),
    and the end-of-run check, in one transaction."""
    tx = Tx(conn, thread_id, clock, waiting=True)
    if new:
        stored, log = _insert_with_log(tx, message, log)[:2]
    else:
        _update_log_in(tx, log, ("response",))
        stored = update_in_tx(tx, message)
        tx.event("message", stored.id)
    settled = _end_in(tx, end)
    return stored, log, settled, tx.flush()


def insert_message_and_log(
    conn: Conn,
    clock: Clock,
    thread_id: str,
    message: Message,
    log: LogRow,
    require_live: bool,
    new_log: bool,
) -> tuple[Message, LogRow, list[StoredEvent]]:
    tx = Tx(conn, thread_id, clock)
    if require_live and tx.terminated is not None:
        raise ThreadTerminated(thread_id, tx.terminated)
    if new_log:
        stored, row, message_event, log_event = _insert_with_log(tx, message, log)
    else:
        stored = insert_in_tx(tx, message)
        message_event = tx.event("message", stored.id)
        row, log_event = log, _update_log_in(tx, log, ())
    tx.flush()
    return stored, row, [message_event, log_event]


def _insert_with_log(
    tx: Tx, message: Message, log: LogRow
) -> tuple[Message, LogRow, StoredEvent, StoredEvent]:
    """Insert a message and a new log row: the stored pair and their events."""
    stored = insert_in_tx(tx, message)
    message_event = tx.event("message", stored.id)
    tx.renew_clock()  # the row's created_at: read after the message's stamp
    row, log_event = insert_log_in(tx, log, False)
    return stored, row, message_event, log_event


def cancel_approvals(
    conn: Conn,
    clock: Clock,
    thread_id: str,
    reason: str,
    status: ThreadStatus | None,
) -> list[StoredEvent]:
    """Stop of a thread with no active run (spec 14 §14.5): its approvals that could still
    run are cancelled and their calls answered, and — when any was and no run is running —
    ``status`` is written, in one transaction."""
    tx = Tx(conn, thread_id, clock)
    cancelled = approvals.cancel_and_answer_in(tx, reason)
    if status is not None and cancelled and tx.status_state != "running":
        write_status(tx, status)
    return tx.flush()
