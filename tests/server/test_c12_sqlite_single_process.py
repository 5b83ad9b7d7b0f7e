"""Spec 12 §12.1 rule 4 and §12.6.5: an SQLite file is run by one process at a time.

A Runtime's start-up recovery settles every ``running`` thread as lost, so a second process
on the same file would end the live runs of the first: the process that runs a file's
threads holds ``<file>.lock``, and a second one is refused, naming the holder's pid. The
lock goes with its holder however it exits, so a killed server restarts on its file and
recovers it before serving.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_serve import LISTENING, free_port, serve_command, spawn_server

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.errors import InvalidArgument, StoreLocked
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.server.settings import ServerSettings
from threadloom.store.sqlite.store import SqliteStore

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="uses POSIX signals"),
    pytest.mark.sqlite_only,
]

# A project whose model holds a request that says "hold" for ten minutes and answers any
# other at once: a run can be caught mid-request, and the turn after a restart completes.
PROJECT = {
    "models/models.py": """
        from threadloom.define import Model
        from threadloom.providers.scripted import Reply, ScriptedProvider

        def answer(request):
            last = request.messages[-1].text
            if "hold" in last:
                return Reply.text("never sent", delay=600)
            return Reply.text(f"answered: {last}")

        gate = Model(name="gate", provider=ScriptedProvider(answer), model="gate-1")
    """,
    "prompts/prompts.py": """
        from threadloom.define import Prompt

        chat = Prompt(name="chat", model="gate", system="You answer.")
    """,
    "agents/agents.py": """
        from threadloom import Agent, Side

        gated = Agent(name="gated", side_a=Side(prompt="chat", label="Agent"),
                      side_b=Side(label="User"))
    """,
}


def write_project(root: Path) -> Path:
    for name, text in PROJECT.items():
        path = root / "project" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root / "project"


@contextmanager
def server(project: Path, db: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A ``threadloom serve`` child on ``db``; killed at the end if it is still running."""
    proc, base = spawn_server(project, db)
    try:
        yield proc, base
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def definitions() -> Definitions:
    return Definitions().add(
        Model(name="M", provider=ScriptedProvider([Reply.text("hi")]), model="m"),
        Prompt(name="P", model="M", system="s"),
        Agent(name="chat", side_a=Side(prompt="P", label="A"), side_b=Side(label="B")),
    )


