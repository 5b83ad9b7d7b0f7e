"""Outbound webhooks on both stores (spec 19): the subscriptions, and the outbox of their
deliveries.

``emit`` writes one outbox row per enabled subscription that wants the event, on the
connection of the transaction that writes the event itself — a run's settlement, an
approval's request or decision, a thread's creation or termination — so an event is
announced exactly when it committed (spec 19 §19.3). A node claims due rows with a lease
(``claim_due``), sends them, and records the attempt (``record_attempt``): delivered, due
again later, or dead; a claimed row whose lease ran out (its node died mid-delivery) is due
again, with the same event id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from threadloom.errors import InvalidField
from threadloom.records import WEBHOOK_EVENT_TYPES, WebhookDelivery, WebhookSubscription
from threadloom.records.ids import random_hex
from threadloom.store.core.conn import Conn
from threadloom.store.shapes import Clock

_SUB_COLUMNS = "id, url, secret, event_types, enabled, description, created_at_us, updated_at_us"
_OUT_COLUMNS = (
    "event_id, subscription_id, event_type, payload, created_at_us, state, attempts,"
    " next_at_us, last_error, last_status, delivered_at_us"
)
_ENABLED = "SELECT id, event_types FROM webhook_subscriptions WHERE enabled = 1"


def new_event_id() -> str:
    """A stable event id: the ``webhook-id`` of every attempt of the event (spec 19 §19.4)."""
    return f"evt_{random_hex()}"


def iso(us: int) -> str:
    """``us`` (µs since the epoch) as an RFC 3339 UTC time."""
    return datetime.fromtimestamp(us / 1e6, UTC).isoformat().replace("+00:00", "Z")


_ENABLED_SAME = (
    "SELECT coalesce(string_agg(id || ' ' || event_types, chr(10) ORDER BY id COLLATE \"C\"),"
    " '') = ? FROM webhook_subscriptions WHERE enabled = 1"
)
"""Whether the enabled subscriptions are still those of a fingerprint (``_fingerprint``):
PostgreSQL's check of the rows of ``_ENABLED`` it kept (``Conn.kept_read``)."""


def _fingerprint(rows: list[Any]) -> str:
    """``_ENABLED``'s rows as ``_ENABLED_SAME`` joins them (ids are ASCII: by id bytewise)."""
    return "\n".join(f"{sub_id} {types}" for sub_id, types in sorted(rows))


def emit(conn: Conn, now: int, event_type: str, data: dict[str, Any], kept: bool = False) -> int:
    """Write the event ``event_type`` with ``data`` for each enabled subscription that
    wants it, in the caller's transaction; returns the rows written (0: none wants it).
    ``kept``: the transaction started from a kept state, so the subscriptions this node
    read last may be taken, checked by the backend (``Conn.kept_read``)."""
    rows = conn.kept_read(_ENABLED, _ENABLED_SAME, _fingerprint) if kept else None
    if rows is None:
        rows = conn.execute(_ENABLED).fetchall()
        conn.keep_read(_ENABLED, rows)
    wanting: list[str] = []
    for sub_id, types in rows:
        names = json.loads(types)
        if not names or event_type in names:
            wanting.append(sub_id)
    if not wanting:
        return 0
    event_id = new_event_id()
    body = json.dumps(
        {"type": event_type, "timestamp": iso(now), "data": data},
        separators=(",", ":"),
        default=str,
    )
    for sub_id in wanting:
        conn.defer(
            "INSERT INTO webhook_outbox(event_id, subscription_id, event_type, payload,"
            " created_at_us, next_at_us) VALUES (?, ?, ?, ?, ?, ?)",
            (event_id, sub_id, event_type, body, now, now),
        )
    return len(wanting)


# -- subscriptions ---------------------------------------------------------------------


def check_types(event_types: Sequence[str]) -> tuple[str, ...]:
    """The event types of a subscription, each a known one (else ``InvalidField``)."""
    for name in event_types:
        if name not in WEBHOOK_EVENT_TYPES:
            raise InvalidField("event_types", f"unknown event type {name!r}")
    return tuple(dict.fromkeys(event_types))


def _sub(row: Sequence[Any]) -> WebhookSubscription:
    return WebhookSubscription(
        id=row[0],
        url=row[1],
        secret=row[2],
        event_types=tuple(json.loads(row[3])),
        enabled=bool(row[4]),
        description=row[5],
        created_at=int(row[6]),
        updated_at=int(row[7]),
    )


def create_subscription(conn: Conn, clock: Clock, sub: WebhookSubscription) -> WebhookSubscription:
    now = clock()
    types = check_types(sub.event_types)
    conn.execute(
        f"INSERT INTO webhook_subscriptions({_SUB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            sub.id,
            sub.url,
            sub.secret,
            json.dumps(list(types)),
            int(sub.enabled),
            sub.description,
            now,
            now,
        ),
    )
    found = get_subscription(conn, sub.id)
    assert found is not None
    return found


