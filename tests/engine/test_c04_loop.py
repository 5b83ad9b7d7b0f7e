"""The run loop against spec 04 §4.28, cases C04-020 … C04-060 (C04-019 and C04-021 live in
test_engine_chat.py).

Fixtures follow §4.28: **CHAT** is the ``make_chat`` agent of conftest (side a prompt ``P``
on model ``M``, side b human); **DUAL** is ``dual_ai`` with prompts ``PA``/``PB`` on ``M``
(``make_dual`` below). Every test runs a real Runtime on a real SQLite file with the
scripted provider. Out of scope here (features not built yet): C04-042 and C04-043
(``stop_session``, §4.16.2).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import DROP, Model, Prompt, hook, tool
from threadloom.engine.options import EngineOptions
from threadloom.engine.step.model_call import _backoff
from threadloom.errors import InvalidField, ThreadBusy
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.store.shapes import ThreadQuery

EMPTY_REPLY = (
    "You must reply. Empty response was rejected. Return non-empty content, call a tool, "
    "or include attachments."
)
NOT_OFFERED = (
    'Tool "nope" is not available for this prompt. You can only use tools that were '
    "explicitly configured for this prompt."
)

# -- tools and hooks used by the cases ------------------------------------------------

#: (event, label, monotonic time) appended by ``nap``.
NAPS: list[tuple[str, str, float]] = []
#: Session counters (a, b) seen by ``end`` when it ran.
SEEN_COUNTERS: list[tuple[int, int]] = []


@tool
async def nap(label: str, s: float = 0.0) -> str:
    """Sleep ``s`` seconds and return the label."""
    NAPS.append(("start", label, time.monotonic()))
    await asyncio.sleep(s)
    NAPS.append(("end", label, time.monotonic()))
    return f"nap {label}"


@tool
async def finish(answer: str) -> str:
    """Finish with an answer."""
    return f"finished with {answer}"


@tool
async def end(state: Any, ok: bool = True) -> str:
    """End the session (fails when ok is false)."""
    row = await state.hub.store.get_thread(state.thread_id)
    SEEN_COUNTERS.append((row.session_turns_a, row.session_turns_b))
    if not ok:
        raise ValueError("not finished yet")
    return "ended"


@tool
async def give_up() -> str:
    """Give up the session."""
    return "gave up"


@tool
async def queue_it(state: Any) -> str:
    """Queue a user message from a tool."""
    await state.queue_message(role="user", content="from tool")
    return "queued"


@tool
def count(n: int) -> str:
    """Count to n."""
    return str(n)


@tool(timeout=0.1)
async def slow() -> str:
    """Sleep for a second."""
    await asyncio.sleep(1)
    return "woke up"


@tool
def fail(word: str) -> str:
    """Always fails, with a message that depends on the word."""
    raise ValueError(f"cannot {word}")


@hook("after_create_message", id="set_context_n")
async def set_context_n(state: Any, message: Any) -> None:
    state.context["n"] = [1, 2]


@hook("after_tool_call_success", id="drop_every_call")
async def drop_every_call(state: Any, call: Any, result: Any) -> Any:
    return DROP


# -- helpers --------------------------------------------------------------------------


async def _messages(state: Any) -> list[Any]:
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    return list(page.messages)


async def _wait_until(predicate: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


def _system(request: Any) -> str:
    first = request.messages[0]
    return str(first.content) if first.role == "system" else ""


def _statuses(events: Sequence[Any]) -> list[tuple[str, str | None, int]]:
    out = []
    for e in events:
        if e.kind == "status" and e.data.get("status"):
            s = e.data["status"]
            out.append((s["state"], s["reason"], s["since"]))
    return out


def _telemetry(events: Sequence[Any], kind: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in events if e.kind == "telemetry" and e.data.get("type") == kind]


def _llm_rows(rows: Sequence[Any]) -> list[Any]:
    return [r for r in rows if r.kind is None and r.provider != "system"]


@dataclass
class Dual:
    runtime: Runtime
    provider: ScriptedProvider

    async def thread(self, **options: Any) -> Any:
        return await self.runtime.create_thread("dual", **options)


@pytest.fixture
async def open_rt(db_url: str) -> AsyncIterator[Callable[..., Any]]:
    """Open a Runtime on explicit definitions; closed at teardown."""
    opened: list[Runtime] = []

    async def make(*definitions: Any, options: EngineOptions | None = None) -> Runtime:
        runtime = await Runtime.open(
            db_url, definitions=Definitions().add(*definitions), options=options
        )
        opened.append(runtime)
        return runtime

    yield make
    for runtime in opened:
        await runtime.close(drain=0)


@pytest.fixture
def make_dual(open_rt: Callable[..., Any]) -> Callable[..., Any]:
    """DUAL of §4.28: ``dual_ai``, side a prompt PA, side b prompt PB, both on model M."""

    async def make(
        script: Sequence[Any] | Any = None,
        *,
        agent: dict[str, Any] | None = None,
        side_a: dict[str, Any] | None = None,
        side_b: dict[str, Any] | None = None,
        pa: dict[str, Any] | None = None,
        pb: dict[str, Any] | None = None,
        extra: Sequence[Any] = (),
        options: EngineOptions | None = None,
    ) -> Dual:
        provider = ScriptedProvider(script)
        pa_fields = {"system": "You are A.", "tools": ("nap",), **(pa or {})}
        pb_fields = {"system": "You are B.", **(pb or {})}
        runtime = await open_rt(
            Model(name="M", provider=provider, model="scripted-1"),
            Prompt(name="PA", model="M", **pa_fields),
            Prompt(name="PB", model="M", **pb_fields),
            Agent(
                name="dual",
                type="dual_ai",
                side_a=Side(prompt="PA", label="Alpha", **(side_a or {})),
                side_b=Side(prompt="PB", label="Beta", **(side_b or {})),
                **(agent or {}),
            ),
            nap,
            *extra,
            options=options,
        )
        return Dual(runtime, provider)

    return make


@pytest.fixture(autouse=True)
def _clear_records() -> None:
    NAPS.clear()
    SEEN_COUNTERS.clear()


# -- §4.7 entry points and overlap ----------------------------------------------------


async def test_c04_020_status_frames_running_then_idle(make_chat: Any) -> None:
    """C04-020: as C04-019 → status frames ``running`` then ``idle``/``stop_on_response``;
    ``since`` increases."""
    chat = await make_chat([Reply.text("Hi")])
    state = await chat.thread()
    created = await state.status()
    with chat.runtime.events.subscribe(state.thread_id, kinds=["status"]) as sub:
        await chat.runtime.send_message(state.thread_id, "Hello")
        await chat.runtime.wait_idle(state.thread_id, timeout=5)
        frames = _statuses(sub.drain())
    assert [(s, r) for s, r, _ in frames] == [("running", None), ("idle", "stop_on_response")]
    assert created.since < frames[0][2] < frames[1][2]


async def test_c04_022_system_variables(make_chat: Any) -> None:
    """C04-022: system ``Hi {{who}} {{n}} {{missing}}``, arguments ``{"who": "Ann"}``,
    context ``{"n": [1, 2]}`` → req 1 system ``Hi Ann [1,2] {{missing}}``.

    The run's ``context`` starts empty (§4.7.3); an ``after_create_message`` hook of the
    agent sets ``n`` while the first step delivers the message, i.e. before req 1 renders.
    """
    chat = await make_chat(
        [Reply.text("ok")],
        prompt={"system": "Hi {{who}} {{n}} {{missing}}"},
        agent={"hooks": ("set_context_n",)},
        extra=[set_context_n],
    )
    state = await chat.thread(arguments={"who": "Ann"})
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert _system(chat.provider.requests[0]) == "Hi Ann [1,2] {{missing}}"


async def test_c04_138_a_declared_variable_is_required(make_chat: Any) -> None:
    """C04-138: the prompt declares ``shop``: a thread without it, or with other arguments
    only, is refused naming ``arguments.shop``, the prompt and the description, and nothing
    is stored; with it the system text has the value."""
    chat = await make_chat(
        [Reply.text("ok")],
        prompt={"system": "You sell for {{shop}}.", "variables": {"shop": "The shop's name"}},
    )
    before = await chat.runtime.store.query_threads(ThreadQuery(limit=100))
    for arguments in (None, {"x": 1}):
        with pytest.raises(InvalidField) as refused:
            await chat.thread(arguments=arguments)
        assert refused.value.field == "arguments.shop"
        assert "prompt 'P'" in str(refused.value) and "The shop's name" in str(refused.value)
    assert await chat.runtime.store.query_threads(ThreadQuery(limit=100)) == before
    state = await chat.thread(arguments={"shop": "Walnut"})
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert _system(chat.provider.requests[0]) == "You sell for Walnut."


async def test_c04_023_send_while_running_joins_the_run(make_chat: Any) -> None:
    """C04-023: a send while the scripted response is delayed → the second user message is
    delivered at the next step of the same run, before req 2; no second run starts.

    The first response is a tool call so that the run continues to a next step (a text
    answer would end the run and the end-of-run check would start a new one, C04-031).
    """
    chat = await make_chat(
        [Reply.tool_calls(Call("echo", {"v": 1}), delay=0.3), Reply.text("done")]
    )
    state = await chat.thread()
    tid = state.thread_id
    with chat.runtime.events.subscribe(tid, kinds=["status", "telemetry"]) as sub:
        await chat.runtime.send_message(tid, "first")
        await _wait_until(lambda: len(chat.provider.requests) == 1)
        assert chat.runtime.running(tid)
        second = await chat.runtime.send_message(tid, "second")
        assert (second.status, second.metadata) == (
            "pending",
            {"queued": True, "queue_status": "queued", "queue_source": "api"},
        )
        await chat.runtime.wait_idle(tid, timeout=5)
        events = sub.drain()
    rows = await _messages(state)
    assert [(m.role, m.content) for m in rows] == [
        ("user", "first"),
        ("assistant", None),
        ("tool", "echo 1"),
        ("user", "second"),
        ("assistant", "done"),
    ]
    assert rows[3].id == second.id and rows[3].status == "completed"
    req2 = chat.provider.requests[1]
    assert [(m.role, m.text) for m in req2.messages][-1] == ("user", "second")
    assert len(chat.provider.requests) == 2
    # One run: step indices 0 and 1, one `stopped`, one running→idle transition.
    assert [t["step"] for t in _telemetry(events, "step_started")] == [0, 1]
    assert [t["reason"] for t in _telemetry(events, "stopped")] == ["stop_on_response"]
    assert [(s, r) for s, r, _ in _statuses(events)] == [
        ("running", None),
        ("idle", "stop_on_response"),
    ]


async def test_c04_024_queue_message_on_idle_starts_run(make_chat: Any) -> None:
    """C04-024: CHAT idle, ``queue_message(role="user", content="q")`` → a run starts; "q" is
    persisted with the queue entry's id before req 1."""
    chat = await make_chat([Reply.text("answer")])
    state = await chat.thread()
    view = await state.queue_message(role="user", content="q")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    rows = await _messages(state)
    assert [(m.id, m.role, m.content, m.status) for m in rows[:1]] == [
        (view.id, "user", "q", "completed")
    ]
    assert rows[1].content == "answer" and rows[0].created_at < rows[1].created_at
    req1 = chat.provider.requests[0]
    assert [(m.role, m.text) for m in req1.messages] == [("system", "You are P."), ("user", "q")]


