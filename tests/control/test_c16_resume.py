"""Resuming a lost run (spec 16), on both stores: the crash matrix.

A real child process (``resume_child.py``) drives a thread of an agent with
``on_lost="resume"`` into a state, is killed with SIGKILL, and a fresh Runtime opens the
same store: its start-up recovery settles the lost run ``failed``/``execution_lost`` and
resumes it. Each test checks the final messages, the side effects (each tool appends a
line to a file the test reads: a non-idempotent one at most once) and the statuses the
restarted runtime streamed. On PostgreSQL the killed child's node must be dead (its
heartbeat older than the TTL) before a restart takes its runs as lost; one test has a live
node's sweeper find and resume the run instead (spec 12 §12.6).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from pg_support import NODE_TTL_S
from threadloom import Agent, Runtime, Side
from threadloom.providers.script import Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.records import (
    Approval,
    ApprovalDecision,
    Message,
    ThreadStatus,
    ToolCall,
    ToolCallFunction,
    arguments_hash,
    encode_tool_calls,
    new_id,
)
from threadloom.store import open_store
from threadloom.store.base import LOST_RUN
from threadloom.thread import hub as hub_module
from threadloom.thread.events import EventBus

sys.path.insert(0, str(Path(__file__).parent))
import resume_child

sys.path.remove(str(Path(__file__).parent))

CHILD = Path(__file__).with_name("resume_child.py")
INTERRUPTED = (
    "Failed to execute tool: Interrupted: the runtime stopped while this call ran; it may or"
    " may not have taken effect."
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uses SIGKILL")


class StatusBus(EventBus):
    """The runtime's event bus with a subscription to every thread's statuses from its
    start: what a client watching the thread saw, recovery's statuses included."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses = self.subscribe(None, kinds=["status"], max_queue=10_000)

    def seen(self, thread_id: str) -> list[tuple[str, str | None]]:
        out = []
        for event in self.statuses.drain():
            if event.thread_id == thread_id:
                status = event.data["status"]
                out.append((status["state"], status["reason"]))
        return out


@dataclass
class Crash:
    db_url: str
    effects: Path

    async def child(
        self, scenario: str, max_resumes: int = 3, on_lost: str = "resume", thread_id: str = ""
    ) -> dict[str, Any]:
        """Run the child until READY, then SIGKILL it; returns the READY data."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(CHILD),
            self.db_url,
            str(self.effects),
            scenario,
            str(max_resumes),
            on_lost,
            *([thread_id] if thread_id else []),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            ready = await self._ready(proc)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGKILL)
            async with asyncio.timeout(10):
                await proc.wait()
        assert proc.returncode == -signal.SIGKILL
        if self.db_url.startswith("postgresql://"):  # the node must be dead to be swept
            await asyncio.sleep(NODE_TTL_S + 0.3)
        return ready

    async def _ready(self, proc: asyncio.subprocess.Process) -> dict[str, Any]:
        assert proc.stdout is not None
        async with asyncio.timeout(30):
            while True:
                raw = await proc.stdout.readline()
                if not raw:
                    err = await proc.stderr.read() if proc.stderr is not None else b""
                    raise AssertionError(f"child ended before READY: {err.decode()[-3000:]}")
                text = raw.decode().strip()
                if text.startswith("READY "):
                    data: dict[str, Any] = json.loads(text[6:])
                    return data

    def effect_lines(self) -> list[str]:
        if not self.effects.exists():
            return []
        return self.effects.read_text(encoding="utf-8").splitlines()


@pytest.fixture
def crash(db_url: str, tmp_path: Path) -> Crash:
    return Crash(db_url, tmp_path / "effects.txt")


@dataclass
class Restarted:
    runtime: Runtime
    provider: ScriptedProvider
    bus: StatusBus


@pytest.fixture
async def restart(
    crash: Crash, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[..., Any]]:
    """Open a fresh Runtime on the crashed store (its recovery runs in ``open``)."""
    opened: list[Runtime] = []
    monkeypatch.setattr(hub_module, "EventBus", StatusBus)
    resume_child.EFFECTS["file"] = crash.effects

    async def make(script: Any = None, **agent: Any) -> Restarted:
        provider = ScriptedProvider(script)
        runtime = await Runtime.open(
            crash.db_url, definitions=resume_child.definitions(provider, **agent)
        )
        opened.append(runtime)
        bus = runtime.events
        assert isinstance(bus, StatusBus)
        return Restarted(runtime, provider, bus)

    yield make
    for runtime in opened:
        await runtime.close(drain=0)
    resume_child.EFFECTS.pop("file", None)


async def _settled(runtime: Runtime, tid: str, timeout: float = 10.0) -> tuple[str, str | None]:
    """Wait until the thread's run is over here; its status then."""
    state = await runtime.thread(tid)
    async with asyncio.timeout(timeout):
        while True:
            await runtime.wait_idle(tid, timeout=timeout)
            status = await state.status()
            if status.state != "running":
                return status.state, status.reason
            await asyncio.sleep(0.01)


