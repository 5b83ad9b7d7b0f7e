"""Row ⇄ record conversion of the store: the column lists, and each table's rows as records."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from pydantic_core import from_json

from threadloom.records import (
    MESSAGE_FIELDS_SET,
    AttachmentRef,
    LogRow,
    Message,
    QueueEntry,
    StatusError,
    SubagentRegistryEntry,
    ThreadBudget,
    ThreadStatus,
    blank,
    json_compact,
)
from threadloom.records import copy_with as copy_with
from threadloom.store.shapes import ThreadRow

MESSAGE_COLUMNS = (
    "id, role, content, name, tool_calls, tool_call_id, tool_status, status, attachments, "
    "reasoning_content, reasoning_details, prompt, created_at, parent_id, depth, silent, "
    "metadata, subagent_id, log_id"
)
QUEUE_COLUMNS = "id, role, content, attachments, silent, metadata, source, created_at"
THREAD_COLUMNS = (
    "id, agent_id, origin_agent_id, user_id, tags, parent_id, arguments, created_at_us, "
    "terminated, status_state, status_since, status_reason, stopped, overlap, event_seq, "
    "events_pruned_through, session_turns_a, session_turns_b, env_types, last_activity_us, "
    "status_error, budgets, run_context IS NOT NULL"
)
# A fork's lineage (spec 08 §8.3.8, migration 25), read only where an answer shows it (a
# thread's detail, the list, the forks): two point reads of thread_forks by its key.
THREAD_LINEAGE = (
    "(SELECT f.from_thread_id FROM thread_forks f WHERE f.thread_id = threads.id),"
    " (SELECT f.from_message_id FROM thread_forks f WHERE f.thread_id = threads.id)"
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


THREAD_COLUMN_COUNT = 23
"""The columns of ``THREAD_COLUMNS``: extra columns of a query follow them."""


def status_from_row(row: Sequence[Any]) -> ThreadStatus:
    """The ``ThreadStatus`` of a ``THREAD_COLUMNS`` row (its error, spec 01 §1.7.4, is a
    JSON object in ``status_error``)."""
    error = row[20]
    return ThreadStatus(
        state=row[9],
        since=row[10],
        reason=row[11],
        error=None if error is None else StatusError.model_validate_json(error),
    )


def dump_status_error(error: StatusError) -> str:
    """The ``status_error`` column of a status's error."""
    return json_compact(error.model_dump())


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
    loop, which was most of the cost of reading a page (measured: ~3× faster). Its
    dictionary shares its keys with the class (``records.trusted.blank``): a history read
    from the store keeps these records (issue 40: memory per active thread); the
    projected ``subagent_*`` fields keep the blank's ``None``."""
    message = _new_object(Message)
    data = blank(Message)
    data["id"] = row[0]
    data["role"] = row[1]
    data["content"] = row[2]
    data["name"] = row[3]
    data["tool_calls"] = row[4]
    data["tool_call_id"] = row[5]
    data["tool_status"] = row[6]
    data["status"] = row[7]
    data["attachments"] = load_attachments(row[8])
    data["reasoning_content"] = row[9]
    data["reasoning_details"] = row[10]
    data["prompt"] = row[11]
    data["created_at"] = row[12]
    data["parent_id"] = row[13]
    data["depth"] = row[14]
    data["silent"] = bool(row[15])
    data["metadata"] = json.loads(row[16]) if row[16] else None
    data["subagent_id"] = row[17]
    data["log_id"] = row[18]
    _set(message, "__dict__", data)
    _set(message, "__pydantic_fields_set__", MESSAGE_FIELDS_SET)
    _set(message, "__pydantic_extra__", None)
    _set(message, "__pydantic_private__", None)
    return message


class NeedsProjection(Exception):
    """A stored row names a subagent: its wire record needs the projected ``subagent_*``
    fields (spec 01 §1.4.11), which only the thread layer can fill."""