async def test_c04_025_pending_view_markers(make_chat: Any) -> None:
    """C04-025: a queue entry read before delivery is pending with metadata ``{queued: true,
    queue_status: "queued", queue_source: "queue_message"}``; after delivery the stored
    message has none of these keys."""
    chat = await make_chat(
        [Reply.tool_calls(Call("echo", {"v": 1}), delay=0.3), Reply.text("done")]
    )
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "go")
    await _wait_until(lambda: len(chat.provider.requests) == 1)
    view = await state.queue_message(role="user", content="q", metadata={"k": 1})
    before = [m for m in await _messages(state) if m.id == view.id]
    assert len(before) == 1
    assert before[0].status == "pending"
    assert before[0].metadata == {
        "k": 1,
        "queued": True,
        "queue_status": "queued",
        "queue_source": "queue_message",
    }
    await chat.runtime.wait_idle(tid, timeout=5)
    after = await state.get_message(view.id)
    assert after is not None and after.status == "completed"
    assert after.metadata == {"k": 1}


async def test_c04_026_two_sends_delivered_in_order(make_chat: Any) -> None:
    """C04-026: two sends A then B while running → delivered in order A, B at one step;
    ``created_at`` strictly increasing and after the messages persisted before delivery."""
    chat = await make_chat(
        [Reply.tool_calls(Call("echo", {"v": 1}), delay=0.3), Reply.text("done")]
    )
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "go")
    await _wait_until(lambda: len(chat.provider.requests) == 1)
    a = await chat.runtime.send_message(tid, "A")
    b = await chat.runtime.send_message(tid, "B")
    await chat.runtime.wait_idle(tid, timeout=5)
    rows = await _messages(state)
    assert [m.content for m in rows] == ["go", None, "echo 1", "A", "B", "done"]
    assistant, tool_row, ra, rb = rows[1], rows[2], rows[3], rows[4]
    assert (ra.id, rb.id) == (a.id, b.id)
    assert assistant.created_at < tool_row.created_at < ra.created_at < rb.created_at
    assert len(chat.provider.requests) == 2
    req2 = chat.provider.requests[1]
    assert [m.text for m in req2.messages[-2:]] == ["A", "B"]
    # The run root moves to the first message of the latest delivery (§4.10 step 4).
    assert [r.message_id for r in _llm_rows(await chat.runtime.store.list_logs(tid))] == [
        rows[0].id,
        a.id,
    ]


