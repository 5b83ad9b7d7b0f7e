"""Migration 12: the cause of a failed run is kept with its status (``threads.status_error``,
spec 01 §1.7.4). A version-11 file opens, migrates, and reads every thread as before — a
failed status stored then has no error (rule 4) — and a failure written afterwards keeps
its error. Real ``Runtime`` on real SQLite files; raw SQL only to make the old file."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from sqlite_versions import make_version, populated_old_file, snapshot
from threadloom import Runtime
from threadloom.records import StatusError, ThreadStatus
from threadloom.store.sqlite import schema
from threadloom.store.sqlite.store import path_from_url

pytestmark = pytest.mark.sqlite_only  # about the SQLite store itself


async def test_c01_048_a_version_11_file_reads_failures_without_a_cause(tmp_path: Path) -> None:
    old_url, ids, before = await populated_old_file(
        tmp_path, lambda source, target: make_version(source, target, 11)
    )
    path = path_from_url(old_url)
    with closing(sqlite3.connect(path)) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(threads)")}
        assert "status_error" not in columns
        conn.execute(
            "UPDATE threads SET status_state = 'failed', status_reason = 'step_error' WHERE id = ?",
            (ids[0],),
        )
        conn.commit()

    rt = await Runtime.open(old_url)
    try:
        failed = await (await rt.thread(ids[0])).status()
        assert (failed.state, failed.reason, failed.error) == ("failed", "step_error", None)
        after = await snapshot(rt, ids[1:])
        assert {k: v for k, v in after.items() if k != "list"} == {
            k: v for k, v in before.items() if k not in ("list", ids[0])
        }
        cause = StatusError(type="KeyError", message="'x'", log_id=None)
        written = ThreadStatus.settled("step_error", rt.hub.clock(), cause)
        await rt.store.set_status(ids[1], written)
        assert await (await rt.thread(ids[1])).status() == written
    finally:
        await rt.close()

    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        versions = {r[0] for r in conn.execute("SELECT version FROM threadloom_migrations")}
        assert versions == {v for v, _, _ in schema.MIGRATIONS} and 12 in versions
        stored = conn.execute("SELECT status_error FROM threads WHERE id = ?", (ids[1],))
        assert stored.fetchone()[0] == (
            '{"type":"KeyError","message":"\'x\'","log_id":null,"code":null,"retryable":false}'
        )


def test_a_failed_status_always_has_a_cause() -> None:
    """§1.7.4 rule 1: a failed settlement without a known cause gets its reason's."""
    for reason in ("step_error", "repeated_tool_error", "execution_lost", "aborted"):
        status = ThreadStatus.settled(reason, 1)
        assert status.state == "failed" and status.error is not None
    assert ThreadStatus.settled("aborted", 1).error == StatusError(
        type="Shutdown", message="The runtime shut down before the run finished", retryable=True
    )
    assert ThreadStatus.settled("stop_on_response", 1).error is None
