"""Inbound triggers and the claims of their calls, once for both stores (spec 22 §22.2,
§22.4).

A call is claimed by its idempotency key with one insert that does nothing when the key is
taken (``claim_trigger_fire``): of any number of calls with one key — replays, or racing
requests on several nodes — one inserts the row and does the work; the others read the
thread id it recorded and start nothing. A claim whose caller died before it settled
(``done`` still 0 when its lease ran out) is taken over by the next call with the key; the
engine's work is idempotent per (trigger, key). The settlement (``finish_trigger_fire``)
counts the call and writes ``trigger.fired`` to the webhook outbox in its transaction.
"""

from __future__ import annotations

import json
from typing import Any

from threadloom.records import Trigger, TriggerFire, TriggerRow
from threadloom.store.core import outbox
from threadloom.store.core.conn import Conn
from threadloom.store.shapes import Clock

COLUMNS = "id, spec, secret, created_at_us, updated_at_us, fire_count, last_fire_us, last_thread_id"


def _spec_of(text: str) -> Trigger:
    """A stored definition, its known fields only (a later release may add fields)."""
    fields = json.loads(text)
    return Trigger.model_validate({k: v for k, v in fields.items() if k in Trigger.model_fields})


def _row(row: tuple[Any, ...]) -> TriggerRow:
    return TriggerRow(
        trigger=_spec_of(row[1]),
        secret=row[2],
        created_at_us=row[3],
        updated_at_us=row[4],
        fire_count=row[5],
        last_fire_us=row[6],
        last_thread_id=row[7],
    )


# -- writes (conn, clock, *args) -------------------------------------------------------------


def create_trigger(conn: Conn, clock: Clock, trigger: Trigger, secret: str) -> TriggerRow | None:
    """Insert a trigger; None (nothing stored) when its id is taken."""
    now = clock()
    row = conn.execute(
        "INSERT INTO triggers(id, spec, secret, enabled, created_at_us, updated_at_us)"
        f" VALUES (?,?,?,?,?,?) ON CONFLICT (id) DO NOTHING RETURNING {COLUMNS}",
        (trigger.id, trigger.model_dump_json(), secret, int(trigger.enabled), now, now),
    ).fetchone()
    return _row(row) if row is not None else None


def replace_trigger(
    conn: Conn, clock: Clock, trigger: Trigger, secret: str | None
) -> TriggerRow | None:
    """Change a trigger's definition (and its secret, when given); None when there is none."""
    row = conn.execute(
        "UPDATE triggers SET spec = ?, enabled = ?, secret = COALESCE(?, secret),"
        f" updated_at_us = ? WHERE id = ? RETURNING {COLUMNS}",
        (trigger.model_dump_json(), int(trigger.enabled), secret, clock(), trigger.id),
    ).fetchone()
    return _row(row) if row is not None else None


def delete_trigger(conn: Conn, clock: Clock, trigger_id: str) -> bool:
    """Delete a trigger and the record of its calls."""
    conn.execute("DELETE FROM trigger_fires WHERE trigger_id = ?", (trigger_id,))
    return conn.execute("DELETE FROM triggers WHERE id = ?", (trigger_id,)).rowcount > 0


def claim_trigger_fire(
    conn: Conn, clock: Clock, trigger_id: str, key: str, thread_id: str, lease_us: int
) -> TriggerFire:
    """Claim the call of ``trigger_id`` with ``key``, going to ``thread_id``.

    ``replayed`` False: this caller does the work (a new claim, or one whose previous
    claimer's lease ran out unsettled; ``thread_id`` is then the one first recorded).
    ``replayed`` True: another call with the key did it or is doing it (``done`` says)."""
    now = clock()
    row = conn.execute(
        "INSERT INTO trigger_fires(trigger_id, key, thread_id, created_at_us, lease_until_us)"
        " VALUES (?,?,?,?,?) ON CONFLICT (trigger_id, key) DO NOTHING RETURNING thread_id",
        (trigger_id, key, thread_id, now, now + lease_us),
    ).fetchone()
    if row is not None:
        return TriggerFire(
            trigger_id=trigger_id, key=key, thread_id=row[0], replayed=False, done=False
        )
    row = conn.execute(
        "UPDATE trigger_fires SET lease_until_us = ? WHERE trigger_id = ? AND key = ?"
        " AND done = 0 AND lease_until_us < ? RETURNING thread_id",
        (now + lease_us, trigger_id, key, now),
    ).fetchone()
    if row is not None:  # its claimer died before settling: taken over
        return TriggerFire(
            trigger_id=trigger_id, key=key, thread_id=row[0], replayed=False, done=False
        )
    row = conn.execute(
        "SELECT thread_id, done FROM trigger_fires WHERE trigger_id = ? AND key = ?",
        (trigger_id, key),
    ).fetchone()
    assert row is not None
    return TriggerFire(
        trigger_id=trigger_id, key=key, thread_id=row[0], replayed=True, done=bool(row[1])
    )


def finish_trigger_fire(conn: Conn, clock: Clock, trigger_id: str, key: str) -> bool:
    """Settle a claimed call: it counts in the trigger's calls and ``trigger.fired`` goes to
    the webhook outbox, in one transaction. False when it was settled already."""
    now = clock()
    row = conn.execute(
        "UPDATE trigger_fires SET done = 1 WHERE trigger_id = ? AND key = ? AND done = 0"
        " RETURNING thread_id, created_at_us",
        (trigger_id, key),
    ).fetchone()
    if row is None:
        return False
    thread_id = row[0]
    conn.execute(
        "UPDATE triggers SET fire_count = fire_count + 1, last_fire_us = ?, last_thread_id = ?"
        " WHERE id = ?",
        (now, thread_id, trigger_id),
    )
    data = {"trigger_id": trigger_id, "thread_id": thread_id, "idempotency_key": key}
    outbox.emit(conn, now, "trigger.fired", data)
    return True


def release_trigger_fire(conn: Conn, clock: Clock, trigger_id: str, key: str) -> bool:
    """Forget an unsettled claim whose work failed: the key may be used again."""
    cur = conn.execute(
        "DELETE FROM trigger_fires WHERE trigger_id = ? AND key = ? AND done = 0",
        (trigger_id, key),
    )
    return cur.rowcount > 0


# -- reads (conn, *args) ---------------------------------------------------------------------


def get_trigger(conn: Conn, trigger_id: str) -> TriggerRow | None:
    row = conn.execute(f"SELECT {COLUMNS} FROM triggers WHERE id = ?", (trigger_id,)).fetchone()
    return _row(row) if row is not None else None


def list_triggers(conn: Conn) -> list[TriggerRow]:
    return [_row(r) for r in conn.execute(f"SELECT {COLUMNS} FROM triggers ORDER BY id").fetchall()]