async def _messages(runtime: Runtime, tid: str) -> list[tuple[str, str, Any]]:
    page = await (await runtime.thread(tid)).get_messages(order="asc", limit=None)
    return [(m.role, m.status, m.content or m.tool_calls) for m in page.messages]


def _calls(value: Any) -> list[str]:
    """The ids of the calls of a stored ``tool_calls`` text."""
    return [c["id"] for c in json.loads(value)]


LOST = ("failed", "execution_lost")
RESUMED = [LOST, ("running", None), ("idle", "stop_on_response")]


# -- the crash matrix ------------------------------------------------------------------


async def test_c16_001_killed_during_a_model_call(crash: Crash, restart: Any) -> None:
    """C16-001 (a): killed while the model's answer is awaited → after restart the lost
    run is settled ``failed``/``execution_lost`` (its pending message failed), a run
    resumes from the stored history, asks the model again and ends normally."""
    tid = (await crash.child("model"))["thread_id"]
    rt = await restart([Reply.text("answer")])
    assert await _settled(rt.runtime, tid) == ("idle", "stop_on_response")
    assert await _messages(rt.runtime, tid) == [
        ("user", "completed", "go"),
        ("assistant", "failed", None),
        ("assistant", "completed", "answer"),
    ]
    (request,) = rt.provider.requests
    assert [(m.role, m.text) for m in request.messages] == [
        ("system", "You are P."),
        ("user", "go"),
    ]
    assert rt.bus.seen(tid) == RESUMED
    assert crash.effect_lines() == []


async def test_c16_002_killed_while_a_non_idempotent_tool_runs(crash: Crash, restart: Any) -> None:
    """C16-002 (b): one response called ``charge`` twice; the first finished (result
    stored), the second was running when the process was killed → after restart the first
    is not run again, the second gets the ``Interrupted`` error result (not run again), and
    the model, asked with both results, decides. Each side effect happened once."""
    tid = (await crash.child("tool"))["thread_id"]
    rt = await restart([Reply.text("checked")])
    assert await _settled(rt.runtime, tid) == ("idle", "stop_on_response")
    rows = await _messages(rt.runtime, tid)
    assert rows[0] == ("user", "completed", "go")
    assert rows[1][:2] == ("assistant", "completed")
    assert _calls(rows[1][2]) == ["call_c1", "call_c2"]
    assert rows[2:] == [
        ("tool", "completed", "charged 1"),
        ("tool", "completed", INTERRUPTED),
        ("assistant", "completed", "checked"),
    ]
    assert crash.effect_lines() == ["charge 1", "charge 2"]
    (request,) = rt.provider.requests
    assert [m.role for m in request.messages] == ["system", "user", "assistant", "tool", "tool"]
    assert rt.bus.seen(tid) == RESUMED


async def test_c16_003_killed_while_an_idempotent_tool_runs(crash: Crash, restart: Any) -> None:
    """C16-003 (c): killed while ``fetch`` (``idempotent=True``) ran → after restart it runs
    again, its result is stored once, and the run goes on with a model request."""
    tid = (await crash.child("idempotent"))["thread_id"]
    rt = await restart([Reply.text("fetched it")])
    assert await _settled(rt.runtime, tid) == ("idle", "stop_on_response")
    rows = await _messages(rt.runtime, tid)
    assert [r[:2] for r in rows] == [
        ("user", "completed"),
        ("assistant", "completed"),
        ("tool", "completed"),
        ("assistant", "completed"),
    ]
    assert rows[2][2] == "fetched a" and rows[3][2] == "fetched it"
    assert crash.effect_lines() == ["fetch a", "fetch a"]  # it started twice: idempotent
    assert rt.bus.seen(tid) == RESUMED


