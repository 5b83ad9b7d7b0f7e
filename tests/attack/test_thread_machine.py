"""Hypothesis stateful tests of one thread (issue 23, "Keep it attacked"): a
``RuleBasedStateMachine`` drives a thread of a real ``Runtime`` (SQLite and PostgreSQL)
through interleaved send, stop, continue, terminate, delete and edit, while its run waits
in a model request that only the ``answer`` rule lets through — so every operation also
meets a run in flight. After every step the invariants of specs 01–04 are checked:

- stored messages are in strictly increasing ``created_at`` order; no id twice;
- every acknowledged send is there exactly once (stored, or a queue entry's pending view)
  with the content of its last edit, unless it was deleted;
- ``running`` only while a run is live, and then parked in its one pending model request;
  once it is settled the status is never ``running`` (spec 04 §4.23);
- a terminated thread refuses sends and continues with ``ThreadTerminated``, stores nothing
  for them, and never delivers what waits (spec 02 §2.13);
- the stop flag is set by stop and terminate, cleared by a send or a continue, and while
  it is set no run starts (spec 04 §4.20.2); a stop or terminate of a live run settles it
  ``idle`` with its reason and note (§4.20.1);
- every tool call has at most one result, exactly one once the run is settled;
- the durable event sequence is 1…head without a gap (spec 02 §2.17.4).

Found: deleting the message a live run answers failed that run (its LLM row still named the
deleted message, so finalising it broke the logs → messages foreign key); fixed in the
store, held by ``test_deleting_the_message_a_live_run_answers_leaves_the_run_to_finish``,
and the ``delete`` rule may now pick any message.

Bounded: 25 machines of up to 20 steps per store, derandomized (``THREADLOOM_MACHINE_EXAMPLES``
runs more, for a deeper look).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, tool
from threadloom.engine.options import EngineOptions
from threadloom.errors import MessageGenerating, ThreadBusy, ThreadTerminated
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.providers.types import ProviderRequest
from threadloom.records import Message

T = TypeVar("T")
WAIT_S = 10.0
MACHINES = settings(
    max_examples=int(os.environ.get("THREADLOOM_MACHINE_EXAMPLES", "25")),
    stateful_step_count=20,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@tool
def echo(v: Any = None) -> str:
    """Echo the value back."""
    return f"echo {v}"


class HeldModel:
    """The scripted model: each request waits until ``release`` lets one through; a text
    starting with ``tool`` is answered with an ``echo`` call, the call's result with text."""

    def __init__(self) -> None:
        self.waiting: list[asyncio.Future[None]] = []

    @property
    def held(self) -> int:
        return sum(1 for f in self.waiting if not f.done())

    def release(self) -> None:
        next(f for f in self.waiting if not f.done()).set_result(None)

    async def reply(self, request: ProviderRequest) -> Reply:
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append(gate)
        try:
            await gate
        finally:
            self.waiting.remove(gate)
        last = request.messages[-1]
        if last.role == "tool":
            return Reply.text(f"after {last.text}")
        text = next((m.text for m in reversed(request.messages) if m.role == "user"), "")
        if text.startswith("tool"):
            return Reply.tool_calls(Call("echo", {"v": text}))
        return Reply.text(f"echo: {text}")


def definitions(model: HeldModel) -> Definitions:
    return Definitions().add(
        Model(name="M", provider=ScriptedProvider(model.reply, record=False), model="held-1"),
        Prompt(name="P", model="M", system="You echo.", tools=["echo"]),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="User")),
        echo,
    )