async def test_c04_027_overlap_reject(make_chat: Any) -> None:
    """C04-027: CHAT ``overlap="reject"``, send while running → (HTTP 409 ``thread_running``)
    Python ``ThreadBusy("Thread is running (overlap policy: reject)")``; nothing queued; the
    run continues."""
    chat = await make_chat([Reply.text("Hi", delay=0.3)], agent={"overlap": "reject"})
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "go")
    await _wait_until(lambda: len(chat.provider.requests) == 1)
    with pytest.raises(ThreadBusy) as caught:
        await chat.runtime.send_message(tid, "x")
    assert str(caught.value) == "Thread is running (overlap policy: reject)"
    assert await chat.runtime.store.list_queue(tid) == []
    await chat.runtime.wait_idle(tid, timeout=5)
    assert [(m.role, m.content) for m in await _messages(state)] == [
        ("user", "go"),
        ("assistant", "Hi"),
    ]
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "stop_on_response")


async def test_c04_027_thread_busy_names_the_thread(make_chat: Any) -> None:
    """C04-027 (§4.7.4): the ``ThreadBusy`` raised by a rejected send is a
    ``ThreadloomError`` with attribute ``thread_id``."""
    chat = await make_chat([Reply.text("Hi", delay=0.3)], agent={"overlap": "reject"})
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "go")
    await _wait_until(lambda: len(chat.provider.requests) == 1)
    with pytest.raises(ThreadBusy) as caught:
        await chat.runtime.send_message(tid, "x")
    await chat.runtime.wait_idle(tid, timeout=5)
    assert getattr(caught.value, "thread_id", None) == tid


async def test_c04_028_overlap_interrupt(make_chat: Any) -> None:
    """C04-028: CHAT ``overlap="interrupt"``, send while a delayed response is in flight →
    the pending message becomes ``failed``; telemetry ``stopped`` reason ``interrupted``;
    the status stays ``running`` (no ``idle`` frame); a new run delivers and answers."""
    chat = await make_chat(
        [Reply.text("slow", delay=5), Reply.text("fast")], agent={"overlap": "interrupt"}
    )
    state = await chat.thread()
    tid = state.thread_id
    with chat.runtime.events.subscribe(tid, kinds=["status", "telemetry"]) as sub:
        await chat.runtime.send_message(tid, "go")
        await _wait_until(lambda: len(chat.provider.requests) == 1)
        started = time.monotonic()
        await chat.runtime.send_message(tid, "new")
        await chat.runtime.wait_idle(tid, timeout=5)
        assert time.monotonic() - started < 3
        events = sub.drain()
    rows = await _messages(state)
    assert [(m.role, m.content, m.status) for m in rows] == [
        ("user", "go", "completed"),
        ("assistant", None, "failed"),
        ("user", "new", "completed"),
        ("assistant", "fast", "completed"),
    ]
    assert [t["reason"] for t in _telemetry(events, "stopped")] == [
        "interrupted",
        "stop_on_response",
    ]
    assert [(s, r) for s, r, _ in _statuses(events)] == [
        ("running", None),
        ("idle", "stop_on_response"),
    ]
    first = _llm_rows(await chat.runtime.store.list_logs(tid))[0]
    assert (first.error, first.error_type, first.is_complete) == (
        "Interrupted by user",
        "user_interrupted",
        True,
    )


async def test_c04_029_thread_override_reject(make_chat: Any) -> None:
    """C04-029: thread-level overlap override ``reject`` on an agent with ``enqueue`` → send
    while running → (HTTP 409) ``ThreadBusy``; nothing queued; the run continues."""
    chat = await make_chat([Reply.text("Hi", delay=0.3)])
    state = await chat.thread(overlap="reject")
    tid = state.thread_id
    await chat.runtime.send_message(tid, "go")
    await _wait_until(lambda: len(chat.provider.requests) == 1)
    with pytest.raises(ThreadBusy, match=r"^Thread is running \(overlap policy: reject\)$"):
        await chat.runtime.send_message(tid, "x")
    assert await chat.runtime.store.list_queue(tid) == []
    await chat.runtime.wait_idle(tid, timeout=5)
    assert [m.content for m in await _messages(state)] == ["go", "Hi"]


async def test_c04_030_queue_message_ignores_reject(make_chat: Any) -> None:
    """C04-030: ``queue_message`` from a tool while the agent's overlap is ``reject`` →
    stored (not rejected) and delivered at the next step."""
    chat = await make_chat(
        [Reply.tool_calls(Call("queue_it", {})), Reply.text("done")],
        prompt={"tools": ("echo", "queue_it")},
        agent={"overlap": "reject"},
        extra=[queue_it],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    rows = await _messages(state)
    assert [(m.role, m.content) for m in rows] == [
        ("user", "go"),
        ("assistant", None),
        ("tool", "queued"),
        ("user", "from tool"),
        ("assistant", "done"),
    ]
    req2 = chat.provider.requests[1]
    assert [(m.role, m.text) for m in req2.messages][-1] == ("user", "from tool")


async def test_c04_031_queued_during_last_step_runs_again(make_chat: Any) -> None:
    """C04-031: a message queued during the last step of a run (after its delivery) → the
    run ends, the status stays ``running`` (no ``idle`` in between, ``since`` unchanged), a
    new run answers the message; then the status settles."""
    chat = await make_chat([Reply.text("one", delay=0.3), Reply.text("two", delay=0.2)])
    state = await chat.thread()
    tid = state.thread_id
    with chat.runtime.events.subscribe(tid, kinds=["status", "telemetry"]) as sub:
        await chat.runtime.send_message(tid, "go")
        await _wait_until(lambda: len(chat.provider.requests) == 1)
        running = await state.status()
        await chat.runtime.send_message(tid, "again")
        await _wait_until(lambda: len(chat.provider.requests) == 2)
        between = await state.status()
        await chat.runtime.wait_idle(tid, timeout=5)
        events = sub.drain()
    assert (between.state, between.since, between.reason) == ("running", running.since, None)
    assert [m.content for m in await _messages(state)] == ["go", "one", "again", "two"]
    stopped = _telemetry(events, "stopped")
    assert [t["reason"] for t in stopped] == ["stop_on_response", "stop_on_response"]
    assert [t["step"] for t in _telemetry(events, "step_started")] == [0, 0]
    frames = _statuses(events)
    assert [(s, r) for s, r, _ in frames] == [("running", None), ("idle", "stop_on_response")]
    assert frames[0][2] == running.since


# -- §4.8 sides, perspective, sessions --------------------------------------------------


async def test_c04_032_dual_session_cap(make_dual: Any) -> None:
    """C04-032: DUAL, script [t1..t4], ``max_session_turns=2`` → send "go" → requests by a,
    b, a, b; stored roles assistant, user, assistant, user; ends ``max_session_turns``;
    counters 0/0."""
    dual = await make_dual(
        [Reply.text(t) for t in ("t1", "t2", "t3", "t4")], agent={"max_session_turns": 2}
    )
    state = await dual.thread()
    await dual.runtime.send_message(state.thread_id, "go")
    await dual.runtime.wait_idle(state.thread_id, timeout=5)
    assert [_system(r) for r in dual.provider.requests] == [
        "You are A.",
        "You are B.",
        "You are A.",
        "You are B.",
    ]
    rows = await _messages(state)
    assert [(m.role, m.content, m.name) for m in rows] == [
        ("user", "go", None),
        ("assistant", "t1", "Alpha"),
        ("user", "t2", "Beta"),
        ("assistant", "t3", "Alpha"),
        ("user", "t4", "Beta"),
    ]
    assert [m.prompt for m in rows] == [None, "PA", "PB", "PA", "PB"]
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "max_session_turns")
    row = await dual.runtime.store.get_thread(state.thread_id)
    assert (row.session_turns_a, row.session_turns_b) == (0, 0)


