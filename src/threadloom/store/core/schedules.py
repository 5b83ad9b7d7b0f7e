"""Schedules and the claims of their fires, once for both stores (spec 18 §18.2, §18.4).

A fire is claimed with one conditional update, as a run's lease is taken: the claim moves
``next_fire_us`` on and records the due time it fires with the claiming node and a lease
expiry, only where the row still has the next fire time (and no unsettled fire) that the
claimer read — so of any number of nodes that read the same due schedule, one claims it.
The claimer settles the fire (``finish_schedule_fire``); a fire whose lease ran out
unsettled (its node died) is claimed again for the same due time, and the engine's fire is
idempotent per (schedule, due time).
"""

from __future__ import annotations

import json
from typing import Any

from threadloom.records import Schedule, ScheduleRow
from threadloom.store.core import outbox
from threadloom.store.core.conn import Conn
from threadloom.store.shapes import Clock

COLUMNS = (
    "id, spec, source, next_fire_us, created_at_us, updated_at_us, fire_count, last_fire_us,"
    " last_status, last_thread_id, last_error, fire_due_us, fire_node, fire_lease_until_us"
)


def _spec_of(text: str) -> Schedule:
    """A stored definition, its known fields only: a later release may store fields this
    one does not know (expand/contract, spec 17 §17.4), which must not break its reads."""
    fields = json.loads(text)
    return Schedule.model_validate({k: v for k, v in fields.items() if k in Schedule.model_fields})


def _row(row: tuple[Any, ...]) -> ScheduleRow:
    return ScheduleRow(
        schedule=_spec_of(row[1]),
        source=row[2],
        next_fire_us=row[3],
        created_at_us=row[4],
        updated_at_us=row[5],
        fire_count=row[6],
        last_fire_us=row[7],
        last_status=row[8],
        last_thread_id=row[9],
        last_error=row[10],
        fire_due_us=row[11],
        fire_node=row[12],
        fire_lease_until_us=row[13],
    )


def _spec(schedule: Schedule) -> str:
    return schedule.model_dump_json()


# -- writes (conn, clock, *args) -------------------------------------------------------------


def create_schedule(
    conn: Conn, clock: Clock, schedule: Schedule, source: str, next_fire_us: int | None
) -> ScheduleRow | None:
    """Insert a schedule; None (nothing stored) when its id is taken."""
    now = clock()
    row = conn.execute(
        "INSERT INTO schedules(id, spec, source, enabled, next_fire_us, created_at_us,"
        " updated_at_us) VALUES (?,?,?,?,?,?,?) ON CONFLICT (id) DO NOTHING"
        f" RETURNING {COLUMNS}",
        (schedule.id, _spec(schedule), source, int(schedule.enabled), next_fire_us, now, now),
    ).fetchone()
    return _row(row) if row is not None else None


def replace_schedule(
    conn: Conn, clock: Clock, schedule: Schedule, source: str, next_fire_us: int | None
) -> ScheduleRow | None:
    """Change a schedule's definition and next fire time (its firing history stays); None
    when there is none with its id."""
    row = conn.execute(
        "UPDATE schedules SET spec = ?, source = ?, enabled = ?, next_fire_us = ?,"
        f" updated_at_us = ? WHERE id = ? RETURNING {COLUMNS}",
        (_spec(schedule), source, int(schedule.enabled), next_fire_us, clock(), schedule.id),
    ).fetchone()
    return _row(row) if row is not None else None


def delete_schedule(conn: Conn, clock: Clock, schedule_id: str) -> bool:
    return conn.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,)).rowcount > 0