async def test_c16_004_killed_between_a_result_and_the_next_model_call(
    crash: Crash, restart: Any
) -> None:
    """C16-004 (d): killed after the tool's result was stored, before the next model
    request → after restart no call is open, nothing runs again, and the run goes on with
    the model request the lost run did not make."""
    tid = (await crash.child("between"))["thread_id"]
    rt = await restart([Reply.text("done")])
    assert await _settled(rt.runtime, tid) == ("idle", "stop_on_response")
    rows = await _messages(rt.runtime, tid)
    assert [r[:2] for r in rows] == [
        ("user", "completed"),
        ("assistant", "completed"),
        ("tool", "completed"),
        ("assistant", "completed"),
    ]
    assert rows[2][2] == "charged 3" and rows[3][2] == "done"
    assert crash.effect_lines() == ["charge 3"]
    (request,) = rt.provider.requests
    assert [m.role for m in request.messages] == ["system", "user", "assistant", "tool"]
    assert rt.bus.seen(tid) == RESUMED


async def test_c16_005_killed_while_parked_for_approval(crash: Crash, restart: Any) -> None:
    """C16-005 (e): killed while the run was parked for approval → nothing was running, so
    nothing is settled or resumed: after restart the thread is still ``idle``/
    ``awaiting_approval``; approving runs the tool once and the run goes on."""
    tid = (await crash.child("parked"))["thread_id"]
    rt = await restart([Reply.text("paid")])
    state = await rt.runtime.thread(tid)
    assert await _settled(rt.runtime, tid) == ("idle", "awaiting_approval")
    assert rt.bus.seen(tid) == []
    (approval,) = await state.get_approvals()
    assert approval.state == "pending"
    await state.decide_approval(
        "call_pay", approve=True, arguments_hash=approval.arguments_hash, decided_by="ann"
    )
    assert await _settled(rt.runtime, tid) == ("idle", "stop_on_response")
    rows = await _messages(rt.runtime, tid)
    assert rows[2:] == [
        ("tool", "completed", "paid 50 to bob"),
        ("assistant", "completed", "paid"),
    ]
    assert crash.effect_lines() == ["pay 50 bob"]
    assert rt.bus.seen(tid) == [("running", None), ("idle", "stop_on_response")]


async def test_c16_006_a_pending_approval_parks_the_resumed_run(crash: Crash, restart: Any) -> None:
    """C16-006: one response called ``charge`` (ran, killed meanwhile) and ``pay`` (parked
    pending) → the resumed run answers ``charge`` ``Interrupted`` and parks
    ``idle``/``awaiting_approval``; approving then runs ``pay`` once."""
    tid = (await crash.child("parked_running"))["thread_id"]
    rt = await restart([Reply.text("done")])
    state = await rt.runtime.thread(tid)
    assert await _settled(rt.runtime, tid) == ("idle", "awaiting_approval")
    assert rt.bus.seen(tid) == [LOST, ("running", None), ("idle", "awaiting_approval")]
    assert rt.provider.requests == []
    (approval,) = await state.get_approvals()
    await state.decide_approval(
        "call_pay", approve=True, arguments_hash=approval.arguments_hash, decided_by="ann"
    )
    assert await _settled(rt.runtime, tid) == ("idle", "stop_on_response")
    rows = await _messages(rt.runtime, tid)
    assert rows[2:] == [
        ("tool", "completed", INTERRUPTED),
        ("tool", "completed", "paid 50 to bob"),
        ("assistant", "completed", "done"),
    ]
    assert crash.effect_lines() == ["charge 4", "pay 50 bob"]