async def test_c04_033_dual_perspective_for_side_b(make_dual: Any) -> None:
    """C04-033: DUAL → side b's request shows stored ``assistant`` rows as ``user`` and the
    initial stored ``user`` row as ``assistant``."""
    dual = await make_dual([Reply.text("t1"), Reply.text("t2")], agent={"max_session_turns": 1})
    state = await dual.thread()
    await dual.runtime.send_message(state.thread_id, "go")
    await dual.runtime.wait_idle(state.thread_id, timeout=5)
    req_a, req_b = dual.provider.requests
    assert [(m.role, m.text) for m in req_a.messages] == [
        ("system", "You are A."),
        ("user", "go"),
    ]
    assert [(m.role, m.text) for m in req_b.messages] == [
        ("system", "You are B."),
        ("assistant", "go"),
        ("user", "t1"),
    ]


async def test_c04_034_dual_sibling_tool_traffic_hidden(make_dual: Any) -> None:
    """C04-034: DUAL, side a calls a tool → side b's next request contains neither a's tool
    call nor its result."""
    dual = await make_dual(
        [
            Reply.tool_calls(Call("nap", {"label": "x"})),
            Reply.text("a-done"),
            Reply.text("b-done"),
        ],
        agent={"max_session_turns": 1},
    )
    state = await dual.thread()
    await dual.runtime.send_message(state.thread_id, "go")
    await dual.runtime.wait_idle(state.thread_id, timeout=5)
    assert len(dual.provider.requests) == 3
    req_a2, req_b = dual.provider.requests[1], dual.provider.requests[2]
    assert [m.role for m in req_a2.messages] == ["system", "user", "assistant", "tool"]
    assert _system(req_b) == "You are B."
    assert not any(m.role == "tool" for m in req_b.messages)
    assert not any(getattr(m, "tool_calls", None) for m in req_b.messages)
    assert not any("nap" in m.text for m in req_b.messages)
    texts = [(m.role, m.text) for m in req_b.messages if m.text]
    assert texts == [("system", "You are B."), ("assistant", "go"), ("user", "a-done")]


async def test_c04_034_no_blank_remnant_of_sibling_tool_call(make_dual: Any) -> None:
    """C04-034, reading: side b's request must not carry a's tool-call message either. With
    its calls removed (§4.8.1) that message has nothing left; it should be dropped like a
    message left with no content and no calls by ``include_past_tools=False`` (§4.11.3),
    not sent as an empty ``user`` message (consecutive ``user`` turns, and an empty content
    that several providers reject)."""
    dual = await make_dual(
        [
            Reply.tool_calls(Call("nap", {"label": "x"})),
            Reply.text("a-done"),
            Reply.text("b-done"),
        ],
        agent={"max_session_turns": 1},
    )
    state = await dual.thread()
    await dual.runtime.send_message(state.thread_id, "go")
    await dual.runtime.wait_idle(state.thread_id, timeout=5)
    req_b = dual.provider.requests[2]
    assert [(m.role, m.text) for m in req_b.messages] == [
        ("system", "You are B."),
        ("assistant", "go"),
        ("user", "a-done"),
    ]


async def test_c04_035_chat_session_resets_on_park(make_chat: Any) -> None:
    """C04-035: CHAT ``max_session_turns=1``, three sends → each gets a reply (parking resets
    the session)."""
    chat = await make_chat(
        [Reply.text("r1"), Reply.text("r2"), Reply.text("r3")], agent={"max_session_turns": 1}
    )
    state = await chat.thread()
    tid = state.thread_id
    for text in ("s1", "s2", "s3"):
        await chat.runtime.send_message(tid, text)
        await chat.runtime.wait_idle(tid, timeout=5)
        status = await state.status()
        assert (status.state, status.reason) == ("idle", "stop_on_response")
        row = await chat.runtime.store.get_thread(tid)
        assert (row.session_turns_a, row.session_turns_b) == (0, 0)
    assert [m.content for m in await _messages(state)] == ["s1", "r1", "s2", "r2", "s3", "r3"]


# -- §4.9 step ceilings ------------------------------------------------------------------


async def test_c04_036_side_max_steps(make_chat: Any) -> None:
    """C04-036: CHAT side a ``max_steps=3``, ``stop_on_response=False``, script of 5 texts →
    3 requests; ends ``max_side_steps``."""
    chat = await make_chat(
        [Reply.text(f"t{i}") for i in range(5)],
        side_a={"max_steps": 3, "stop_on_response": False},
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert len(chat.provider.requests) == 3
    assert [m.content for m in await _messages(state)] == ["go", "t0", "t1", "t2"]
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "max_side_steps")
    # No session reset (§4.22): the delivered human message counted b's turn; a's never ended.
    row = await chat.runtime.store.get_thread(state.thread_id)
    assert (row.session_turns_a, row.session_turns_b) == (0, 1)


async def test_c04_037_run_step_ceiling(make_chat: Any) -> None:
    """C04-037: runtime ``max_run_steps=4``, CHAT with ``stop_on_response=False``, 10 texts
    → 4 requests; ends ``max_total_steps``."""
    chat = await make_chat(
        [Reply.text(f"t{i}") for i in range(10)],
        side_a={"stop_on_response": False},
        options=EngineOptions(max_run_steps=4),
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert len(chat.provider.requests) == 4
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "max_total_steps")
    row = await chat.runtime.store.get_thread(state.thread_id)
    assert (row.session_turns_a, row.session_turns_b) == (0, 1)


# -- §4.13 / §4.15 stop conditions ---------------------------------------------------------