def claim_schedule_fire(
    conn: Conn,
    clock: Clock,
    schedule_id: str,
    due_us: int,
    node: str,
    lease_until_us: int,
    expect_next_us: int | None,
    new_next_us: int | None,
    stale_lease_until_us: int | None,
) -> ScheduleRow | None:
    """Claim one fire of ``schedule_id`` at ``due_us`` for ``node`` until
    ``lease_until_us``; the row as claimed, or None when another claim won.

    With ``stale_lease_until_us``: take over the unsettled fire at ``due_us`` whose lease
    (that value) has run out. Else a new fire, where the schedule has no unsettled fire
    (and, with ``expect_next_us``, is enabled with that next fire time, moved on to
    ``new_next_us``; without it, a fire asked for now, the next fire time unchanged)."""
    sets = "fire_due_us = ?, fire_node = ?, fire_lease_until_us = ?"
    params: list[Any] = [due_us, node, lease_until_us]
    if stale_lease_until_us is not None:
        where = "id = ? AND fire_due_us = ? AND fire_lease_until_us = ?"
        params += [schedule_id, due_us, stale_lease_until_us]
    elif expect_next_us is not None:
        sets += ", next_fire_us = ?"
        params.append(new_next_us)
        where = "id = ? AND fire_due_us IS NULL AND enabled = 1 AND next_fire_us = ?"
        params += [schedule_id, expect_next_us]
    else:
        where = "id = ? AND fire_due_us IS NULL"
        params.append(schedule_id)
    row = conn.execute(
        f"UPDATE schedules SET {sets} WHERE {where} RETURNING {COLUMNS}", tuple(params)
    ).fetchone()
    return _row(row) if row is not None else None


def finish_schedule_fire(
    conn: Conn,
    clock: Clock,
    schedule_id: str,
    due_us: int,
    node: str,
    status: str,
    thread_id: str | None,
    error: str | None,
) -> bool:
    """Settle the fire at ``due_us`` that ``node`` claimed: its outcome becomes the
    schedule's last fire, and a ``fired`` or ``failed`` fire is written to the webhook
    outbox in the same transaction (``schedule.fired`` / ``schedule.failed``, spec 19
    §19.2). False when the claim is no longer ``node``'s (its lease ran out and another
    node took the fire over): nothing is written then."""
    cur = conn.execute(
        "UPDATE schedules SET fire_due_us = NULL, fire_node = NULL, fire_lease_until_us = NULL,"
        " last_fire_us = ?, last_status = ?, last_thread_id = COALESCE(?, last_thread_id),"
        " last_error = ?, fire_count = fire_count + ?"
        " WHERE id = ? AND fire_due_us = ? AND fire_node = ?",
        (
            due_us,
            status,
            thread_id,
            error,
            1 if status == "fired" else 0,
            schedule_id,
            due_us,
            node,
        ),
    )
    if cur.rowcount <= 0:
        return False
    if status in _EVENTS:
        now = clock()
        data = {
            "schedule_id": schedule_id,
            "due_at": due_us,
            "due_time": outbox.iso(due_us),
            "status": status,
            "thread_id": thread_id,
            "error": error,
        }
        outbox.emit(conn, now, _EVENTS[status], data)
    return True


_EVENTS = {"fired": "schedule.fired", "failed": "schedule.failed"}
"""The settled fires announced to webhooks; a ``skipped`` or ``missed`` fire sent nothing."""


# -- reads (conn, *args) ---------------------------------------------------------------------


def get_schedule(conn: Conn, schedule_id: str) -> ScheduleRow | None:
    row = conn.execute(f"SELECT {COLUMNS} FROM schedules WHERE id = ?", (schedule_id,)).fetchone()
    return _row(row) if row is not None else None


def list_schedules(conn: Conn) -> list[ScheduleRow]:
    rows = conn.execute(f"SELECT {COLUMNS} FROM schedules ORDER BY id").fetchall()
    return [_row(r) for r in rows]


def due_schedules(conn: Conn, now_us: int, limit: int) -> list[ScheduleRow]:
    """The schedules with a fire to claim at ``now_us``: enabled ones whose next fire time
    has come (and no unsettled fire), and those whose unsettled fire's lease ran out;
    earliest first."""
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM schedules WHERE enabled = 1 AND fire_due_us IS NULL"
        " AND next_fire_us <= ? ORDER BY next_fire_us LIMIT ?",
        (now_us, limit),
    ).fetchall()
    stale = conn.execute(
        f"SELECT {COLUMNS} FROM schedules WHERE fire_due_us IS NOT NULL"
        " AND fire_lease_until_us < ? ORDER BY fire_due_us LIMIT ?",
        (now_us, limit),
    ).fetchall()
    return [_row(r) for r in stale] + [_row(r) for r in rows]