def machine_for(
    runtime: Runtime, model: HeldModel, run: Callable[[Coroutine[Any, Any, Any]], Any]
) -> type[RuleBasedStateMachine]:
    """The machine class over ``runtime``: each machine drives a thread of its own."""

    class ThreadMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.tid: str = run(runtime.create_thread("chat")).thread_id
            self.state = run(runtime.thread(self.tid))
            self.expected: dict[str, str] = {}
            """Acknowledged send → its content after the last edit."""
            self.deleted: set[str] = set()
            self.unanswered: set[str] = set()
            """Tool calls whose result was deleted (spec 02 §2.8: only the result goes)."""
            self.terminated = False
            self.stopped = False

        # -- helpers ---------------------------------------------------------------------
        def quiesce(self) -> None:
            """Until the run is settled or parked in its model request."""
            deadline = time.monotonic() + WAIT_S
            while runtime.running(self.tid) and model.held == 0:
                assert time.monotonic() < deadline, "the run neither settled nor reached a model"
                run(asyncio.sleep(0.002))

        def messages(self) -> list[Message]:
            page = run(self.state.get_messages(limit=None, order="asc", include_silent=True))
            found: list[Message] = page.messages
            return found

        def status(self) -> tuple[str, str | None]:
            row = run(runtime.store.get_thread(self.tid))
            return row.status.state, row.status.reason

        # -- the operations --------------------------------------------------------------
        @rule(
            text=st.sampled_from(["hello", "tool please", "more", "tool again"]),
            role=st.sampled_from(["user", "user", "user", "system", "assistant"]),
        )
        def send(self, text: str, role: str) -> None:
            before = len(self.messages())
            try:
                view = run(runtime.send_message(self.tid, text, role=role))
            except ThreadTerminated:
                assert self.terminated, "a live thread refused a send"
                assert len(self.messages()) == before, "a refused send stored something"
                return
            assert not self.terminated, "a terminated thread accepted a send"
            assert view.id not in self.expected
            self.expected[view.id] = text
            self.stopped = False
            self.quiesce()

        @rule()
        def stop(self) -> None:
            live = runtime.running(self.tid)
            run(runtime.stop(self.tid))
            self.stopped = True
            self.quiesce()
            assert not runtime.running(self.tid)
            if live:
                assert self.status() == ("idle", "aborted_by_user")
                stored = [m for m in self.messages() if not (m.metadata or {}).get("queued")]
                note = stored[-1]
                assert (note.role, note.content) == ("system", "Execution stopped by user")

        @rule()
        def continue_(self) -> None:
            live = runtime.running(self.tid)
            try:
                run(runtime.continue_thread(self.tid))
            except ThreadTerminated:
                assert self.terminated
                return
            except ThreadBusy:
                assert live, "continue refused an idle thread"
                return
            assert not live and not self.terminated
            self.stopped = False
            self.quiesce()

        @rule(now=st.integers(0, 2))
        def terminate(self, now: int) -> None:
            if now:  # two draws in three do nothing: a thread lives a while before its end
                return
            live = runtime.running(self.tid)
            run(runtime.terminate(self.tid))
            self.quiesce()
            assert not runtime.running(self.tid)
            if live and not self.terminated:
                assert self.status() == ("idle", "terminated")
            self.terminated = self.stopped = True

        @rule(data=st.data())
        def delete(self, data: st.DataObject) -> None:
            found = self.messages()
            if not found:
                return
            target = data.draw(st.sampled_from(found))
            try:
                removed = run(self.state.delete_message(target.id))
            except MessageGenerating:
                assert target.status == "pending" and target.role != "user"
                return
            assert removed is True
            if target.role == "tool" and target.tool_call_id:
                self.unanswered.add(target.tool_call_id)
            if target.id in self.expected:
                self.deleted.add(target.id)
            self.quiesce()

        @rule(data=st.data(), text=st.sampled_from(["edited", "tool edited"]))
        def edit(self, data: st.DataObject, text: str) -> None:
            found = self.messages()
            if not found:
                return
            target = data.draw(st.sampled_from(found))
            try:
                updated = run(self.state.update_message(target.id, content=text))
            except MessageGenerating:
                assert target.status == "pending" and target.role != "user"
                return
            assert updated.id == target.id and updated.content == text
            if target.id in self.expected:
                self.expected[target.id] = text
            self.quiesce()

        @precondition(lambda self: model.held > 0)
        @rule()
        def answer(self) -> None:
            model.release()
            self.quiesce()

        def settle(self) -> None:
            """Let every request through until the run ends: it must settle."""
            while runtime.running(self.tid):
                if model.held:
                    model.release()
                self.quiesce()
            assert self.status()[0] != "running"

        @rule()
        def finish(self) -> None:
            self.settle()

        def teardown(self) -> None:
            self.settle()

        # -- the invariants --------------------------------------------------------------
        @invariant()
        def consistent(self) -> None:
            found = self.messages()  # first: a read commits a held pending message
            row = run(runtime.store.get_thread(self.tid))
            live = runtime.running(self.tid)
            if live:
                assert row.status.state == "running" and model.held == 1
            else:
                assert row.status.state != "running", "settled, yet the status says running"
            assert (row.terminated is not None) == self.terminated
            assert row.stopped == self.stopped, "stop flag"
            assert not (row.stopped and live), "a run is live while the stop flag is set"

            ids = [m.id for m in found]
            assert len(ids) == len(set(ids)), "an id twice"
            waiting = {m.id: m for m in found if (m.metadata or {}).get("queued")}
            stored = [m for m in found if m.id not in waiting]
            times = [m.created_at for m in stored]
            assert all(a < b for a, b in itertools.pairwise(times)), "created_at order"
            pending = [m for m in stored if m.status == "pending"]
            assert len(pending) <= (1 if live else 0), "a pending model message without a run"
            present = Counter(ids)
            for sent, content in self.expected.items():
                if sent in self.deleted:
                    assert present[sent] == 0, "a deleted message came back"
                    continue
                assert present[sent] == 1, f"acknowledged send {sent} lost"
                (message,) = [m for m in found if m.id == sent]
                assert message.content == content
                if sent in waiting and self.terminated:
                    assert (message.metadata or {}).get("queue_status") == "cancelled"
            if waiting and not self.terminated and not self.stopped:
                assert live, "entries wait, but no run is live to deliver them"

            calls = [c.id for m in stored for c in m.decoded_tool_calls()]
            results = Counter(m.tool_call_id for m in stored if m.role == "tool")
            assert all(results[c] <= 1 for c in calls), "a tool call with two results"
            if not live:
                answered = [c for c in calls if c not in self.unanswered]
                assert all(results[c] == 1 for c in answered), "a settled call without a result"

            events = run(runtime.store.read_events(self.tid, 0, limit=100_000))
            seqs = [e.seq for e in events]
            assert seqs == list(range(1, row.event_seq + 1)), "the event sequence has a gap"

    return ThreadMachine