async def test_c04_038_stop_tool_response_property(make_chat: Any) -> None:
    """C04-038: CHAT ``stop_tool="finish"``, ``stop_tool_response_property="answer"``, the
    response calls finish {"answer": "42"} → assistant content ``42``; finish executed; ends
    ``stop_tool``."""
    chat = await make_chat(
        [Reply.tool_calls(Call("finish", {"answer": "42"}))],
        prompt={"tools": ("echo", "finish")},
        side_a={"stop_tool": "finish", "stop_tool_response_property": "answer"},
        extra=[finish],
    )
    state = await chat.thread()
    tid = state.thread_id
    with chat.runtime.events.subscribe(tid, kinds=["message_chunk"]) as sub:
        await chat.runtime.send_message(tid, "go")
        await chat.runtime.wait_idle(tid, timeout=5)
        chunks = [dict(e.data) for e in sub.drain()]
    rows = await _messages(state)
    assert [(m.role, m.content) for m in rows] == [
        ("user", "go"),
        ("assistant", "42"),
        ("tool", "finished with 42"),
    ]
    assert [c.function.name for c in rows[1].decoded_tool_calls()] == ["finish"]
    assert rows[2].tool_status == "success"
    assert [(c["message_id"], c["chunk"]) for c in chunks] == [(rows[1].id, "42")]
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "stop_tool")
    assert len(chat.provider.requests) == 1


async def test_c04_039_session_stop_ends_session(make_dual: Any) -> None:
    """C04-039: DUAL side a ``session_stop="end"``, a calls end successfully → ends
    ``session_stop``; no side switch; counters 0/0 (they were 1/1 when ``end`` ran)."""
    dual = await make_dual(
        [Reply.text("t1"), Reply.text("t2"), Reply.tool_calls(Call("end", {}))],
        pa={"tools": ("nap", "end")},
        side_a={"session_stop": "end"},
        extra=[end],
    )
    state = await dual.thread()
    tid = state.thread_id
    with dual.runtime.events.subscribe(tid, kinds=["telemetry"]) as sub:
        await dual.runtime.send_message(tid, "go")
        await dual.runtime.wait_idle(tid, timeout=5)
        events = sub.drain()
    assert [_system(r) for r in dual.provider.requests] == [
        "You are A.",
        "You are B.",
        "You are A.",
    ]
    assert SEEN_COUNTERS == [(1, 1)]
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "session_stop")
    assert [(t["reason"], t["side"]) for t in _telemetry(events, "stopped")] == [
        ("session_stop", "a")
    ]
    row = await dual.runtime.store.get_thread(tid)
    assert (row.session_turns_a, row.session_turns_b) == (0, 0)


async def test_c04_040_failed_session_stop_continues(make_dual: Any) -> None:
    """C04-040: as C04-039 but ``end`` fails → the run continues; the next request is by
    side a again."""
    dual = await make_dual(
        [Reply.tool_calls(Call("end", {"ok": False})), Reply.tool_calls(Call("end", {}))],
        pa={"tools": ("nap", "end")},
        side_a={"session_stop": "end"},
        extra=[end],
    )
    state = await dual.thread()
    await dual.runtime.send_message(state.thread_id, "go")
    await dual.runtime.wait_idle(state.thread_id, timeout=5)
    assert [_system(r) for r in dual.provider.requests] == ["You are A.", "You are A."]
    tools = [(m.content, m.tool_status) for m in await _messages(state) if m.role == "tool"]
    assert tools == [("Failed to execute tool: not finished yet", "error"), ("ended", "success")]
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "session_stop")


async def test_c04_041_session_fail_wins_over_stop(make_chat: Any) -> None:
    """C04-041: one response calling the session fail and session stop tools, both
    succeeding → ends ``session_fail`` (the stop tool is called first)."""
    chat = await make_chat(
        [Reply.tool_calls(Call("end", {}), Call("give_up", {}))],
        prompt={"tools": ("echo", "end", "give_up")},
        side_a={"session_stop": "end", "session_fail": "give_up"},
        extra=[end, give_up],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    tools = [(m.name, m.tool_status) for m in await _messages(state) if m.role == "tool"]
    assert tools == [("end", "success"), ("give_up", "success")]
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "session_fail")
    assert len(chat.provider.requests) == 1


async def test_c04_044_assistant_queue_on_chat_awaits_human(make_chat: Any) -> None:
    """C04-044: ``queue_message(role="assistant")`` on idle CHAT → delivered; the acting side
    b is human → ends ``awaiting_human`` without a provider request."""
    chat = await make_chat([Reply.text("never")])
    state = await chat.thread()
    view = await state.queue_message(role="assistant", content="Hello from the agent")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    rows = await _messages(state)
    assert [(m.id, m.role, m.content, m.status) for m in rows] == [
        (view.id, "assistant", "Hello from the agent", "completed")
    ]
    assert chat.provider.requests == []
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "awaiting_human")


async def test_c04_045_last_delivered_entry_decides_side(make_dual: Any) -> None:
    """C04-045: queue entries [user "x", assistant "y"] delivered together in DUAL → side b
    acts next (the last entry decides).

    Both are sent while side a's tool step is in flight, so one delivery takes both.
    """
    dual = await make_dual(
        [
            Reply.tool_calls(Call("nap", {"label": "1"}), delay=0.3),
            Reply.text("b1"),
            Reply.text("a1"),
        ],
        agent={"max_session_turns": 1},
    )
    state = await dual.thread()
    tid = state.thread_id
    await dual.runtime.send_message(tid, "go")
    await _wait_until(lambda: len(dual.provider.requests) == 1)
    await dual.runtime.send_message(tid, "x")
    await dual.runtime.send_message(tid, "y", role="assistant")
    await dual.runtime.wait_idle(tid, timeout=5)
    req2 = dual.provider.requests[1]
    assert _system(req2) == "You are B."
    assert [(m.role, m.text) for m in req2.messages][-2:] == [("assistant", "x"), ("user", "y")]
    rows = await _messages(state)
    assert [(m.role, m.content) for m in rows][3:] == [
        ("user", "x"),
        ("assistant", "y"),
        ("user", "b1"),
        ("assistant", "a1"),
    ]


# -- §4.14 tool execution --------------------------------------------------------------


