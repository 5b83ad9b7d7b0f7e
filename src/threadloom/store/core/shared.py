"""A thread's shared state and run context (spec 02 §2.20, spec 13 §13.2.11), on both
stores: columns of the thread row, written in the thread's transaction (``Tx``), so a
change and its ``shared_state`` event commit together and concurrent writers of one
thread are ordered by the thread's lock."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from threadloom.errors import StateConflict, ThreadNotFound
from threadloom.records import RUN_CONTEXT_MAX_BYTES, ContextEntry, SharedState, state_json
from threadloom.store.core.conn import Conn
from threadloom.store.core.tx import Tx
from threadloom.store.shapes import Clock, StateChange, StateWrite

_READ = "SELECT shared_state, shared_state_version, shared_state_at FROM threads WHERE id = ?"


def _state(row: Sequence[Any]) -> SharedState:
    text, version, at = row
    value = json.loads(text) if isinstance(text, str) else {}
    return SharedState(value=value, version=int(version or 0), updated_at=at)


def get_shared_state(conn: Conn, thread_id: str) -> SharedState:
    row = conn.execute(_READ, (thread_id,)).fetchone()
    if row is None:
        raise ThreadNotFound(thread_id)
    return _state(row)


def write_shared_state(conn: Conn, clock: Clock, thread_id: str, change: StateChange) -> StateWrite:
    """Apply ``change`` to the stored state in the thread's transaction: a replacement,
    or top-level keys set and removed. A version other than ``change.expected_version``
    is ``StateConflict``; a result over the limit ``StateTooLarge``; both change nothing.
    A result equal to the stored state writes nothing (no new version, no event)."""
    tx = Tx(conn, thread_id, clock)
    current = _state(conn.execute(_READ, (thread_id,)).fetchone())
    if change.expected_version is not None and change.expected_version != current.version:
        raise StateConflict(change.expected_version, current.version)
    value = dict(current.value) if change.replace is None else dict(change.replace)
    value.update(change.merge)
    for key in change.remove:
        value.pop(key, None)
    value, text = state_json(value)
    if value == current.value and current.version > 0:
        return StateWrite(current, [])
    written = SharedState(value=value, version=current.version + 1, updated_at=tx.now)
    conn.execute(
        "UPDATE threads SET shared_state = ?, shared_state_version = ?, shared_state_at = ?"
        " WHERE id = ?",
        (text, written.version, written.updated_at, thread_id),
    )
    tx.event("shared_state", None, data=written.to_wire())
    return StateWrite(written, tx.flush())


def get_run_context(conn: Conn, thread_id: str) -> list[ContextEntry]:
    row = conn.execute("SELECT run_context FROM threads WHERE id = ?", (thread_id,)).fetchone()
    if row is None:
        raise ThreadNotFound(thread_id)
    if not isinstance(row[0], str):
        return []
    return [ContextEntry.model_validate(e) for e in json.loads(row[0])]


def set_run_context(
    conn: Conn, clock: Clock, thread_id: str, entries: Sequence[ContextEntry]
) -> None:
    """Replace the thread's run context (none: ``NULL``); over its limit ``StateTooLarge``."""
    wire = [e.model_dump() for e in entries]
    text = None
    if wire:
        _, text = state_json({"context": wire}, "context", RUN_CONTEXT_MAX_BYTES)
        text = text[len('{"context":') : -1]
    done = conn.execute(
        "UPDATE threads SET run_context = ? WHERE id = ?", (text, thread_id)
    ).rowcount
    if not done:
        raise ThreadNotFound(thread_id)