async def test_c16_007_an_approved_call_that_had_not_started_runs_once(
    crash: Crash, restart: Any, db_url: str
) -> None:
    """C16-007: as C16-006, but ``pay`` was approved while no process ran the thread (a
    decision written to the store) → the resumed run answers ``charge`` ``Interrupted``,
    runs ``pay`` once (its approval consumed) and goes on with a model request."""
    tid = (await crash.child("parked_running"))["thread_id"]
    store = await open_store(db_url)
    try:
        (approval,) = await store.list_approvals(tid)
        await store.decide_approval(
            tid,
            "call_pay",
            ApprovalDecision(
                approve=True, arguments_hash=approval.arguments_hash, decided_by="ann"
            ),
        )
    finally:
        await store.close()
    rt = await restart([Reply.text("done")])
    assert await _settled(rt.runtime, tid) == ("idle", "stop_on_response")
    rows = await _messages(rt.runtime, tid)
    assert rows[2:] == [
        ("tool", "completed", INTERRUPTED),
        ("tool", "completed", "paid 50 to bob"),
        ("assistant", "completed", "done"),
    ]
    assert crash.effect_lines() == ["charge 4", "pay 50 bob"]
    (after,) = await (await rt.runtime.thread(tid)).get_approvals()
    assert after.state == "approved" and after.started_at is not None
    assert rt.bus.seen(tid) == RESUMED


async def test_c16_008_resumes_in_a_row_are_bounded(crash: Crash, restart: Any) -> None:
    """C16-008: ``max_resumes=1``: the run is lost, resumed by the next process, lost again
    with it → the third process settles it for good: ``failed``/``execution_lost`` with the
    error ``ResumesExhausted``, and no run starts (no model request)."""
    tid = (await crash.child("model", max_resumes=1))["thread_id"]
    await crash.child("recover", max_resumes=1)  # resumes the run, killed during its request
    rt = await restart([Reply.text("unused")], max_resumes=1)
    state = await rt.runtime.thread(tid)
    status = await state.status()
    assert (status.state, status.reason) == LOST
    assert status.error is not None and status.error.type == "ResumesExhausted"
    assert "max_resumes 1" in status.error.message
    await asyncio.sleep(0.2)
    assert rt.provider.requests == [] and not rt.runtime.running(tid)
    assert rt.bus.seen(tid) == [LOST]
    assert await _messages(rt.runtime, tid) == [
        ("user", "completed", "go"),
        ("assistant", "failed", None),
        ("assistant", "failed", None),
    ]


async def test_c16_009_a_resumed_run_that_ends_clears_the_count(crash: Crash, restart: Any) -> None:
    """C16-009: the count of resumes in a row goes back to 0 when a resumed run ends: with
    ``max_resumes=1``, a thread resumed once whose resumed run ended normally is resumed
    again when a later run of it is lost."""
    tid = (await crash.child("model", max_resumes=1))["thread_id"]
    first = await restart([Reply.text("first answer")], max_resumes=1)
    assert await _settled(first.runtime, tid) == ("idle", "stop_on_response")
    await first.runtime.close(drain=0)
    await crash.child("again", max_resumes=1, thread_id=tid)  # the next run is lost too
    rt = await restart([Reply.text("second answer")], max_resumes=1)
    assert await _settled(rt.runtime, tid) == ("idle", "stop_on_response")
    rows = await _messages(rt.runtime, tid)
    assert rows[3:] == [
        ("user", "completed", "again"),
        ("assistant", "failed", None),
        ("assistant", "completed", "second answer"),
    ]
    assert rt.bus.seen(tid) == RESUMED


@pytest.mark.postgres_only
async def test_c16_012_a_live_nodes_sweeper_resumes_the_run(
    crash: Crash, restart: Any, backend: str
) -> None:
    """C16-012 (PostgreSQL, spec 12 §12.6): a node is live while another is killed during
    a non-idempotent tool → its sweeper settles the lost run once the dead node's TTL has
    passed and resumes it there, as start-up recovery does: the finished call not run
    again, the running one answered ``Interrupted``, the model asked, statuses streamed."""
    rt = await restart([Reply.text("checked")])
    tid = (await crash.child("tool"))["thread_id"]
    state = await rt.runtime.thread(tid)
    async with asyncio.timeout(20):  # settled, resumed, ended: polled (no fixed sleep)
        while (await state.status()).reason != "stop_on_response":
            await asyncio.sleep(0.05)
    rows = await _messages(rt.runtime, tid)
    assert rows[2:] == [
        ("tool", "completed", "charged 1"),
        ("tool", "completed", INTERRUPTED),
        ("assistant", "completed", "checked"),
    ]
    assert crash.effect_lines() == ["charge 1", "charge 2"]
    assert len(rt.provider.requests) == 1
    assert rt.bus.seen(tid)[-3:] == RESUMED