def get_subscription(conn: Conn, sub_id: str) -> WebhookSubscription | None:
    row = conn.execute(
        f"SELECT {_SUB_COLUMNS} FROM webhook_subscriptions WHERE id = ?", (sub_id,)
    ).fetchone()
    return _sub(row) if row is not None else None


def list_subscriptions(conn: Conn) -> list[WebhookSubscription]:
    return [
        _sub(r)
        for r in conn.execute(
            f"SELECT {_SUB_COLUMNS} FROM webhook_subscriptions ORDER BY created_at_us, id"
        ).fetchall()
    ]


def update_subscription(
    conn: Conn, clock: Clock, sub_id: str, changes: dict[str, Any]
) -> WebhookSubscription | None:
    """Change the fields of ``changes`` (url, secret, event_types, enabled, description)."""
    current = get_subscription(conn, sub_id)
    if current is None:
        return None
    merged = current.model_copy(update=changes)
    types = check_types(merged.event_types)
    conn.execute(
        "UPDATE webhook_subscriptions SET url = ?, secret = ?, event_types = ?, enabled = ?,"
        " description = ?, updated_at_us = ? WHERE id = ?",
        (
            merged.url,
            merged.secret,
            json.dumps(list(types)),
            int(merged.enabled),
            merged.description,
            clock(),
            sub_id,
        ),
    )
    return get_subscription(conn, sub_id)


def delete_subscription(conn: Conn, clock: Clock, sub_id: str) -> bool:
    """Delete a subscription and its outbox rows (nothing more is sent to it)."""
    conn.execute("DELETE FROM webhook_outbox WHERE subscription_id = ?", (sub_id,))
    cur = conn.execute("DELETE FROM webhook_subscriptions WHERE id = ?", (sub_id,))
    return cur.rowcount > 0


# -- the outbox ------------------------------------------------------------------------


def _delivery(row: Sequence[Any]) -> WebhookDelivery:
    return WebhookDelivery(
        event_id=row[0],
        subscription_id=row[1],
        event_type=row[2],
        payload=json.loads(row[3]),
        created_at=int(row[4]),
        state=row[5],
        attempts=int(row[6]),
        next_attempt_at=int(row[7]),
        last_error=row[8],
        last_status=row[9],
        delivered_at=None if row[10] is None else int(row[10]),
    )


def any_due(conn: Conn, now: int) -> bool:
    """Whether a pending row is due at ``now`` (a read: an idle worker's poll takes no
    write lock)."""
    row = conn.execute(
        "SELECT 1 FROM webhook_outbox WHERE state = 'pending' AND next_at_us <= ? LIMIT 1",
        (now,),
    ).fetchone()
    return row is not None


def claim_due(
    conn: Conn, clock: Clock, node_id: str, limit: int, lease_us: int
) -> list[tuple[WebhookDelivery, WebhookSubscription]]:
    """Claim up to ``limit`` due pending rows for ``node_id`` until ``now + lease_us``: each
    is counted an attempt as it is claimed (a node that dies mid-delivery spent one), and is
    due again for any node once the lease ran out."""
    now = clock()
    rows = conn.execute(
        "SELECT o.event_id, o.subscription_id FROM webhook_outbox o"
        " WHERE o.state = 'pending' AND o.next_at_us <= ?"
        " AND (o.lease_until_us IS NULL OR o.lease_until_us < ?)"
        " ORDER BY o.next_at_us, o.created_at_us LIMIT ?",
        (now, now, limit),
    ).fetchall()
    out: list[tuple[WebhookDelivery, WebhookSubscription]] = []
    subs: dict[str, WebhookSubscription | None] = {}
    for event_id, sub_id in rows:
        # the condition again: a node that claimed it meanwhile wins (the row's lock on
        # PostgreSQL makes this UPDATE wait for it and read its claim)
        taken = conn.execute(
            "UPDATE webhook_outbox SET lease_node = ?, lease_until_us = ?,"
            " attempts = attempts + 1 WHERE event_id = ? AND subscription_id = ?"
            " AND state = 'pending' AND (lease_until_us IS NULL OR lease_until_us < ?)",
            (node_id, now + lease_us, event_id, sub_id, now),
        ).rowcount
        if not taken:
            continue
        if sub_id not in subs:
            subs[sub_id] = get_subscription(conn, sub_id)
        sub = subs[sub_id]
        row = conn.execute(
            f"SELECT {_OUT_COLUMNS} FROM webhook_outbox WHERE event_id = ? AND subscription_id = ?",
            (event_id, sub_id),
        ).fetchone()
        if sub is None or row is None:
            continue
        out.append((_delivery(row), sub))
    return out