def test_one_thread_under_interleaved_operations_keeps_its_invariants(db_url: str) -> None:
    with asyncio.Runner() as runner:

        def run(coro: Coroutine[Any, Any, T]) -> T:
            return runner.run(coro)

        model = HeldModel()
        options = EngineOptions(drain_seconds=0)
        runtime = run(Runtime.open(db_url, definitions=definitions(model), options=options))
        try:
            run_state_machine_as_test(machine_for(runtime, model, run), settings=MACHINES)
        finally:
            for gate in model.waiting:
                if not gate.done():
                    gate.set_result(None)
            run(runtime.close(drain=0))


async def test_deleting_the_message_a_live_run_answers_leaves_the_run_to_finish(
    db_url: str,
) -> None:
    """Spec 02 §2.8: deleting works during execution, and log rows anchored to a deleted
    message are kept with ``message_id = None``: the run answers and settles as usual."""
    model = HeldModel()
    runtime = await Runtime.open(db_url, definitions=definitions(model))
    try:
        state = await runtime.create_thread("chat")
        sent = await runtime.send_message(state.thread_id, "hello")
        async with asyncio.timeout(WAIT_S):
            while not model.held:
                await asyncio.sleep(0.002)
        assert await state.delete_message(sent.id) is True
        model.release()
        await runtime.wait_idle(state.thread_id, WAIT_S)
        status = await state.status()
        assert (status.state, status.reason) == ("idle", "stop_on_response"), status
        page = await state.get_messages(limit=None, order="asc")
        assert [(m.role, m.content) for m in page.messages] == [("assistant", "echo: hello")]
    finally:
        for gate in model.waiting:
            if not gate.done():
                gate.set_result(None)
        await runtime.close(drain=0)