async def _settled_to_resume(store: Any, tid: str) -> None:
    """What a process leaves when it settled a lost run to be resumed and stopped before
    it started the resumed run: a model message with an open ``charge`` call whose start
    is recorded, then the resumable settlement."""
    await store.set_status(tid, ThreadStatus(state="running", since=store.clock(), reason=None))
    call = ToolCall(id="call_open", function=ToolCallFunction(name="charge", arguments="{}"))
    message = Message(
        id=new_id(), role="assistant", tool_calls=encode_tool_calls([call]), prompt="P"
    )
    await store.insert_message(tid, message)
    await store.record_tool_starts(tid, message.id, [call])
    settled = await store.settle_resumable(tid, replace(LOST_RUN, resume_limit=3))
    assert settled.resume == 1


async def test_c16_013_a_resume_not_started_is_started_at_the_next_start_up(
    crash: Crash, restart: Any
) -> None:
    """C16-013: a process settled a lost run to be resumed and stopped before it started
    the resumed run (the status is ``failed``, not ``running``) → the next start-up finds
    it (``Store.pending_resumes``) and resumes it: the started call ``Interrupted``, the
    model asked."""
    first = await restart([])
    tid = (await first.runtime.create_thread("chat")).thread_id
    await first.runtime.send_message(tid, "go")
    await first.runtime.wait_idle(tid, timeout=5)  # the script is empty: a failed run
    await _settled_to_resume(first.runtime.store, tid)
    await first.runtime.close(drain=0)
    rt = await restart([Reply.text("retried")])
    assert await _settled(rt.runtime, tid) == ("idle", "stop_on_response")
    rows = await _messages(rt.runtime, tid)
    assert rows[-2:] == [("tool", "completed", INTERRUPTED), ("assistant", "completed", "retried")]
    assert rt.bus.seen(tid) == [("running", None), ("idle", "stop_on_response")]
    assert await rt.runtime.store.pending_resumes() == []


async def test_c16_014_a_send_that_comes_first_starts_the_resumed_run(
    crash: Crash, restart: Any
) -> None:
    """C16-014: any start of a thread whose lost run waits to be resumed is the resumed
    run: a send that comes before it answers the open call first, then delivers the sent
    message, then asks the model (the tool result follows its call in the context)."""
    rt = await restart([Reply.text("hello")])
    tid = (await rt.runtime.create_thread("chat")).thread_id
    await _settled_to_resume(rt.runtime.store, tid)
    await rt.runtime.send_message(tid, "are you there?")
    assert await _settled(rt.runtime, tid) == ("idle", "stop_on_response")
    rows = await _messages(rt.runtime, tid)
    assert [(r[0], r[2]) for r in rows[1:]] == [
        ("tool", INTERRUPTED),
        ("user", "are you there?"),
        ("assistant", "hello"),
    ]
    (request,) = rt.provider.requests
    assert [m.role for m in request.messages] == ["system", "assistant", "tool", "user"]
    assert await rt.runtime.store.pending_resumes() == []