async def test_c04_046_concurrent_tools_stored_in_order(make_chat: Any) -> None:
    """C04-046: 3 calls, call 1 sleeps 0.3 s, calls 2–3 return at once (default mode) →
    they run together (≈0.3 s in all); tool rows stored in order 1, 2, 3 with increasing
    ``created_at``."""
    calls = [
        Call("nap", {"label": "1", "s": 0.3}),
        Call("nap", {"label": "2"}),
        Call("nap", {"label": "3"}),
    ]
    chat = await make_chat(
        [Reply.tool_calls(*calls), Reply.text("done")],
        prompt={"tools": ("echo", "nap")},
        extra=[nap],
    )
    state = await chat.thread()
    tid = state.thread_id
    with chat.runtime.events.subscribe(tid, kinds=["telemetry"]) as sub:
        await chat.runtime.send_message(tid, "go")
        await chat.runtime.wait_idle(tid, timeout=5)
        events = sub.drain()
    at = {(kind, label): t for kind, label, t in NAPS}
    assert at[("end", "2")] < at[("end", "1")] and at[("end", "3")] < at[("end", "1")]
    assert at[("start", "2")] < at[("end", "1")] and at[("start", "3")] < at[("end", "1")]
    span = max(t for _, _, t in NAPS) - min(t for _, _, t in NAPS)
    assert 0.29 <= span < 0.55
    rows = await _messages(state)
    issued = rows[1].decoded_tool_calls()
    tool_rows = [m for m in rows if m.role == "tool"]
    assert [m.tool_call_id for m in tool_rows] == [c.id for c in issued]
    assert [m.content for m in tool_rows] == ["nap 1", "nap 2", "nap 3"]
    stamps = [m.created_at for m in tool_rows]
    assert stamps == sorted(stamps) and len(set(stamps)) == 3
    completed = [t["tool"] for t in _telemetry(events, "tool_completed")]
    assert completed == ["nap", "nap", "nap"]


async def test_c04_047_sequential_tools(make_chat: Any) -> None:
    """C04-047: as C04-046 with ``parallel_tool_calls=False`` → calls run one after another;
    ``parallel_tool_calls: false`` is in the provider request; absent (None) when the field
    is None."""
    calls = [
        Call("nap", {"label": "1", "s": 0.1}),
        Call("nap", {"label": "2", "s": 0.05}),
        Call("nap", {"label": "3"}),
    ]
    chat = await make_chat(
        [Reply.tool_calls(*calls), Reply.text("done"), Reply.text("plain")],
        prompt={"tools": ("echo", "nap")},
        extra=[
            nap,
            Prompt(name="PS", model="M", tools=("nap",), parallel_tool_calls=False),
            Agent(name="seq", side_a=Side(prompt="PS", label="Seq")),
        ],
    )
    seq = await chat.runtime.create_thread("seq")
    await chat.runtime.send_message(seq.thread_id, "go")
    await chat.runtime.wait_idle(seq.thread_id, timeout=5)
    order = [(kind, label) for kind, label, _ in NAPS]
    assert order == [
        ("start", "1"),
        ("end", "1"),
        ("start", "2"),
        ("end", "2"),
        ("start", "3"),
        ("end", "3"),
    ]
    tool_rows = [m for m in await _messages(seq) if m.role == "tool"]
    assert [m.content for m in tool_rows] == ["nap 1", "nap 2", "nap 3"]
    assert chat.provider.requests[0].parallel_tool_calls is False
    plain = await chat.thread()
    await chat.runtime.send_message(plain.thread_id, "hi")
    await chat.runtime.wait_idle(plain.thread_id, timeout=5)
    assert chat.provider.requests[2].tools  # tools are offered …
    assert chat.provider.requests[2].parallel_tool_calls is None  # … the flag is not sent


async def test_c04_048_tool_not_offered(make_chat: Any) -> None:
    """C04-048: the response calls ``nope`` (not offered) → row content ``Failed to execute
    tool: Tool "nope" is not available for this prompt. …``; no ``tool_call_done`` event."""
    chat = await make_chat([Reply.tool_calls(Call("nope", {})), Reply.text("ok")])
    state = await chat.thread()
    tid = state.thread_id
    with chat.runtime.events.subscribe(tid, kinds=["event"]) as sub:
        await chat.runtime.send_message(tid, "go")
        await chat.runtime.wait_idle(tid, timeout=5)
        events = [dict(e.data) for e in sub.drain()]
    tool_rows = [m for m in await _messages(state) if m.role == "tool"]
    assert [(m.name, m.content, m.tool_status) for m in tool_rows] == [
        ("nope", f"Failed to execute tool: {NOT_OFFERED}", "error")
    ]
    assert [e for e in events if e.get("event_type") == "tool_call_done"] == []
    started = [e["data"]["name"] for e in events if e.get("event_type") == "tool_call_started"]
    assert started == ["nope"]


async def test_c04_048_not_offered_error_on_log_row(make_chat: Any) -> None:
    """C04-048 with §4.14.3 step 8: the not-offered call's result is an error, so the
    step's LLM log row gets ``error`` ``Tool "nope" failed: <error text>``, ``error_type``
    ``tool_execution_error`` and ``error_origin`` ``tool:nope`` (step 1 exempts the call
    from hooks and events, not from step 8)."""
    chat = await make_chat([Reply.tool_calls(Call("nope", {})), Reply.text("ok")])
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    first = _llm_rows(await chat.runtime.store.list_logs(state.thread_id))[0]
    assert first.tool_results is not None and '"tool_name":"nope"' in first.tool_results
    assert (first.error, first.error_type, first.error_origin) == (
        f'Tool "nope" failed: {NOT_OFFERED}',
        "tool_execution_error",
        "tool:nope",
    )