def record_attempt(
    conn: Conn,
    clock: Clock,
    event_id: str,
    sub_id: str,
    node_id: str,
    state: str,
    next_at_us: int | None,
    status: int | None,
    error: str | None,
) -> bool:
    """Record the attempt ``node_id`` made under its lease: ``state`` ``delivered``,
    ``pending`` (due again at ``next_at_us``) or ``dead``. ``False`` when the lease is no
    longer this node's (another node took the row after it ran out)."""
    now = clock()
    cur = conn.execute(
        "UPDATE webhook_outbox SET state = ?, next_at_us = COALESCE(?, next_at_us),"
        " last_status = ?, last_error = ?, lease_node = NULL, lease_until_us = NULL,"
        " delivered_at_us = ? WHERE event_id = ? AND subscription_id = ? AND lease_node = ?"
        " AND state = 'pending'",
        (
            state,
            next_at_us,
            status,
            error,
            now if state == "delivered" else None,
            event_id,
            sub_id,
            node_id,
        ),
    )
    return cur.rowcount > 0


def list_deliveries(
    conn: Conn, state: str | None, subscription_id: str | None, limit: int
) -> list[WebhookDelivery]:
    clauses: list[str] = []
    params: list[Any] = []
    if state is not None:
        clauses.append("state = ?")
        params.append(state)
    if subscription_id is not None:
        clauses.append("subscription_id = ?")
        params.append(subscription_id)
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    return [
        _delivery(r)
        for r in conn.execute(
            f"SELECT {_OUT_COLUMNS} FROM webhook_outbox{where}"
            " ORDER BY created_at_us, event_id, subscription_id LIMIT ?",
            (*params, limit),
        ).fetchall()
    ]


def get_delivery(conn: Conn, event_id: str, sub_id: str) -> WebhookDelivery | None:
    row = conn.execute(
        f"SELECT {_OUT_COLUMNS} FROM webhook_outbox WHERE event_id = ? AND subscription_id = ?",
        (event_id, sub_id),
    ).fetchone()
    return _delivery(row) if row is not None else None


def redeliver(conn: Conn, clock: Clock, event_id: str, sub_id: str) -> WebhookDelivery | None:
    """A dead delivery pending again, due now, its attempts counted from 0 (same event id).
    ``None`` when there is no such dead delivery."""
    cur = conn.execute(
        "UPDATE webhook_outbox SET state = 'pending', attempts = 0, next_at_us = ?,"
        " lease_node = NULL, lease_until_us = NULL"
        " WHERE event_id = ? AND subscription_id = ? AND state = 'dead'",
        (clock(), event_id, sub_id),
    )
    if not cur.rowcount:
        return None
    row = conn.execute(
        f"SELECT {_OUT_COLUMNS} FROM webhook_outbox WHERE event_id = ? AND subscription_id = ?",
        (event_id, sub_id),
    ).fetchone()
    return _delivery(row) if row is not None else None


# -- retention (spec 17 §17.2.3 rule 7) -------------------------------------------------

PRUNABLE_STATES = ("delivered", "dead")

_SETTLED_BEFORE = "state = ? AND next_at_us < ? AND COALESCE(delivered_at_us, next_at_us) < ?"
"""A ``delivered`` row delivered before the cutoff, or a ``dead`` row whose last attempt
was due before it. ``next_at_us`` (the due time of the row's last attempt) is never after
``delivered_at_us``, so its condition is implied and only lets the ``(state, next_at_us)``
index narrow the rows read."""


def _prunable(state: str) -> None:
    if state not in PRUNABLE_STATES:  # a pending row is never pruned
        raise InvalidField("state", f"only delivered or dead deliveries are pruned, not {state!r}")


def count_settled(conn: Conn, state: str, before_us: int) -> int:
    """How many ``state`` rows (delivered or dead) settled before ``before_us``."""
    _prunable(state)
    row = conn.execute(
        f"SELECT COUNT(*) FROM webhook_outbox WHERE {_SETTLED_BEFORE}",
        (state, before_us, before_us),
    ).fetchone()
    return int(row[0])


def prune_settled(conn: Conn, clock: Clock, state: str, before_us: int, limit: int) -> int:
    """Delete up to ``limit`` ``state`` rows settled before ``before_us``, each checked
    again as it is deleted (a dead row delivered again meanwhile is pending: it stays);
    how many went."""
    _prunable(state)
    keys = conn.execute(
        f"SELECT event_id, subscription_id FROM webhook_outbox WHERE {_SETTLED_BEFORE} LIMIT ?",
        (state, before_us, before_us, limit),
    ).fetchall()
    gone = 0
    for event_id, sub_id in keys:
        gone += conn.execute(
            f"DELETE FROM webhook_outbox WHERE event_id = ? AND subscription_id = ?"
            f" AND {_SETTLED_BEFORE}",
            (event_id, sub_id, state, before_us, before_us),
        ).rowcount
    return gone
