"""The memory store, once for both stores (spec 20): items kept by (scope, namespace, key).

A put is one upsert: without a version it overwrites (last write wins), with one it is
conditional (0: only where no live item is; n: only where the stored item is at version n),
so of two writers naming the same version one wins. An item past its expiry is never
returned: reads skip it, a put over it starts the item anew, and ``delete_expired`` (the
retention pass, spec 17 §17.2) removes it. A search reads the live items under a namespace
prefix and applies its filter here, the same way on both backends.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from threadloom.records import MemoryItem
from threadloom.records.memory import OPERATORS, labels_of, prefix_bounds
from threadloom.store.core.conn import Conn
from threadloom.store.shapes import Clock

COLUMNS = "namespace, key, value, created_at_us, updated_at_us, version, expires_at_us"
_LIVE = "(expires_at_us IS NULL OR expires_at_us > ?)"
_KEY = "scope = ? AND namespace = ? AND key = ?"


def _item(row: Sequence[Any]) -> MemoryItem:
    return MemoryItem(
        namespace=labels_of(row[0]),
        key=row[1],
        value=json.loads(row[2]),
        created_at=row[3],
        updated_at=row[4],
        version=row[5],
        expires_at=row[6],
    )


def _under(scope: str, prefix: Sequence[str]) -> tuple[str, list[Any]]:
    """The condition of the stored namespaces under ``prefix`` in ``scope`` (a range of
    the index, no ``LIKE``: a label holds no separator)."""
    bounds = prefix_bounds(prefix)
    if bounds is None:
        return "scope = ?", [scope]
    exact, low, high = bounds
    return (
        "scope = ? AND (namespace = ? OR (namespace >= ? AND namespace < ?))",
        [scope, exact, low, high],
    )


# -- writes (conn, clock, *args) -------------------------------------------------------------


def put_item(
    conn: Conn,
    clock: Clock,
    scope: str,
    namespace: str,
    key: str,
    value: str,
    ttl_us: int | None,
    if_version: int | None,
) -> MemoryItem | None:
    """Store ``value`` (JSON text) at the key; the item as stored, or None when
    ``if_version`` did not match (nothing written)."""
    now = clock()
    expires = now + ttl_us if ttl_us is not None else None
    conn.execute(
        f"DELETE FROM memory_items WHERE {_KEY} AND expires_at_us <= ?",
        (scope, namespace, key, now),
    )
    if if_version is not None and if_version > 0:
        row = conn.execute(
            "UPDATE memory_items SET value = ?, updated_at_us = ?, expires_at_us = ?,"
            f" version = version + 1 WHERE {_KEY} AND version = ? RETURNING {COLUMNS}",
            (value, now, expires, scope, namespace, key, if_version),
        ).fetchone()
        return _item(row) if row is not None else None
    on_conflict = (
        "DO NOTHING"
        if if_version == 0
        else "DO UPDATE SET value = excluded.value, updated_at_us = excluded.updated_at_us,"
        " expires_at_us = excluded.expires_at_us, version = memory_items.version + 1"
    )
    row = conn.execute(
        "INSERT INTO memory_items(scope, namespace, key, value, created_at_us, updated_at_us,"
        " version, expires_at_us) VALUES (?,?,?,?,?,?,1,?)"
        f" ON CONFLICT (scope, namespace, key) {on_conflict} RETURNING {COLUMNS}",
        (scope, namespace, key, value, now, now, expires),
    ).fetchone()
    return _item(row) if row is not None else None


def delete_item(
    conn: Conn, clock: Clock, scope: str, namespace: str, key: str, if_version: int | None
) -> bool:
    """Delete the live item at the key (with ``if_version``: only at that version);
    whether one was deleted."""
    sql = f"DELETE FROM memory_items WHERE {_KEY} AND {_LIVE}"
    params: list[Any] = [scope, namespace, key, clock()]
    if if_version is not None:
        sql += " AND version = ?"
        params.append(if_version)
    return conn.execute(sql, tuple(params)).rowcount > 0


def delete_expired(conn: Conn, clock: Clock, limit: int) -> int:
    """Remove up to ``limit`` items past their expiry; how many."""
    cur = conn.execute(
        "DELETE FROM memory_items WHERE (scope, namespace, key) IN (SELECT scope, namespace,"
        " key FROM memory_items WHERE expires_at_us <= ? LIMIT ?)",
        (clock(), limit),
    )
    return cur.rowcount


# -- reads (conn, *args) ---------------------------------------------------------------------


def get_item(conn: Conn, scope: str, namespace: str, key: str, now_us: int) -> MemoryItem | None:
    row = conn.execute(
        f"SELECT {COLUMNS} FROM memory_items WHERE {_KEY} AND {_LIVE}",
        (scope, namespace, key, now_us),
    ).fetchone()
    return _item(row) if row is not None else None


def search_items(
    conn: Conn,
    scope: str,
    prefix: Sequence[str],
    filter: Mapping[str, Any] | None,
    limit: int,
    offset: int,
    now_us: int,
) -> list[MemoryItem]:
    """The live items under ``prefix`` that match ``filter``, most recently updated first
    (then by namespace and key), ``offset`` of them skipped, at most ``limit``."""
    where, params = _under(scope, prefix)
    sql = (
        f"SELECT {COLUMNS} FROM memory_items WHERE {where} AND {_LIVE}"
        " ORDER BY updated_at_us DESC, namespace, key"
    )
    params.append(now_us)
    if not filter:
        rows = conn.execute(f"{sql} LIMIT ? OFFSET ?", (*params, limit, offset)).fetchall()
        return [_item(r) for r in rows]
    found: list[MemoryItem] = []
    skipped = 0
    for row in conn.execute(sql, tuple(params)):
        item = _item(row)
        if not matches(item.value, filter):
            continue
        if skipped < offset:
            skipped += 1
            continue
        found.append(item)
        if len(found) >= limit:
            break
    return found


def list_namespaces(
    conn: Conn,
    scope: str,
    prefix: Sequence[str],
    suffix: Sequence[str],
    max_depth: int | None,
    limit: int,
    offset: int,
    now_us: int,
) -> list[tuple[str, ...]]:
    """The namespaces holding live items under ``prefix`` (and ending with ``suffix``),
    cut to ``max_depth`` labels and counted once each, in order."""
    where, params = _under(scope, prefix)
    rows = conn.execute(
        f"SELECT DISTINCT namespace FROM memory_items WHERE {where} AND {_LIVE} ORDER BY namespace",
        (*params, now_us),
    ).fetchall()
    seen: dict[tuple[str, ...], None] = {}
    tail = tuple(suffix)
    for (stored,) in rows:
        labels = labels_of(stored)
        if tail and labels[-len(tail) :] != tail:
            continue
        seen.setdefault(labels[:max_depth] if max_depth is not None else labels, None)
    return sorted(seen)[offset : offset + limit]


# -- the filter (spec 20 §20.4) --------------------------------------------------------------

_MISSING = object()


def _field(value: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` (labels joined by ``.``: a field of a nested object)."""
    at: Any = value
    for part in path.split("."):
        if not isinstance(at, Mapping) or part not in at:
            return _MISSING
        at = at[part]
    return at


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


_COMPARE = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def _ordered(a: Any, b: Any, op: str) -> bool:
    """``a op b`` where both are numbers or both strings; other pairs never match."""
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    numbers = isinstance(a, int | float) and isinstance(b, int | float)
    if not (numbers or (isinstance(a, str) and isinstance(b, str))):
        return False
    return bool(_COMPARE[op](a, b))


def _holds(found: Any, condition: Any) -> bool:
    if isinstance(condition, Mapping) and condition and all(k in OPERATORS for k in condition):
        for op, operand in condition.items():
            if op == "$eq":
                ok = found is not _MISSING and _same(found, operand)
            elif op == "$ne":
                ok = found is _MISSING or not _same(found, operand)
            else:
                ok = found is not _MISSING and _ordered(found, operand, op)
            if not ok:
                return False
        return True
    return found is not _MISSING and _same(found, condition)


def matches(value: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """Whether a document meets every condition of ``filter`` (field path → a value it
    equals, or an object of operators)."""
    return all(_holds(_field(value, path), cond) for path, cond in filter.items())