async def test_c04_049_argument_validation_error(make_chat: Any) -> None:
    """C04-049: arguments ``{"n": "a"}`` for an ``int`` parameter → content starts ``Failed
    to execute tool: Tool argument validation failed: [n] ``."""
    chat = await make_chat(
        [Reply.tool_calls(Call("count", {"n": "a"})), Reply.text("ok")],
        prompt={"tools": ("echo", "count")},
        extra=[count],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    (row,) = [m for m in await _messages(state) if m.role == "tool"]
    assert row.content.startswith("Failed to execute tool: Tool argument validation failed: [n] ")
    assert row.tool_status == "error"


async def test_c04_050_invalid_json_arguments(make_chat: Any) -> None:
    """C04-050: arguments text ``{oops`` → content starts ``Failed to execute tool: Tool
    arguments are not valid JSON: ``; the stored call keeps ``"{}"`` (§4.13 step 4)."""
    chat = await make_chat([Reply.tool_calls(Call("echo", "{oops")), Reply.text("ok")])
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    rows = await _messages(state)
    (row,) = [m for m in rows if m.role == "tool"]
    assert row.content.startswith("Failed to execute tool: Tool arguments are not valid JSON: ")
    assert row.tool_status == "error"
    assert rows[1].decoded_tool_calls()[0].function.arguments == "{}"


async def test_c04_051_tool_timeout(make_chat: Any) -> None:
    """C04-051: tool with ``timeout=0.1`` sleeping 1 s → content ``Failed to execute tool:
    Tool timed out after 0.1 s``."""
    chat = await make_chat(
        [Reply.tool_calls(Call("slow", {})), Reply.text("ok")],
        prompt={"tools": ("echo", "slow")},
        extra=[slow],
    )
    state = await chat.thread()
    started = time.monotonic()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert time.monotonic() - started < 0.9
    (row,) = [m for m in await _messages(state) if m.role == "tool"]
    assert (row.content, row.tool_status) == (
        "Failed to execute tool: Tool timed out after 0.1 s",
        "error",
    )


async def test_c04_052_drop_only_call_deletes_message(make_chat: Any) -> None:
    """C04-052: ``after_tool_call_success`` returns ``DROP`` for the only call of a
    content-less response → the assistant message is deleted, no tool row; req 2 lacks
    both."""
    chat = await make_chat(
        [Reply.tool_calls(Call("echo", {"v": 1})), Reply.text("done")],
        prompt={"hooks": ("drop_every_call",)},
        extra=[drop_every_call],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert [(m.role, m.content) for m in await _messages(state)] == [
        ("user", "go"),
        ("assistant", "done"),
    ]
    req2 = chat.provider.requests[1]
    assert [(m.role, m.text) for m in req2.messages] == [("system", "You are P."), ("user", "go")]


# -- §4.13 empty responses and §4.19 the breaker ------------------------------------------


async def test_c04_053_empty_response_guard(make_chat: Any) -> None:
    """C04-053: script [text ""] then [text "ok"] → assistant 1 carries
    ``invalid_assistant_response`` with reason ``empty_response``; a tool row with the
    rejection text and ``tool_status`` error; req 2 is by side a."""
    chat = await make_chat([Reply.text(""), Reply.text("ok")])
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    rows = await _messages(state)
    assert [(m.role, m.content) for m in rows] == [
        ("user", "go"),
        ("assistant", None),
        ("tool", EMPTY_REPLY),
        ("assistant", "ok"),
    ]
    (guard,) = rows[1].decoded_tool_calls()
    assert guard.function.name == "invalid_assistant_response"
    assert guard.id.startswith("call_") and len(guard.id) == 37
    assert guard.function.arguments == (
        '{"reason":"empty_response","assistantMessageId":"' + rows[1].id + '"}'
    )
    assert (rows[2].tool_call_id, rows[2].tool_status, rows[2].name) == (
        guard.id,
        "error",
        "invalid_assistant_response",
    )
    req2 = chat.provider.requests[1]
    assert _system(req2) == "You are P."
    assert [m.role for m in req2.messages] == ["system", "user", "assistant", "tool"]
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "stop_on_response")


BREAKER_TEXT = (
    "I stopped because the same tool error happened 8 times in a row:\n\n"
    + EMPTY_REPLY
    + "\n\nRetrying is not helping. Please check what is failing, then ask me to continue."
)


async def test_c04_054_breaker_trips_on_eight_empty_responses(make_chat: Any) -> None:
    """C04-054: 8 empty responses → the 8th step stores the breaker message starting ``I
    stopped because the same tool error happened 8 times in a row``; status
    ``failed``/``repeated_tool_error``; exactly 8 requests."""
    chat = await make_chat([Reply.text("")] * 8 + [Reply.text("never")])
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert len(chat.provider.requests) == 8
    rows = await _messages(state)
    assert [m.role for m in rows] == ["user"] + ["assistant", "tool"] * 8 + ["assistant"]
    note = rows[-1]
    assert note.content == BREAKER_TEXT
    assert (note.name, note.prompt, note.status) == ("Agent", "P", "completed")
    assert (note.metadata or {}).get("status_kind") == "repeated_tool_error"
    status = await state.status()
    assert (status.state, status.reason) == ("failed", "repeated_tool_error")


async def test_c04_054_breaker_note_by_acting_side_in_dual(make_dual: Any) -> None:
    """C04-054 with §4.19 in DUAL: both sides' ``stop_tool`` is a failing tool, so every
    step completes a turn and switches sides; the 8th step is side b's. The breaker note
    carries the acting side's role (``user`` for b), ``name`` = its label, ``prompt`` = its
    prompt."""
    dual = await make_dual(
        [Reply.tool_calls(Call("fail", {"word": "x"}))] * 8 + [Reply.text("never")],
        pa={"tools": ("fail",)},
        pb={"tools": ("fail",)},
        side_a={"stop_tool": "fail"},
        side_b={"stop_tool": "fail"},
        extra=[fail],
    )
    state = await dual.thread()
    await dual.runtime.send_message(state.thread_id, "go")
    await dual.runtime.wait_idle(state.thread_id, timeout=5)
    assert len(dual.provider.requests) == 8
    assert _system(dual.provider.requests[-1]) == "You are B."
    status = await state.status()
    assert (status.state, status.reason) == ("failed", "repeated_tool_error")
    note = (await _messages(state))[-1]
    assert (note.metadata or {}).get("status_kind") == "repeated_tool_error"
    assert (note.role, note.name, note.prompt) == ("user", "Beta", "PB")


async def test_c04_055_breaker_counts_only_this_run(make_chat: Any) -> None:
    """C04-055: a thread whose previous run ended with the breaker; new send; one more
    identical tool error → the breaker does not trip (only this run's rows count)."""
    chat = await make_chat([Reply.text("")] * 8 + [Reply.text(""), Reply.text("ok")])
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "go")
    await chat.runtime.wait_idle(tid, timeout=5)
    assert (await state.status()).reason == "repeated_tool_error"
    await chat.runtime.send_message(tid, "again")
    await chat.runtime.wait_idle(tid, timeout=5)
    assert len(chat.provider.requests) == 10
    rows = await _messages(state)
    assert [(m.role, m.content) for m in rows[-4:]] == [
        ("user", "again"),
        ("assistant", None),
        ("tool", EMPTY_REPLY),
        ("assistant", "ok"),
    ]
    assert sum(1 for m in rows if (m.metadata or {}).get("status_kind")) == 1
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "stop_on_response")


async def test_c04_056_different_errors_do_not_trip(make_chat: Any) -> None:
    """C04-056: 8 consecutive tool errors with different messages → no trip."""
    words = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")
    chat = await make_chat(
        [Reply.tool_calls(Call("fail", {"word": w})) for w in words] + [Reply.text("done")],
        prompt={"tools": ("echo", "fail")},
        extra=[fail],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    tools = [m for m in await _messages(state) if m.role == "tool"]
    assert [m.content for m in tools] == [f"Failed to execute tool: cannot {w}" for w in words]
    assert all(m.tool_status == "error" for m in tools)
    assert len(chat.provider.requests) == 9
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "stop_on_response")


# -- §4.12.3 retries, backoff, fallbacks ------------------------------------------------


def _timed(times: list[float], reply: Reply) -> Callable[[Any], Reply]:
    def answer(request: Any) -> Reply:
        times.append(time.monotonic())
        return reply

    return answer