async def test_a_second_runtime_on_the_file_is_refused_until_the_first_closes(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    first = await Runtime.open(str(db), definitions=definitions())
    try:
        with pytest.raises(StoreLocked) as refused:
            await Runtime.open(str(db), definitions=definitions())
        assert refused.value.pid == os.getpid()
        assert str(db) in str(refused.value) and f"pid {os.getpid()}" in str(refused.value)
        assert (tmp_path / "t.db.lock").read_text().strip() == str(os.getpid())
        # the refused open changed nothing: the first runtime still runs threads
        state = await first.create_thread(agent_id="chat")
        await first.send_message(state.thread_id, "hello")
        await first.wait_idle(state.thread_id)
        page = await state.get_messages()
        assert sorted(m.content for m in page.messages) == ["hello", "hi"]
    finally:
        await first.close()
    again = await Runtime.open(str(db), definitions=definitions())
    try:
        assert (await again.thread(state.thread_id)).thread_id == state.thread_id
    finally:
        await again.close()


async def test_a_shared_runtime_takes_no_lock_and_leaves_live_runs_alone(tmp_path: Path) -> None:
    """``exclusive=False`` (tools and tests that only add to threads): it opens beside the
    runtime that runs the file and neither settles that runtime's live run nor starts one."""
    db = tmp_path / "t.db"
    held = ScriptedProvider([Reply.text("slow", delay=0.5)])
    defs = Definitions().add(
        Model(name="M", provider=held, model="m"),
        Prompt(name="P", model="M", system="s"),
        Agent(name="chat", side_a=Side(prompt="P", label="A"), side_b=Side(label="B")),
    )
    first = await Runtime.open(str(db), definitions=defs)
    try:
        state = await first.create_thread(agent_id="chat")
        await first.send_message(state.thread_id, "hello")
        shared = await Runtime.open(str(db), exclusive=False)
        try:
            seen = await shared.thread(state.thread_id)
            assert (await seen.status()).state == "running"  # not settled as lost
            await seen.queue_message(role="user", content="from a tool")
        finally:
            await shared.close()
        await first.wait_idle(state.thread_id, timeout=10)
        assert (await state.status()).reason != "execution_lost"
        page = await state.get_messages(order="asc")
        assert [m.content for m in page.messages][:3] == ["hello", "slow", "from a tool"]
    finally:
        await first.close()


async def test_a_shared_runtime_never_starts_a_run(tmp_path: Path) -> None:
    """A send through an ``exclusive=False`` runtime to an idle thread only queues: the
    thread stays idle, ``continue_thread`` refuses, and the owner's next send delivers both
    messages, in order, in one run."""
    db = tmp_path / "t.db"
    owner = await Runtime.open(str(db), definitions=definitions())
    try:
        state = await owner.create_thread(agent_id="chat")
        shared = await Runtime.open(str(db), definitions=definitions(), exclusive=False)
        try:
            await shared.send_message(state.thread_id, "queued elsewhere")
            seen = await shared.thread(state.thread_id)
            assert (await seen.status()).state == "idle"
            assert [e.content for e in await shared.store.list_queue(state.thread_id)] == [
                "queued elsewhere"
            ]
            with pytest.raises(InvalidArgument, match="exclusive=False"):
                await shared.continue_thread(state.thread_id)
        finally:
            await shared.close()
        await owner.send_message(state.thread_id, "and here")
        await owner.wait_idle(state.thread_id, timeout=10)
        page = await state.get_messages(order="asc")
        assert [m.content for m in page.messages] == ["queued elsewhere", "and here", "hi"]
    finally:
        await owner.close()


HOLDER = """
import asyncio, sys
from threadloom.store.sqlite.store import SqliteStore

async def main():
    store = await SqliteStore.open(sys.argv[1])
    await store.claim_runner()
    print("locked", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


async def test_the_lock_names_another_process_and_goes_with_it_when_killed(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreLocked) as refused:
            await Runtime.open(str(db), definitions=definitions())
        assert refused.value.pid == holder.pid
    finally:
        holder.kill()
        holder.wait(timeout=30)
    runtime = await Runtime.open(str(db), definitions=definitions())  # no stale lock
    await runtime.close()


def test_c12_019_second_serve_on_the_sqlite_file_exits_2_naming_the_first_pid(
    tmp_path: Path,
) -> None:
    project = write_project(tmp_path)
    db = tmp_path / "serve.db"
    with server(project, db) as (first, base):
        second = subprocess.run(
            serve_command(project, db, free_port(), "info"),
            env={k: v for k, v in os.environ.items() if not k.startswith("THREADLOOM_")},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"pid {first.pid}" in second.stderr
        assert str(db) in second.stderr
        assert not any(line in second.stdout + second.stderr for line in LISTENING)
        assert "Traceback" not in second.stderr
        # the first server is untouched
        assert httpx.get(f"{base}/api/health").status_code == 200


def wait_for(check: Any, what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def messages(base: str, thread: str) -> list[dict[str, Any]]:
    page = httpx.get(f"{base}/api/threads/{thread}/messages?order=asc").json()
    found: list[dict[str, Any]] = page["messages"]
    return found


def status(base: str, thread: str) -> tuple[str, str | None]:
    now = httpx.get(f"{base}/api/threads/{thread}").json()["status"]
    return now["state"], now["reason"]


async def test_c12_020_killed_sqlite_server_recovers_before_serving_and_delivers_the_queue(
    tmp_path: Path,
) -> None:
    project = write_project(tmp_path)
    db = tmp_path / "serve.db"
    with server(project, db) as (proc, base):
        thread = httpx.post(f"{base}/api/threads", json={"agent_id": "gated"}).json()["threadId"]
        sent = httpx.post(f"{base}/api/threads/{thread}/messages", json={"content": "hold"})
        assert sent.status_code == 202
        wait_for(
            lambda: any(m["status"] == "pending" for m in messages(base, thread)),
            "the model request in flight",
        )
        queued = httpx.post(
            f"{base}/api/threads/{thread}/messages", json={"content": "after the crash"}
        )
        assert queued.status_code == 202 and status(base, thread)[0] == "running"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    with server(project, db) as (_, base):
        wait_for(lambda: status(base, thread) == ("idle", "stop_on_response"), "the new turn")
        stored = messages(base, thread)
        assert [(m["role"], m["content"], m["status"]) for m in stored] == [
            ("user", "hold", "completed"),
            ("assistant", None, "failed"),
            ("user", "after the crash", "completed"),
            ("assistant", "answered: after the crash", "completed"),
        ]
    # the thread's durable events, in order: the lost run settled before the queued
    # message started the next one (recovery runs before the server listens)
    store = await SqliteStore.open(str(db))
    try:
        events = await store.read_events(thread, 0)
    finally:
        await store.close()
    pending_id = stored[1]["id"]
    queued_id = stored[2]["id"]
    order = [(e.kind, e.entity_id) for e in events]
    statuses = [i for i, (kind, _) in enumerate(order) if kind == "status"]
    delivered = max(i for i, (_, entity) in enumerate(order) if entity == queued_id)
    failed = max(i for i, (_, entity) in enumerate(order) if entity == pending_id)
    # running; the settlement after the pending message failed; the new turn's running,
    # which delivers the queued message; its end
    assert len(statuses) == 4
    assert failed < statuses[1] < statuses[2] < delivered < statuses[3]


def test_c12_021_liveness_timers_that_break_the_30_s_bound_are_refused(tmp_path: Path) -> None:
    """§12.6.1: TTL + sweep + 3 s ≥ 30 s, or a heartbeat above a third of the TTL, refuse
    start-up (exit code 2, before listening); the defaults and a valid choice start."""
    from test_serve import serve_refused

    refused = [
        ({"THREADLOOM_NODE_TTL_SECONDS": "20", "THREADLOOM_SWEEP_SECONDS": "10"}, "under 30 s"),
        (
            {"THREADLOOM_NODE_HEARTBEAT_SECONDS": "6", "THREADLOOM_NODE_TTL_SECONDS": "15"},
            "a third of",
        ),
        ({"THREADLOOM_SWEEP_SECONDS": "soon"}, "THREADLOOM_SWEEP_SECONDS must be"),
        ({"THREADLOOM_DRAIN_SECONDS": "-1"}, "THREADLOOM_DRAIN_SECONDS must be"),
        ({"THREADLOOM_CHUNK_COALESCE_MS": "-5"}, "THREADLOOM_CHUNK_COALESCE_MS must be"),
        ({"THREADLOOM_CHUNK_COALESCE_MS": "soon"}, "THREADLOOM_CHUNK_COALESCE_MS must be"),
    ]
    for env, says in refused:
        done = serve_refused(tmp_path, **env)
        assert done.returncode == 2, (env, done.stdout + done.stderr)
        assert says in done.stderr, (env, done.stderr)
        assert not any(line in done.stdout + done.stderr for line in LISTENING)
    settings = ServerSettings.from_env(
        {
            "THREADLOOM_NODE_TTL_SECONDS": "12",
            "THREADLOOM_SWEEP_SECONDS": "4",
            "THREADLOOM_NODE_HEARTBEAT_SECONDS": "4",
            "THREADLOOM_DRAIN_SECONDS": "0",
            "THREADLOOM_CHUNK_COALESCE_MS": "0",
        }
    )
    assert (settings.node_ttl_s, settings.sweep_s, settings.node_heartbeat_s) == (12, 4, 4)
    assert settings.drain_seconds == 0
    assert settings.node_timings().chunk_coalesce_ms == 0
    assert ServerSettings.from_env({}).node_timings().chunk_coalesce_ms == 50


async def test_sigterm_aborts_a_running_step_after_the_drain_seconds(tmp_path: Path) -> None:
    """The single-node part of spec 12 §12.6.4: with ``THREADLOOM_DRAIN_SECONDS=1`` a
    SIGTERM lets the held step run for a second, then the server settles it ``failed`` /
    ``aborted`` itself (not ``execution_lost``: nothing is left for a recovery) and exits;
    the message queued behind it is delivered after the restart."""
    project = write_project(tmp_path)
    db = tmp_path / "serve.db"
    proc, base = spawn_server(project, db, THREADLOOM_DRAIN_SECONDS="1")
    try:
        thread = httpx.post(f"{base}/api/threads", json={"agent_id": "gated"}).json()["threadId"]
        httpx.post(f"{base}/api/threads/{thread}/messages", json={"content": "hold"})
        wait_for(
            lambda: any(m["status"] == "pending" for m in messages(base, thread)),
            "the model request in flight",
        )
        queued = httpx.post(f"{base}/api/threads/{thread}/messages", json={"content": "next"})
        assert queued.status_code == 202
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode in (0, -signal.SIGTERM) and b"Traceback" not in output
    assert 1.0 <= took < 10, took

    store = await SqliteStore.open(str(db))
    try:
        row = await store.get_thread(thread)
        assert row is not None and (row.status.state, row.status.reason) == ("failed", "aborted")
        assert [e.content for e in await store.list_queue(thread)] == ["next"]
    finally:
        await store.close()
    with server(project, db) as (_, base):
        wait_for(lambda: status(base, thread) == ("idle", "stop_on_response"), "the next turn")
        contents = [(m["role"], m["content"]) for m in messages(base, thread)]
        assert contents[-2:] == [("user", "next"), ("assistant", "answered: next")]
