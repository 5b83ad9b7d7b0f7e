"""Spec 01 §1.11.2 rule 6: a turn's writes do not read the thread's history. On PostgreSQL
the update of an LLM log row finds the row by its key; offered ``thread_id = ?`` beside
the key, the planner chose the index led by ``thread_id`` (``logs_order``) while the table
was small and never analyzed, and the plan each connection kept read every log row of the
thread at every update.

A real ``Runtime`` on a new PostgreSQL schema (autovacuum does not analyze it within the
test); the server's own counters of index reads (``pg_stat_user_indexes``) are the
measure."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from scripted_chat import chat_definitions
from threadloom import Runtime

pytestmark = pytest.mark.postgres_only

TURNS = 40


def _index_reads(db_url: str) -> dict[str, int]:
    """Rows read through each index of ``logs`` in the test's schema, as the server has
    counted them so far."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT indexrelname, idx_tup_read FROM pg_stat_user_indexes"
            " WHERE schemaname = current_schema() AND relname = 'logs'"
        ).fetchall()
    return {str(name): int(count) for name, count in rows}


async def test_c01_064_log_rows_are_updated_through_their_key(db_url: str) -> None:
    rt = await Runtime.open(db_url, definitions=chat_definitions())
    try:
        state = await rt.create_thread("chat")
        for i in range(TURNS):
            await rt.send_message(state.thread_id, f"turn {i}")
            await rt.wait_idle(state.thread_id, timeout=10)
    finally:
        await rt.close()  # the connections end: the server counts their reads
    llm_rows = 2 * TURNS  # the tool call's request and the answer's
    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute("SELECT COUNT(*) FROM logs WHERE endpoint IS NOT NULL").fetchone()
    assert row == (llm_rows,)
    reads: dict[str, int] = {}
    for _ in range(50):  # a closed connection's counts reach the view shortly after
        reads = _index_reads(db_url)
        if reads.get("logs_pkey", 0) >= TURNS:
            break
        await asyncio.sleep(0.1)
    assert reads.get("logs_pkey", 0) >= TURNS  # at least one update by key a turn
    # through the thread's index, one row a turn at most (a full read of the thread's
    # rows at each update would be about TURNS * TURNS)
    assert reads.get("logs_order", 0) < TURNS