async def test_c04_057_retry_with_backoff(make_chat: Any) -> None:
    """C04-057: script [error(retryable) "x", text "ok"] → 2 requests at least the backoff
    apart; row 1 complete with ``error_type`` ``api_error``; row 2 ``retry_of_log_id`` =
    row 1.

    The spec's "≥ 1 s apart" is the default base; the runtime here uses
    ``backoff_base_s=0.05`` and the gap is checked against that base.
    """
    base = 0.05
    times: list[float] = []
    chat = await make_chat(
        [_timed(times, Reply.error("x")), _timed(times, Reply.text("ok"))],
        options=EngineOptions(backoff_base_s=base),
    )
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "go")
    await chat.runtime.wait_idle(tid, timeout=5)
    assert len(chat.provider.requests) == 2
    assert times[1] - times[0] >= base
    first, second = _llm_rows(await chat.runtime.store.list_logs(tid))
    assert (first.is_complete, first.error, first.error_type, first.error_origin) == (
        True,
        "x",
        "api_error",
        "provider:scripted",
    )
    assert first.retry_of_log_id is None
    assert second.retry_of_log_id == first.id and second.is_complete and second.error is None
    rows = await _messages(state)
    assert (rows[-1].content, rows[-1].log_id) == ("ok", second.id)


async def test_c04_058_retries_exhausted(make_chat: Any) -> None:
    """C04-058: script [error(retryable), error(retryable)], no fallbacks → pending message
    ``failed``; status ``failed``/``step_error``; a complete runtime log row with
    ``error_type`` ``step_execution_error`` and error starting ``All retry attempts
    exhausted for model M and 0 fallbacks``."""
    chat = await make_chat(
        [Reply.error("x"), Reply.error("y")], options=EngineOptions(backoff_base_s=0.01)
    )
    state = await chat.thread()
    tid = state.thread_id
    sent = await chat.runtime.send_message(tid, "go")
    await chat.runtime.wait_idle(tid, timeout=5)
    assert len(chat.provider.requests) == 2
    rows = await _messages(state)
    assert [(m.role, m.status, m.content) for m in rows] == [
        ("user", "completed", "go"),
        ("assistant", "failed", None),
    ]
    status = await state.status()
    assert (status.state, status.reason) == ("failed", "step_error")
    logs = await chat.runtime.store.list_logs(tid)
    runtime_rows = [r for r in logs if r.provider == "system"]
    assert len(runtime_rows) == 1
    row = runtime_rows[0]
    assert row.error is not None
    assert row.error.startswith("All retry attempts exhausted for model M and 0 fallbacks")
    assert "\n\nStack trace:\n" in row.error
    assert (row.error_type, row.error_origin, row.is_complete) == (
        "step_execution_error",
        "runtime",
        True,
    )
    # "Step <n>" is not pinned down further by §4.21; any step number is accepted.
    assert re.fullmatch(r"Step \d+, Side a", row.model)
    assert row.message_id == sent.id
    assert [r.error for r in _llm_rows(logs)] == ["x", "y"]


def _fallback_defs(pm: ScriptedProvider, pf: ScriptedProvider) -> list[Any]:
    return [
        Model(name="M", provider=pm, model="primary-1", fallbacks=["F"]),
        Model(name="F", provider=pf, model="fallback-1"),
        Prompt(name="P", model="M", system="You are P."),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="Customer")),
    ]


async def test_c04_059_non_retryable_goes_to_fallback(open_rt: Any) -> None:
    """C04-059: model M with fallback F; M's script [error(``overloaded``, non-retryable)],
    F's script [text "ok"] → 2 requests (no retry on M); ``fallback_triggered {from: "M",
    to: "F", reason: "overloaded"}``; F's row ``retry_of_log_id`` = M's row. (An
    ``invalid_request`` uses no fallback since issue 39: C04-141.)"""
    pm = ScriptedProvider(
        [Reply.error("refused", "overloaded", retryable=False), Reply.text("retry")], name="pm"
    )
    pf = ScriptedProvider([Reply.text("ok")], name="pf")
    rt = await open_rt(*_fallback_defs(pm, pf), options=EngineOptions(backoff_base_s=0.01))
    state = await rt.create_thread("chat")
    tid = state.thread_id
    with rt.events.subscribe(tid, kinds=["telemetry"]) as sub:
        await rt.send_message(tid, "go")
        await rt.wait_idle(tid, timeout=5)
        events = sub.drain()
    assert (len(pm.requests), len(pf.requests)) == (1, 1)
    triggered = _telemetry(events, "fallback_triggered")
    assert [(t["from"], t["to"], t["reason"]) for t in triggered] == [("M", "F", "overloaded")]
    m_row, f_row = _llm_rows(await rt.store.list_logs(tid))
    assert (m_row.model, m_row.error_type, m_row.error_origin) == ("M", "api_error", "provider:pm")
    assert (f_row.model, f_row.retry_of_log_id, f_row.error) == ("F", m_row.id, None)
    rows = await _messages(state)
    assert (rows[-1].content, rows[-1].log_id) == ("ok", f_row.id)


async def test_c04_060_timeout_error_leaves_the_model(open_rt: Any) -> None:
    """C04-060: script [error code ``timeout``] → one request on that model, then fallback
    or exhaustion. Both branches: M (fallback F) answers through F; N (no fallback) is
    exhausted after its single request."""
    pm = ScriptedProvider([Reply.error("slow", "timeout"), Reply.text("retry")], name="pm")
    pf = ScriptedProvider([Reply.text("ok")], name="pf")
    pn = ScriptedProvider([Reply.error("slow", "timeout"), Reply.text("retry")], name="pn")
    rt = await open_rt(
        *_fallback_defs(pm, pf),
        Model(name="N", provider=pn, model="lonely-1"),
        Prompt(name="PN", model="N", system="You are N."),
        Agent(name="lonely", side_a=Side(prompt="PN", label="Lonely")),
        options=EngineOptions(backoff_base_s=0.01),
    )
    with_fallback = await rt.create_thread("chat")
    await rt.send_message(with_fallback.thread_id, "go")
    await rt.wait_idle(with_fallback.thread_id, timeout=5)
    assert (len(pm.requests), len(pf.requests)) == (1, 1)
    assert (await _messages(with_fallback))[-1].content == "ok"

    alone = await rt.create_thread("lonely")
    await rt.send_message(alone.thread_id, "go")
    await rt.wait_idle(alone.thread_id, timeout=5)
    assert len(pn.requests) == 1
    status = await alone.status()
    assert (status.state, status.reason) == ("failed", "step_error")
    (row,) = [r for r in await rt.store.list_logs(alone.thread_id) if r.provider == "system"]
    assert row.error is not None
    assert row.error.startswith("All retry attempts exhausted for model N and 0 fallbacks")


def test_c04_116_the_backoff_is_stretched_at_random_never_shortened() -> None:
    options = EngineOptions()
    for attempt, retry_after, low in ((1, None, 1.0), (1, 3.0, 3.0), (10, None, 60.0)):
        delays = [_backoff(options, attempt, retry_after) for _ in range(200)]
        assert all(low <= d < low * 1.25 for d in delays), (attempt, min(delays), max(delays))
        assert len(set(delays)) > 150  # spread, not one value for every thread
        assert max(delays) - min(delays) > low * 0.15