async def test_c16_015_a_run_lost_after_its_answer_was_stored_asks_nothing(
    crash: Crash, restart: Any
) -> None:
    """C16-015: a run lost after it stored its final answer and before it committed its
    end (side a of an ``ai_human`` agent, which stops on a response) → the resumed run
    makes no model request and ends ``idle``/``stop_on_response``."""
    first = await restart([])
    store = first.runtime.store
    tid = (await first.runtime.create_thread("chat")).thread_id
    await store.set_status(tid, ThreadStatus(state="running", since=store.clock(), reason=None))  # type: ignore[attr-defined]
    await store.insert_message(tid, Message(id=new_id(), role="user", content="hi"))
    answer = Message(id=new_id(), role="assistant", content="hello", prompt="P")
    await store.insert_message(tid, answer)
    assert (await store.settle_resumable(tid, replace(LOST_RUN, resume_limit=3))).resume == 1
    await first.runtime.close(drain=0)
    rt = await restart([Reply.text("unused")])
    assert await _settled(rt.runtime, tid) == ("idle", "stop_on_response")
    assert rt.provider.requests == []
    assert [(r[0], r[2]) for r in await _messages(rt.runtime, tid)] == [
        ("user", "hi"),
        ("assistant", "hello"),
    ]


async def test_c16_016_a_consumed_approval_is_not_run_again(crash: Crash, restart: Any) -> None:
    """C16-016: a run lost while an approved call ran (its approval consumed, no result)
    → the resumed run answers it ``Interrupted`` and never runs it again."""
    first = await restart([])
    store = first.runtime.store
    tid = (await first.runtime.create_thread("chat")).thread_id
    await store.set_status(tid, ThreadStatus(state="running", since=store.clock(), reason=None))  # type: ignore[attr-defined]
    arguments = {"amount": 50, "to": "bob"}
    call = ToolCall(
        id="call_pay", function=ToolCallFunction(name="pay", arguments=json.dumps(arguments))
    )
    message = Message(
        id=new_id(), role="assistant", tool_calls=encode_tool_calls([call]), prompt="P"
    )
    await store.insert_message(tid, message)
    shown = Approval(
        thread_id=tid,
        tool_call_id="call_pay",
        message_id=message.id,
        tool="pay",
        arguments=arguments,
        arguments_hash=arguments_hash(arguments),
        state="pending",
        requested_at=0,
    )
    await store.request_approvals(tid, [shown])
    decision = ApprovalDecision(approve=True, arguments_hash=shown.arguments_hash)
    await store.decide_approval(tid, "call_pay", decision)
    assert await store.consume_approval(tid, "call_pay") is not None  # it started
    assert (await store.settle_resumable(tid, replace(LOST_RUN, resume_limit=3))).resume == 1
    await first.runtime.close(drain=0)
    rt = await restart([Reply.text("checked")])
    assert await _settled(rt.runtime, tid) == ("idle", "stop_on_response")
    rows = await _messages(rt.runtime, tid)
    assert rows[-2:] == [("tool", "completed", INTERRUPTED), ("assistant", "completed", "checked")]
    assert crash.effect_lines() == []


# -- the default, and the definition ---------------------------------------------------


async def test_c16_010_settle_is_the_default_and_records_nothing(
    crash: Crash, restart: Any
) -> None:
    """C16-010: an agent with the default ``on_lost="settle"`` records no tool start and
    its lost run is settled as spec 04 §4.24 says: the open call answered ``Execution
    lost``, no run resumed."""
    tid = (await crash.child("tool", on_lost="settle"))["thread_id"]
    rt = await restart([Reply.text("unused")], on_lost="settle")
    assert rt.provider.requests == []
    assert rt.bus.seen(tid) == [LOST]
    rows = await _messages(rt.runtime, tid)
    assert rows[2:] == [
        ("tool", "completed", "charged 1"),
        (
            "tool",
            "completed",
            "Execution lost: the runtime restarted before this tool call finished.",
        ),
    ]
    assert await rt.runtime.store.tool_starts(tid) == {}


def test_c16_011_on_lost_and_max_resumes_are_validated() -> None:
    """C16-011: ``on_lost`` is ``settle`` (default) or ``resume``; ``max_resumes`` (default
    3) must be >= 1 (V12)."""
    agent = Agent(name="a", side_a=Side(prompt="P"))
    assert (agent.on_lost, agent.max_resumes) == ("settle", 3)
    with pytest.raises(ValueError):
        Agent(name="a", side_a=Side(prompt="P"), on_lost="retry")
    problems = Agent(name="a", side_a=Side(prompt="P"), max_resumes=0).self_problems()
    assert ("V12", 'Agent "a": max_resumes must be >= 1') in problems