def load_json_text(text: str) -> Any:
    """A stored JSON text as Python values, as ``json.loads`` reads it: with pydantic-core's
    parser (the small objects of a page's metadata several times faster), and with
    ``json.loads`` where that one refuses what ``json.loads`` reads (a lone surrogate
    escape)."""
    try:
        return from_json(text)
    except ValueError:
        return json.loads(text)


def message_wire_from_row(row: Sequence[Any]) -> dict[str, Any]:
    """``message_from_row(row).to_wire(copy_metadata=False)`` built straight from the row,
    without the record in between (a first read of a page: issue 40). Raises
    ``NeedsProjection`` for a row that names a subagent. The keys, their order and their
    values are the record's (``tests/store/test_wire_rows.py`` pins the equality on both
    stores)."""
    if row[17] is not None:
        raise NeedsProjection(row[17])
    attachments = load_attachments(row[8]) if row[8] else None
    out: dict[str, Any] = {
        "id": row[0],
        "role": row[1],
        "content": row[2],
        "name": row[3],
        "tool_calls": row[4],
        "tool_call_id": row[5],
        "tool_status": row[6],
        "status": row[7],
        "attachments": [a.to_wire() for a in attachments] if attachments is not None else None,
        "reasoning_content": row[9],
        "reasoning_details": row[10],
        "prompt": row[11],
        "created_at": row[12],
        "parent_id": row[13],
        "depth": row[14],
        "silent": bool(row[15]),
    }
    if row[16]:
        out["metadata"] = load_json_text(row[16])
    out["subagent_id"] = None
    out["log_id"] = row[18]
    return out


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
    row: Sequence[Any],
    *,
    has_children: bool = False,
    summary: bool = False,
    lineage: bool = False,
) -> ThreadRow:
    """A ``threads`` row; ``has_children`` / ``summary`` / ``lineage`` (``THREAD_LINEAGE``)
    say which extra columns follow, in that order."""
    extra = THREAD_COLUMN_COUNT
    children: bool | None = None
    if has_children:
        children = bool(row[extra])
        extra += 1
    found = thread_with_state(
        row,
        terminated=row[8],
        status=status_from_row(row),
        stopped=bool(row[12]),
        event_seq=row[14],
        session=(row[16], row[17]),
        has_children=children,
        last_activity_us=row[19],
        last_message_preview=preview(row[extra]) if summary else None,
        last_message_at_us=row[extra + 1] if summary else None,
    )
    if lineage:
        at = extra + 2 if summary else extra
        found = replace(found, forked_from_thread_id=row[at], forked_from_message_id=row[at + 1])
    return found


def thread_with_state(
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
        budgets=load_budgets(row[21]) if row[21] else (),
        has_run_context=bool(row[22]),
    )


def load_budgets(text: str) -> tuple[ThreadBudget, ...]:
    """The ``budgets`` column of a thread (spec 15 §15.3): a JSON array of budgets."""
    return tuple(ThreadBudget.model_validate(item) for item in json.loads(text))


def dump_budgets(budgets: Sequence[ThreadBudget]) -> str | None:
    """The ``budgets`` column of ``budgets``: ``NULL`` when there is none."""
    if not budgets:
        return None
    return json_compact([b.model_dump(exclude_none=True) for b in budgets])


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


THREAD_RANGE = (
    f"rid > (SELECT tnum FROM threads WHERE id = ?) * {KEY_SPAN}"
    f" AND rid < ((SELECT tnum FROM threads WHERE id = ?) + 1) * {KEY_SPAN}"
)
"""A WHERE fragment: the messages of one thread (bind its id twice)."""

OF_THREAD = "thread_id || '' = ?"
"""A WHERE fragment beside a row's key (``id = ? AND {OF_THREAD}``): that the row found by
its key is the thread's, as a condition no index serves (spec 01 §1.11.2 rule 6). As
``thread_id = ?`` it let PostgreSQL choose an index led by ``thread_id`` over the key's:
planned while a table is small and never analyzed, the two cost the same, and the plan a
connection caches then read every row of the thread at each execution — the update of
each LLM row read all the thread's log rows so (``logs_order``; docs/benchmarks.md, "The
search vector written by the store, and a log row found by its key", issue 40)."""
