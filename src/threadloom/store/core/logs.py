"""Log rows and cost sums, on both stores (spec 01 §1.9, §1.10)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.records import LogRow
from threadloom.store.base import Clock, CostSummary, CostSums, StoredEvent
from threadloom.store.core.bodies import RequestReader, inline_response, insert_bodies
from threadloom.store.core.bodies import write_bodies as write_bodies
from threadloom.store.core.codec import (
    LOG_COLUMNS,
    LOG_SELECT,
    ROW_FIELDS,
    copy_with,
    log_from_row,
    log_values,
)
from threadloom.store.core.conn import Conn
from threadloom.store.core.messages import newest_top_level_id
from threadloom.store.core.null_literals import NullFree
from threadloom.store.core.tx import Tx

_INSERT = NullFree(
    f"INSERT INTO logs(thread_id, lseq, {LOG_COLUMNS}, response_body)"
    f" VALUES (?, ?, {', '.join('?' * len(ROW_FIELDS))}, ?)"
)
_INSERT_LINKED = NullFree(
    f"INSERT INTO logs(thread_id, lseq, {LOG_COLUMNS}, response_body) VALUES (?, ?, "
    + ", ".join(
        "(SELECT id FROM messages WHERE id = ?)" if f == "message_id" else "?" for f in ROW_FIELDS
    )
    + ", ?)"
)
"""The insert of a row that names a message stored by an earlier transaction: a message
deleted since leaves the row unnamed (``NULL``, spec 02 §2.8), as its delete leaves the
rows stored before it (no foreign key does it on PostgreSQL, migration 20)."""


def insert_log(
    conn: Conn, clock: Clock, thread_id: str, row: LogRow, anchor_newest: bool
) -> tuple[LogRow, StoredEvent]:
    tx = Tx(conn, thread_id, clock)
    linked = not anchor_newest and row.message_id is not None
    stored, event = insert_log_in(tx, row, anchor_newest, linked)
    tx.flush()
    return stored, event


def insert_log_in(
    tx: Tx, row: LogRow, anchor_newest: bool, linked: bool = False
) -> tuple[LogRow, StoredEvent]:
    """Insert a log row (and its bodies) inside an open transaction; ``linked``: its
    message was stored by an earlier transaction, and may have been deleted since."""
    update: dict[str, Any] = {"created_at": tx.now, "request_delta": None}
    if anchor_newest:
        update["message_id"] = newest_top_level_id(tx.conn, tx.thread_id)
    stored = copy_with(row, update)
    tx.conn.defer(
        *(_INSERT_LINKED if linked else _INSERT).bind(
            (tx.thread_id, tx.next_log_seq(), *log_values(stored), inline_response(stored))
        )
    )
    insert_bodies(tx, row)
    return stored, tx.event("log", stored.id)


def restore_log_in(tx: Tx, row: LogRow) -> None:
    """Insert an imported log row (and its bodies) as it is, ``created_at`` included
    (spec 21), inside an open transaction; no event."""
    stored = copy_with(row, {"request_delta": None})
    tx.conn.execute(
        *_INSERT.bind(
            (tx.thread_id, tx.next_log_seq(), *log_values(stored), inline_response(stored))
        )
    )
    insert_bodies(tx, stored)


def get_log(conn: Conn, thread_id: str, log_id: str) -> LogRow | None:
    row = conn.execute(
        f"SELECT {LOG_SELECT} WHERE l.id = ? AND l.thread_id = ?", (log_id, thread_id)
    ).fetchone()
    return log_from_row(row, RequestReader(conn).text) if row else None


def list_logs(
    conn: Conn, thread_id: str, limit: int | None, offset: int, kind: str | None
) -> list[LogRow]:
    sql = f"SELECT {LOG_SELECT} WHERE l.thread_id = ?"
    params: list[Any] = [thread_id]
    if kind is not None:
        sql += " AND l.kind = ?"
        params.append(kind)
    sql += " ORDER BY l.created_at, l.lseq LIMIT ? OFFSET ?"
    params.extend((conn.sql.no_limit if limit is None else limit, offset))
    rebuild = RequestReader(conn).text  # one per call: the rows of a chain share work
    return [log_from_row(r, rebuild) for r in conn.execute(sql, params)]


_LLM_SUMS = (
    "COALESCE(SUM(cost_total), 0), COALESCE(SUM(cost_input), 0), COALESCE(SUM(cost_cached), 0),"
    " COALESCE(SUM(cost_output), 0), COALESCE(SUM(cost_router_fee), 0), COUNT(*),"
    " COUNT(DISTINCT message_id), COUNT(*) - COUNT(cost_total)"
)
"""Sums over LLM rows, priced or not (a request without a price adds no cost but counts)."""


def _sums(values: Sequence[Any]) -> CostSums:
    return CostSums(
        llm_cost=float(values[0]),
        input_cost=float(values[1]),
        cached_cost=float(values[2]),
        output_cost=float(values[3]),
        router_fee_cost=float(values[4]),
        request_count=int(values[5]),
        message_count=int(values[6]),
        unpriced_count=int(values[7]),
    )


def cost_summary(conn: Conn, thread_ids: Sequence[str]) -> CostSummary:
    summary = CostSummary()
    ids = list(dict.fromkeys(thread_ids))
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(
            f"SELECT thread_id, {_LLM_SUMS} FROM logs WHERE thread_id IN ({marks})"
            " AND kind IS NULL GROUP BY thread_id",
            chunk,
        ):
            summary.threads[row[0]] = _sums(row[1:])
        for thread_id, app_cost in conn.execute(
            f"SELECT thread_id, SUM(app_cost) FROM logs WHERE thread_id IN ({marks})"
            " AND kind = 'app' AND app_cost IS NOT NULL GROUP BY thread_id",
            chunk,
        ):
            summary.threads.setdefault(thread_id, CostSums()).app_cost = float(app_cost)
        for row in conn.execute(
            f"SELECT COALESCE(model_name, model, 'unknown') AS m, {_LLM_SUMS} FROM logs"
            f" WHERE thread_id IN ({marks}) AND kind IS NULL GROUP BY m",
            chunk,
        ):
            sums = _sums(row[1:])
            into = summary.models.setdefault(row[0], CostSums())
            into.llm_cost += sums.llm_cost
            into.input_cost += sums.input_cost
            into.cached_cost += sums.cached_cost
            into.output_cost += sums.output_cost
            into.router_fee_cost += sums.router_fee_cost
            into.request_count += sums.request_count
            into.unpriced_count += sums.unpriced_count
    return summary
