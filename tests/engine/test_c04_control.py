"""Spec 04 conformance C04-061 … C04-105: timeouts, stop/terminate/continue, context
assembly, reasoning replay, cost, crash recovery, streaming and telemetry (§4.28).

Fixtures as §4.28 says: CHAT is ``make_chat`` (tests/engine/conftest.py); DUAL is built here.
The crash cases run a real child process (``crash_child.py``) on the test's SQLite file, kill
it with SIGKILL once it reported readiness, and reopen the file with a new Runtime.

Not covered here (features not built yet): C04-079 and C04-080 (image attachments as
request parts, spec 07), C04-086 … C04-089 (sub-prompts §4.17, handoffs §4.18); the HTTP
halves of C04-103 ([api]).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pg_support import NODE_TTL_S
from threadloom import Agent, HookBlocked, Side, ThreadState, hook
from threadloom.define import Prompt, Reasoning, tool
from threadloom.engine.options import EngineOptions
from threadloom.errors import ThreadBusy, ThreadTerminated
from threadloom.providers.script import Call, Fail, Reply
from threadloom.records import Message
from threadloom.store import open_store

CHILD = Path(__file__).with_name("crash_child.py")
STOPPED_NOTE = "Execution stopped by user"
LOST_CALL = "Execution lost: the runtime restarted before this tool call finished."
LOST_REQUEST = "Request lost: the runtime stopped before the response finished."
FAST = EngineOptions(backoff_base_s=0.01, backoff_cap_s=0.05)


# -- helpers -------------------------------------------------------------------------------


async def _messages(state: Any) -> list[Message]:
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    return list(page.messages)


async def _until(predicate: Callable[[], Any], timeout: float = 5.0) -> None:
    """Poll ``predicate`` (sync or async) until it is truthy."""
    async with asyncio.timeout(timeout):
        while True:
            value = predicate()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return
            await asyncio.sleep(0.005)


async def _requested(chat: Any, n: int = 1) -> None:
    """Wait until the provider received ``n`` requests (the pending message exists)."""
    await _until(lambda: len(chat.provider.requests) >= n)


def _shape(request: Any) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in request.messages]


async def _status(state: Any) -> tuple[str, str | None]:
    status = await state.status()
    return status.state, status.reason


async def _logs(chat: Any, tid: str) -> list[Any]:
    return list(await chat.runtime.store.list_logs(tid, limit=None))


def _telemetry(sub: Any) -> list[dict[str, Any]]:
    return [dict(e.data) for e in sub.drain() if e.kind == "telemetry"]


# -- tools used by several cases ------------------------------------------------------------

SLOW_STARTED: list[str] = []


@tool
async def slow() -> str:
    """Sleep for 2 s."""
    SLOW_STARTED.append("slow")
    await asyncio.sleep(2)
    return "slow done"


@tool
async def term(state: ThreadState) -> str:
    """Terminate the own thread from inside the run."""
    started = time.monotonic()
    await state.terminate()
    return f"terminated in {time.monotonic() - started:.3f}"


# -- §4.12.4 timeouts ----------------------------------------------------------------------


async def test_c04_061_first_chunk_timeout_no_second_attempt(make_chat: Any) -> None:
    """C04-061: runtime first-chunk timeout 0.2 s, response delayed 1 s → the row records
    error type `api_error` with a timeout error; no second attempt on that model.
    (The script holds a good second reply: a retry would have succeeded.)"""
    chat = await make_chat(
        [Reply.text("late", delay=1.0), Reply.text("would answer")],
        options=EngineOptions(first_chunk_timeout_s=0.2, backoff_base_s=0.01),
    )
    state = await chat.thread()
    started = time.monotonic()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert time.monotonic() - started < 0.9  # the timeout fired, the delay did not run out
    assert len(chat.provider.requests) == 1
    llm = [r for r in await _logs(chat, state.thread_id) if r.provider != "system"]
    assert len(llm) == 1
    row = llm[0]
    assert row.is_complete and row.error_type == "api_error"
    assert row.error_origin == "provider:scripted"
    assert [e["type"] for e in json.loads(row.errors or "[]")] == ["timeout"]
    assert await _status(state) == ("failed", "step_error")


# -- §4.20 stop, terminate -----------------------------------------------------------------


async def test_c04_062_stop_during_delayed_response(make_chat: Any) -> None:
    """C04-062: stop during a delayed response → pending `failed` (content null), log row
    `Interrupted by user`/`user_interrupted`, a `system` message `Execution stopped by
    user` with `status_kind` `stopped_by_user`; status `idle`/`aborted_by_user`."""
    chat = await make_chat([Reply.text("late", delay=5)])
    state = await chat.thread()
    tid = state.thread_id
    logsub = chat.runtime.events.subscribe(tid)
    await chat.runtime.send_message(tid, "Hello")
    await _requested(chat)
    seq = (await chat.runtime.store.get_thread(tid)).event_seq
    started = time.monotonic()
    assert await chat.runtime.stop(tid) is True
    assert time.monotonic() - started < 2
    # Settled before stop() returned.
    assert await _status(state) == ("idle", "aborted_by_user")
    rows = await _messages(state)
    assert [(m.role, m.status) for m in rows] == [
        ("user", "completed"),
        ("assistant", "failed"),
        ("system", "completed"),
    ]
    assert rows[1].content is None
    assert rows[2].content == STOPPED_NOTE and not rows[2].silent
    assert (rows[2].metadata or {}).get("status_kind") == "stopped_by_user"
    (row,) = await _logs(chat, tid)
    assert row.is_complete
    assert (row.error, row.error_type, row.error_origin) == (
        "Interrupted by user",
        "user_interrupted",
        "runtime",
    )
    assert (await chat.runtime.store.get_thread(tid)).stopped is True
    # One settlement, records first and the status last (§4.20.1 step 3).
    settled = await chat.runtime.store.read_events(tid, seq)
    assert [(e.kind, e.entity_id) for e in settled if e.kind != "status"] == [
        ("message", rows[1].id),
        ("log", row.id),
        ("message", rows[2].id),
    ]
    assert settled[-1].kind == "status"
    kinds = [e.kind for e in logsub.drain()]
    assert "stopped_by_user" in kinds


@pytest.mark.parametrize("parallel", [None, False], ids=["concurrent", "one_at_a_time"])
async def test_c04_063_stop_while_tool_runs(make_chat: Any, parallel: bool | None) -> None:
    """C04-063: stop while a tool runs (2 s) with one more call pending → the running
    tool's result is never stored; both calls answered with `Execution stopped by user`,
    `tool_status` `error`; exactly one result per call. Both modes: concurrent (the second
    call, echo, returns at once but its result waits behind call 1's, stored in call order)
    and `parallel_tool_calls=False` (echo has not started)."""
    SLOW_STARTED.clear()
    chat = await make_chat(
        [Reply.tool_calls(Call("slow", {}, id="call_1"), Call("echo", {"v": 1}, id="call_2"))],
        prompt={"tools": ["echo", "slow"], "parallel_tool_calls": parallel},
        extra=[slow],
    )
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "go")
    await _until(lambda: bool(SLOW_STARTED))
    await asyncio.sleep(0.05)  # echo has finished by now
    await chat.runtime.stop(tid)
    await asyncio.sleep(0.1)
    rows = await _messages(state)
    tools = [m for m in rows if m.role == "tool"]
    assert sorted((m.tool_call_id, m.content, m.tool_status) for m in tools) == [
        ("call_1", STOPPED_NOTE, "error"),
        ("call_2", STOPPED_NOTE, "error"),
    ]
    assert {m.name for m in tools} == {"slow", "echo"}
    assert "slow done" not in [m.content for m in rows]
    assert await _status(state) == ("idle", "aborted_by_user")
    assert len(chat.provider.requests) == 1


async def test_c04_064_stop_on_idle_thread(make_chat: Any) -> None:
    """C04-064: stop on an idle thread → no message stored; status unchanged; flag set."""
    chat = await make_chat([Reply.text("Hi")])
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "Hello")
    await chat.runtime.wait_idle(tid, timeout=5)
    before_status = await state.status()
    before = await _messages(state)
    assert await chat.runtime.stop(tid) is False
    assert await _messages(state) == before
    assert await state.status() == before_status
    assert (await chat.runtime.store.get_thread(tid)).stopped is True


async def test_c04_065_subagent_entry_waits_while_stopped_send_clears(make_chat: Any) -> None:
    """C04-065: after stop, an entry queued by subagent traffic stays pending, no run; then
    `queue_message(role="assistant", content="x")` clears the flag and one run delivers both
    entries in order; after another stop, an `assistant`-role send also clears the flag and
    starts a run (C5). In CHAT the last delivered entry is assistant-authored, so side b
    (human) acts next and each run parks with `awaiting_human` without a model request."""
    chat = await make_chat([])
    state = await chat.thread()
    tid = state.thread_id
    rt = chat.runtime
    await rt.stop(tid)
    child = await rt.create_thread("chat", parent=tid)
    await child.notify_parent("from child")
    await asyncio.sleep(0.1)
    await rt.wait_idle(tid, timeout=5)
    assert not rt.running(tid)
    (entry,) = await _messages(state)
    assert entry.status == "pending" and entry.content == "from child"
    assert entry.metadata is not None
    assert (entry.metadata["queue_source"], entry.metadata["queue_status"]) == (
        "subagent",
        "queued",
    )
    assert await _status(state) == ("idle", None)
    assert (await rt.store.get_thread(tid)).stopped is True

    statuses = rt.events.subscribe(tid, kinds=["status"])
    await state.queue_message(role="assistant", content="x")
    await _until(lambda: rt.running(tid) or statuses.pending() >= 2)
    await rt.wait_idle(tid, timeout=5)
    assert (await rt.store.get_thread(tid)).stopped is False
    rows = await _messages(state)
    assert [(m.role, m.content, m.status) for m in rows] == [
        ("user", "from child", "completed"),
        ("assistant", "x", "completed"),
    ]
    assert rows[0].id == entry.id and rows[0].created_at < rows[1].created_at
    assert [e.data["status"]["state"] for e in statuses.drain()] == ["running", "idle"]
    assert await _status(state) == ("idle", "awaiting_human")

    await rt.stop(tid)
    assert (await rt.store.get_thread(tid)).stopped is True
    sent = await rt.send_message(tid, "y", role="assistant")
    await _until(lambda: rt.running(tid) or statuses.pending() >= 2)
    await rt.wait_idle(tid, timeout=5)
    assert (await rt.store.get_thread(tid)).stopped is False
    last = (await _messages(state))[-1]
    assert (last.id, last.role, last.content, last.status) == (
        sent.id,
        "assistant",
        "y",
        "completed",
    )
    assert [e.data["status"]["state"] for e in statuses.drain()] == ["running", "idle"]
    assert chat.provider.requests == []


async def test_c04_066_continue_after_stop(make_chat: Any) -> None:
    """C04-066: after stop, continue side a → flag cleared; a run on side a without a new
    message."""
    chat = await make_chat([Reply.text("Hi"), Reply.text("More")])
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "Hello")
    await chat.runtime.wait_idle(tid, timeout=5)
    await chat.runtime.stop(tid)
    await chat.runtime.continue_thread(tid, "a")
    await chat.runtime.wait_idle(tid, timeout=5)
    assert (await chat.runtime.store.get_thread(tid)).stopped is False
    assert len(chat.provider.requests) == 2
    assert _shape(chat.provider.requests[1]) == [
        ("system", "You are P."),
        ("user", "Hello"),
        ("assistant", "Hi"),
    ]
    rows = await _messages(state)
    assert [(m.role, m.content) for m in rows] == [
        ("user", "Hello"),
        ("assistant", "Hi"),
        ("assistant", "More"),
    ]
    assert await _status(state) == ("idle", "stop_on_response")


async def test_c04_067_terminate_from_inside_a_tool(make_chat: Any) -> None:
    """C04-067: a tool calls `state.terminate()` on its own thread → `terminate()` returns
    at once; the tool's result is stored; a `system` message `Thread terminated`; no further
    request; status `idle`/`terminated`; a later send raises `ThreadTerminated` (HTTP 423),
    nothing stored."""
    chat = await make_chat(
        [Reply.tool_calls(Call("term", {}, id="call_t")), Reply.text("never")],
        prompt={"tools": ["echo", "term"]},
        extra=[term],
    )
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "end it")
    await chat.runtime.wait_idle(tid, timeout=5)
    rows = await _messages(state)
    assert [(m.role, m.status) for m in rows] == [
        ("user", "completed"),
        ("assistant", "completed"),
        ("tool", "completed"),
        ("system", "completed"),
    ]
    result = rows[2]
    assert (result.tool_call_id, result.tool_status, result.name) == ("call_t", "success", "term")
    assert result.content is not None and result.content.startswith("terminated in ")
    assert float(result.content.split()[-1]) < 1.0
    assert rows[3].content == "Thread terminated"
    assert (rows[3].metadata or {}).get("status_kind") == "terminated"
    assert len(chat.provider.requests) == 1
    assert await _status(state) == ("idle", "terminated")
    with pytest.raises(ThreadTerminated):
        await chat.runtime.send_message(tid, "hello?")
    assert await _messages(state) == rows
    assert await chat.runtime.store.list_queue(tid) == []


async def test_c04_068_terminate_from_outside_with_queued_send(make_chat: Any) -> None:
    """C04-068: terminate from outside during a delayed response while one send is queued
    → `terminate()` returns after the settlement; pending `failed`; status
    `idle`/`terminated`; the queued send stays a pending entry with `metadata.queue_status`
    `"cancelled"`, never delivered; no further request."""
    chat = await make_chat([Reply.text("late", delay=5), Reply.text("never")])
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "first")
    await _requested(chat)
    queued = await chat.runtime.send_message(tid, "second")
    await chat.runtime.terminate(tid)
    assert await _status(state) == ("idle", "terminated")  # settled before the return
    rows = await _messages(state)
    assert [(m.role, m.status, m.content) for m in rows] == [
        ("user", "completed", "first"),
        ("assistant", "failed", None),
        ("system", "completed", "Thread terminated"),
        ("user", "pending", "second"),
    ]
    view = rows[3]
    assert view.id == queued.id
    assert (view.metadata or {}).get("queue_status") == "cancelled"
    (row,) = await _logs(chat, tid)
    assert (row.is_complete, row.error, row.error_type) == (
        True,
        "Thread terminated",
        "user_interrupted",
    )
    await asyncio.sleep(0.2)
    await chat.runtime.wait_idle(tid, timeout=5)
    assert len(chat.provider.requests) == 1
    assert [(m.id, m.status) for m in await _messages(state)][-1] == (queued.id, "pending")


# -- §4.11 context assembly ----------------------------------------------------------------


@hook("prefilter_llm_history", id="quota")
def quota(state: Any, messages: Any) -> None:
    raise HookBlocked("quota exceeded")


async def test_c04_069_prefilter_hook_blocks_the_step(make_chat: Any) -> None:
    """C04-069: `prefilter_llm_history` raises `HookBlocked("quota exceeded")` → a message
    "quota exceeded" with `status_kind` `hook_blocked`; no pending message, no LLM log row;
    status `idle`/`hook_blocked`."""
    chat = await make_chat([Reply.text("never")], agent={"hooks": ("quota",)}, extra=[quota])
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "Hello")
    await chat.runtime.wait_idle(tid, timeout=5)
    rows = await _messages(state)
    assert [(m.role, m.content, m.status) for m in rows] == [
        ("user", "Hello", "completed"),
        ("assistant", "quota exceeded", "completed"),
    ]
    blocked = rows[1]
    assert (blocked.metadata or {}).get("status_kind") == "hook_blocked"
    assert (blocked.name, blocked.prompt) == ("Agent", "P")
    assert [r for r in await _logs(chat, tid) if r.provider != "system"] == []
    assert chat.provider.requests == []
    assert await _status(state) == ("idle", "hook_blocked")


SEEN_BY_FILTER: list[list[str | None]] = []


@hook("after_system_message", id="inject_note")
async def inject_note(state: Any, system: str) -> None:
    if not any(m.content == "note" for m in state.execution.message_history):
        await state.inject_message(role="user", content="note")


@hook("filter_messages", id="record_filter")
def record_filter(state: Any, messages: list[Message]) -> None:
    SEEN_BY_FILTER.append([m.content for m in messages])


async def test_c04_070_after_system_message_injection_reaches_request(make_chat: Any) -> None:
    """C04-070: `after_system_message` injects "note" → "note" is in req 1 and passes
    through `filter_messages`."""
    SEEN_BY_FILTER.clear()
    chat = await make_chat(
        [Reply.text("ok")],
        agent={"hooks": ("inject_note", "record_filter")},
        extra=[inject_note, record_filter],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert ("user", "note") in _shape(chat.provider.requests[0])
    assert SEEN_BY_FILTER == [["Hello", "note"]]


@hook("filter_messages", id="inject_in_filter")
async def inject_in_filter(state: Any, messages: list[Message]) -> None:
    if not any(m.content == "side note" for m in state.execution.message_history):
        await state.inject_message(role="user", content="side note")


async def test_c04_071_filter_injection_visible_next_request(make_chat: Any) -> None:
    """C04-071: `filter_messages` injects a message → absent from the current request,
    present in the next [seed]."""
    chat = await make_chat(
        [Reply.tool_calls(Call("echo", {"v": 1})), Reply.text("done")],
        agent={"hooks": ("inject_in_filter",)},
        extra=[inject_in_filter],
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    first, second = chat.provider.requests
    assert "side note" not in [m.text for m in first.messages]
    assert ("user", "side note") in _shape(second)
    assert "side note" in [m.content for m in await _messages(state)]


@hook("filter_messages", id="drop_all")
def drop_all(state: Any, messages: list[Message]) -> list[Message]:
    return []


async def test_c04_072_filter_returns_empty(make_chat: Any) -> None:
    """C04-072: `filter_messages` returns [] → request = [system]; stored history
    unchanged."""
    chat = await make_chat([Reply.text("ok")], agent={"hooks": ("drop_all",)}, extra=[drop_all])
    state = await chat.thread()
    sent = await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert _shape(chat.provider.requests[0]) == [("system", "You are P.")]
    rows = await _messages(state)
    assert [(m.id, m.role, m.content) for m in rows] == [
        (sent.id, "user", "Hello"),
        (rows[1].id, "assistant", "ok"),
    ]


def _call(call_id: str, name: str = "echo", arguments: str = '{"v":1}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


async def test_c04_073_missing_tool_result_synthesised(make_chat: Any) -> None:
    """C04-073: a seeded assistant tool call without result → the request contains the
    synthetic tool message `Tool result missing from conversation history for prior call
    "<name>". Treat this as a failed tool call.` right after it."""
    chat = await make_chat([Reply.text("ok")])
    state = await chat.thread()
    await state.inject_message(role="user", content="earlier")
    await state.inject_message(role="assistant", content=None, tool_calls=[_call("call_x")])
    await chat.runtime.send_message(state.thread_id, "now")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    messages = chat.provider.requests[0].messages
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "user"]
    assert [c.id for c in messages[2].tool_calls] == ["call_x"]
    synthetic = messages[3]
    assert synthetic.tool_call_id == "call_x" and synthetic.is_error
    assert synthetic.content == (
        'Tool result missing from conversation history for prior call "echo". '
        "Treat this as a failed tool call."
    )
    assert messages[4].text == "now"


async def test_c04_074_user_between_call_and_result_moves_after(make_chat: Any) -> None:
    """C04-074: a user message stored between an assistant tool-call message and its result
    → in the request it follows the result."""
    chat = await make_chat([Reply.text("ok")])
    state = await chat.thread()
    await state.inject_message(role="user", content="earlier")
    await state.inject_message(role="assistant", content=None, tool_calls=[_call("call_y")])
    await state.inject_message(role="user", content="between")
    await state.inject_message(
        role="tool", content="echo 1", name="echo", tool_call_id="call_y", tool_status="success"
    )
    await chat.runtime.send_message(state.thread_id, "now")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert _shape(chat.provider.requests[0]) == [
        ("system", "You are P."),
        ("user", "earlier"),
        ("assistant", ""),
        ("tool", "echo 1"),
        ("user", "between"),
        ("user", "now"),
    ]


async def test_c04_075_include_chat_false(make_chat: Any) -> None:
    """C04-075: `include_chat=False`, thread with 3 prior exchanges, new send → req 1 =
    [system, new user message]."""
    chat = await make_chat([Reply.text(f"a{i}") for i in range(4)], prompt={"include_chat": False})
    state = await chat.thread()
    for i in range(4):
        await chat.runtime.send_message(state.thread_id, f"u{i}")
        await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert len(chat.provider.requests) == 4
    assert _shape(chat.provider.requests[3]) == [("system", "You are P."), ("user", "u3")]


async def test_c04_076_include_past_tools_false(make_chat: Any) -> None:
    """C04-076: `include_past_tools=False`, an earlier turn used a tool, the current turn
    calls a tool → req 2 contains the current call and result but no earlier tool
    traffic."""
    chat = await make_chat(
        [
            Reply.tool_calls(Call("echo", {"v": 1}, id="call_old")),
            Reply.text("d1"),
            Reply.tool_calls(Call("echo", {"v": 2}, id="call_new")),
            Reply.text("d2"),
        ],
        prompt={"include_past_tools": False},
    )
    state = await chat.thread()
    for text in ("one", "two"):
        await chat.runtime.send_message(state.thread_id, text)
        await chat.runtime.wait_idle(state.thread_id, timeout=5)
    second_turn_req2 = chat.provider.requests[3]
    assert _shape(second_turn_req2) == [
        ("system", "You are P."),
        ("user", "one"),
        ("assistant", "d1"),
        ("user", "two"),
        ("assistant", ""),
        ("tool", "echo 2"),
    ]
    assert [c.id for c in second_turn_req2.messages[4].tool_calls] == ["call_new"]
    assert all(getattr(m, "tool_call_id", None) != "call_old" for m in second_turn_req2.messages)


async def test_c04_077_silent_queued_user_message_sent(make_chat: Any) -> None:
    """C04-077: a silent user message delivered from the queue → present in req 1 as an
    ordinary user message [seed]."""
    chat = await make_chat([Reply.text("ok")])
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "psst", silent=True)
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert _shape(chat.provider.requests[0]) == [("system", "You are P."), ("user", "psst")]
    stored = (await _messages(state))[0]
    assert (stored.content, stored.silent, stored.status) == ("psst", True, "completed")


async def test_c04_078_failed_partial_assistant_not_sent(make_chat: Any) -> None:
    """C04-078: a failed assistant message with partial text in history → absent from the
    next request. (The failed message is produced by a stop mid-stream, which keeps the
    text streamed so far, §4.20.1 step 3.1.)"""
    chat = await make_chat(
        [Reply.text("abcdefgh", chunk_size=2, chunk_delay=0.5), Reply.text("ok")]
    )
    state = await chat.thread()
    tid = state.thread_id
    chunks = chat.runtime.events.subscribe(tid, kinds=["message_chunk"])
    await chat.runtime.send_message(tid, "Hello")
    await chunks.get(timeout=5)
    await chat.runtime.stop(tid)
    failed = (await _messages(state))[1]
    assert (failed.role, failed.status, failed.content) == ("assistant", "failed", "ab")
    await chat.runtime.send_message(tid, "again")
    await chat.runtime.wait_idle(tid, timeout=5)
    assert _shape(chat.provider.requests[1]) == [
        ("system", "You are P."),
        ("user", "Hello"),
        ("system", STOPPED_NOTE),
        ("user", "again"),
    ]


# -- §4.11.5 reasoning replay --------------------------------------------------------------


async def test_c04_081_reasoning_replayed(make_chat: Any) -> None:
    """C04-081: scripted reasoning "think" with `reasoning.include` default → message
    `reasoning_content` "think"; req 2's assistant message carries reasoning "think"."""
    chat = await make_chat(
        [Reply(reasoning_content="think", tool_calls=[Call("echo", {"v": 1})]), Reply.text("ok")]
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assistant = (await _messages(state))[1]
    assert assistant.reasoning_content == "think"
    (replayed,) = [m for m in chat.provider.requests[1].messages if m.role == "assistant"]
    assert replayed.reasoning_content == "think"


async def test_c04_082_reasoning_not_replayed_when_include_false(make_chat: Any) -> None:
    """C04-082: same with `include=False` → req 2's assistant message carries no
    reasoning."""
    chat = await make_chat(
        [Reply(reasoning_content="think", tool_calls=[Call("echo", {"v": 1})]), Reply.text("ok")],
        prompt={"reasoning": Reasoning(include=False)},
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert (await _messages(state))[1].reasoning_content == "think"
    (replayed,) = [m for m in chat.provider.requests[1].messages if m.role == "assistant"]
    assert replayed.reasoning_content is None and replayed.reasoning_details is None


async def test_c04_083_no_reasoning_fields_null(make_chat: Any) -> None:
    """C04-083: a response without reasoning → `reasoning_content` and
    `reasoning_details` null [seed §1.3.5]."""
    chat = await make_chat([Reply.text("Hi")])
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assistant = (await _messages(state))[1]
    assert (assistant.reasoning_content, assistant.reasoning_details) == (None, None)
    assert assistant.metadata is None or "reasoning_duration_ms" not in assistant.metadata


async def test_c04_084_dual_reasoning_only_to_own_side(make_chat: Any) -> None:
    """C04-084: DUAL, side a reasoning "ra" → side b's request (a's message presented as
    user) carries no reasoning; side a's next request carries "ra"."""
    chat = await make_chat(
        [
            Reply.reasoning("A1", "ra"),
            Reply.text("B1"),
            Reply.text("A2"),
            Reply.text("B2"),
        ],
        extra=[
            Prompt(name="PB", model="M", system="You are PB."),
            Agent(
                name="dual",
                type="dual_ai",
                max_session_turns=2,
                side_a=Side(prompt="P", label="A"),
                side_b=Side(prompt="PB", label="B"),
            ),
        ],
    )
    state = await chat.runtime.create_thread("dual")
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    req_b, req_a2 = chat.provider.requests[1], chat.provider.requests[2]
    assert req_b.messages[0].text == "You are PB."
    assert ("user", "A1") in _shape(req_b)
    assert all(getattr(m, "reasoning_content", None) is None for m in req_b.messages)
    assert all(getattr(m, "reasoning_details", None) is None for m in req_b.messages)
    (a1,) = [m for m in req_a2.messages if m.role == "assistant"]
    assert (a1.text, a1.reasoning_content) == ("A1", "ra")


@hook("filter_messages", id="drop_reasoned")
def drop_reasoned(state: Any, messages: list[Message]) -> list[Message]:
    return [m for m in messages if not m.reasoning_content]


async def test_c04_085_filtered_message_reasoning_absent(make_chat: Any) -> None:
    """C04-085: `filter_messages` drops an assistant message that has reasoning → no
    reasoning of it anywhere in the request [seed §1.3.3]."""
    chat = await make_chat(
        [Reply.reasoning("A1", "r1"), Reply.text("A2")],
        agent={"hooks": ("drop_reasoned",)},
        extra=[drop_reasoned],
    )
    state = await chat.thread()
    for text in ("one", "two"):
        await chat.runtime.send_message(state.thread_id, text)
        await chat.runtime.wait_idle(state.thread_id, timeout=5)
    request = chat.provider.requests[1]
    assert _shape(request) == [("system", "You are P."), ("user", "one"), ("user", "two")]
    dumped = json.dumps([m.model_dump(mode="json") for m in request.messages])
    assert "r1" not in dumped and "A1" not in dumped


# -- §4.25 cost ------------------------------------------------------------------------------


async def _one_row(chat: Any) -> Any:
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    (row,) = await _logs(chat, state.thread_id)
    return row


async def test_c04_090_cost_from_prices(make_chat: Any) -> None:
    """C04-090: prices input 1.0, output 2.0, usage {input 1000, output 500} →
    `cost_input` 0.001, `cost_cached` 0, `cost_output` 0.001, `cost_total` 0.002."""
    chat = await make_chat(
        [Reply.text("Hi", usage={"input_tokens": 1000, "output_tokens": 500})],
        model={"input_price": 1.0, "output_price": 2.0},
    )
    row = await _one_row(chat)
    assert (row.cost_input, row.cost_cached, row.cost_output, row.cost_total) == (
        0.001,
        0.0,
        0.001,
        0.002,
    )


async def test_c04_091_cost_cached_and_reasoning(make_chat: Any) -> None:
    """C04-091: prices input 1.0, output 2.0, cached 0.5, reasoning 4.0; usage {input 1000,
    cached 400, output 500, reasoning 100} → 0.0006, 0.0002, 0.0012, total 0.002."""
    usage = {
        "input_tokens": 1000,
        "cached_tokens": 400,
        "output_tokens": 500,
        "reasoning_tokens": 100,
    }
    chat = await make_chat(
        [Reply.text("Hi", usage=usage)],
        model={
            "input_price": 1.0,
            "output_price": 2.0,
            "cached_price": 0.5,
            "reasoning_price": 4.0,
        },
    )
    row = await _one_row(chat)
    assert (row.cost_input, row.cost_cached, row.cost_output, row.cost_total) == (
        0.0006,
        0.0002,
        0.0012,
        0.002,
    )
    assert (row.input_tokens, row.cached_tokens, row.output_tokens, row.reasoning_tokens) == (
        1000,
        400,
        500,
        100,
    )


async def test_c04_092_provider_reported_cost_wins(make_chat: Any) -> None:
    """C04-092: usage with provider-reported cost 0.5 and prices set → `cost_total` 0.5,
    components computed from prices."""
    chat = await make_chat(
        [Reply.text("Hi", usage={"input_tokens": 1000, "output_tokens": 500, "cost": 0.5})],
        model={"input_price": 1.0, "output_price": 2.0},
    )
    row = await _one_row(chat)
    assert (row.cost_input, row.cost_cached, row.cost_output, row.cost_total) == (
        0.001,
        0.0,
        0.001,
        0.5,
    )


async def test_c04_093_no_prices_no_cost(make_chat: Any) -> None:
    """C04-093: a model without prices of its own, unknown to the price catalog (the
    scripted model, spec 15 §15.7) → cost columns null."""
    chat = await make_chat([Reply.text("Hi", usage={"input_tokens": 1000, "output_tokens": 500})])
    row = await _one_row(chat)
    assert (row.cost_input, row.cost_cached, row.cost_output, row.cost_total) == (
        None,
        None,
        None,
        None,
    )
    assert (row.input_tokens, row.output_tokens) == (1000, 500)


# -- §4.24 crash recovery (a real child process killed with SIGKILL) ---------------------


class Child:
    """A ``crash_child.py`` process on the test's database."""

    def __init__(self, proc: asyncio.subprocess.Process, db_url: str = "") -> None:
        self.proc = proc
        self.shared = db_url.startswith("postgresql://")
        """A store several nodes share: the killed child's node must be dead (its
        heartbeat older than the TTL) before a restart may take its runs as lost."""

    async def line(self, tag: str, timeout: float = 20.0) -> dict[str, Any]:
        """The JSON of the first ``<tag> {...}`` line the child prints."""
        assert self.proc.stdout is not None
        async with asyncio.timeout(timeout):
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:
                    err = b""
                    if self.proc.stderr is not None:
                        err = await self.proc.stderr.read()
                    raise AssertionError(f"child ended before {tag}: {err.decode()[-3000:]}")
                text = raw.decode().strip()
                if text.startswith(tag + " "):
                    data: dict[str, Any] = json.loads(text[len(tag) + 1 :])
                    return data

    async def kill(self) -> None:
        killed = self.proc.returncode is None
        if killed:
            self.proc.send_signal(signal.SIGKILL)
        async with asyncio.timeout(10):
            await self.proc.wait()
        if killed and self.shared:
            await asyncio.sleep(NODE_TTL_S + 0.3)


async def _child(db_url: str, scenario: str, *args: str) -> Child:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        db_url,
        scenario,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    return Child(proc, db_url)


async def _crash(db_url: str, scenario: str, *args: str) -> dict[str, Any]:
    """Run the child until READY, then SIGKILL it; returns the READY data."""
    child = await _child(db_url, scenario, *args)
    try:
        ready = await child.line("READY")
    finally:
        await child.kill()
    assert child.proc.returncode == -signal.SIGKILL
    return ready


async def _raw_state(db_url: str, tid: str) -> tuple[Any, list[Message], list[Any], list[Any]]:
    """The thread row, stored messages, queue and logs, read without a Runtime (no
    recovery runs)."""
    store = await open_store(db_url)
    try:
        row = await store.get_thread(tid)
        messages = list(await store.top_level_history(tid))
        queue = list(await store.list_queue(tid))
        logs = list(await store.list_logs(tid, limit=None))
    finally:
        await store.close()
    return row, messages, queue, logs


async def test_c04_094_kill_during_delayed_response(make_chat: Any, db_url: str) -> None:
    """C04-094: kill the process during a delayed response, restart → the log row
    `execution_lost`, the pending message `failed`, status `failed`/`execution_lost`;
    committed messages intact."""
    ready = await _crash(db_url, "delayed")
    tid = ready["thread_id"]
    row, before, queue, _ = await _raw_state(db_url, tid)
    assert row.status.state == "running" and queue == []
    assert [(m.role, m.status) for m in before] == [("user", "completed"), ("assistant", "pending")]

    chat = await make_chat([Reply.text("unused")])
    state = await chat.runtime.thread(tid)
    await chat.runtime.wait_idle(tid, timeout=5)
    assert await _status(state) == ("failed", "execution_lost")
    rows = await _messages(state)
    assert [(m.id, m.role, m.status, m.content) for m in rows] == [
        (ready["first_id"], "user", "completed", "first"),
        (before[1].id, "assistant", "failed", None),
    ]
    (log,) = await _logs(chat, tid)
    assert (log.is_complete, log.error, log.error_type, log.error_origin) == (
        True,
        LOST_REQUEST,
        "execution_lost",
        "runtime",
    )
    assert chat.provider.requests == []  # nothing queued: no run at start-up
    # One settlement: pending failed, log row, then the status (§4.24.1).
    settled = await chat.runtime.store.read_events(tid, row.event_seq)
    assert [(e.kind, e.entity_id) for e in settled[:-1]] == [
        ("message", before[1].id),
        ("log", log.id),
    ]
    assert settled[-1].kind == "status"


async def test_c04_095_kill_with_two_queued_sends(make_chat: Any, db_url: str) -> None:
    """C04-095: kill during a run after two sends were queued, restart → both queued
    messages delivered and answered by a run started at start-up."""
    ready = await _crash(db_url, "delayed", "q1", "q2")
    tid = ready["thread_id"]
    _, _, queue, _ = await _raw_state(db_url, tid)
    assert [e.id for e in queue] == ready["queued_ids"]

    chat = await make_chat([Reply.text("answer")])
    state = await chat.runtime.thread(tid)
    await _requested(chat)
    await chat.runtime.wait_idle(tid, timeout=5)
    assert _shape(chat.provider.requests[0]) == [
        ("system", "You are P."),
        ("user", "first"),
        ("user", "q1"),
        ("user", "q2"),
    ]
    rows = await _messages(state)
    assert [(m.role, m.status, m.content) for m in rows] == [
        ("user", "completed", "first"),
        ("assistant", "failed", None),
        ("user", "completed", "q1"),
        ("user", "completed", "q2"),
        ("assistant", "completed", "answer"),
    ]
    assert [rows[2].id, rows[3].id] == ready["queued_ids"]
    assert await chat.runtime.store.list_queue(tid) == []
    assert await _status(state) == ("idle", "stop_on_response")


async def test_crash_sigkill_mid_step_recovers_and_delivers_queue(
    make_chat: Any, db_url: str
) -> None:
    """Issue crash test: SIGKILL in the middle of a step (a chunk of the response already
    streamed) while three sends were queued behind the active run → after restart the lost
    run is settled (`failed`/`execution_lost`, its pending message `failed` without the
    partial text, its log row `execution_lost`), every committed message is intact, and the
    queued messages are delivered — in send order, exactly once — and answered."""
    ready = await _crash(db_url, "streaming", "m1", "m2", "m3")
    tid = ready["thread_id"]
    row, before, queue, _ = await _raw_state(db_url, tid)
    assert row.status.state == "running"
    assert [e.content for e in queue] == ["m1", "m2", "m3"]

    chat = await make_chat([Reply.text("all answered")])
    rt = chat.runtime
    state = await rt.thread(tid)
    await _requested(chat)
    await rt.wait_idle(tid, timeout=5)
    rows = await _messages(state)
    assert [(m.role, m.status, m.content) for m in rows] == [
        ("user", "completed", "first"),
        ("assistant", "failed", None),
        ("user", "completed", "m1"),
        ("user", "completed", "m2"),
        ("user", "completed", "m3"),
        ("assistant", "completed", "all answered"),
    ]
    assert rows[0].id == ready["first_id"] and rows[1].id == before[1].id
    assert [m.id for m in rows[2:5]] == ready["queued_ids"]
    assert rows[2].created_at < rows[3].created_at < rows[4].created_at
    assert _shape(chat.provider.requests[0])[1:] == [
        ("user", "first"),
        ("user", "m1"),
        ("user", "m2"),
        ("user", "m3"),
    ]
    lost, answered = await _logs(chat, tid)
    assert (lost.error_type, lost.error, lost.is_complete) == ("execution_lost", LOST_REQUEST, True)
    assert answered.is_complete and answered.error is None
    assert answered.message_id == ready["queued_ids"][0]  # the run root: first delivered
    assert await rt.store.list_queue(tid) == []
    assert await _status(state) == ("idle", "stop_on_response")


async def test_c04_096_kill_while_tool_runs(make_chat: Any, db_url: str) -> None:
    """C04-096: kill while a tool runs, restart → that call is answered with content
    `Execution lost: the runtime restarted before this tool call finished.`, `tool_status`
    `error`; the call answered before the kill keeps its one result."""
    ready = await _crash(db_url, "tool")
    tid = ready["thread_id"]
    row, _, _, _ = await _raw_state(db_url, tid)
    assert row.status.state == "running"

    chat = await make_chat([Reply.text("unused")], prompt={"tools": ["echo", "slow"]}, extra=[slow])
    state = await chat.runtime.thread(tid)
    await chat.runtime.wait_idle(tid, timeout=5)
    rows = await _messages(state)
    assert [(m.role, m.tool_call_id, m.content, m.tool_status) for m in rows] == [
        ("user", None, "go", None),
        ("assistant", None, None, None),
        ("tool", "call_echo", "echo 1", "success"),
        ("assistant", None, None, None),
        ("tool", "call_slow", LOST_CALL, "error"),
    ]
    assert [c.id for c in rows[3].decoded_tool_calls()] == ["call_slow"]
    assert rows[4].name == "slow"
    assert await _status(state) == ("failed", "execution_lost")
    assert chat.provider.requests == []
    settled = await chat.runtime.store.read_events(tid, row.event_seq)
    assert [(e.kind, e.entity_id) for e in settled] == [
        ("message", rows[4].id),
        ("status", settled[-1].entity_id),
    ]


async def test_c04_097_kill_on_stopped_thread_with_subagent_entry(
    make_chat: Any, db_url: str
) -> None:
    """C04-097: kill on a stopped thread holding an entry queued by subagent traffic,
    restart → no run starts; the entry stays pending."""
    ready = await _crash(db_url, "stopped")
    tid = ready["thread_id"]
    assert len(ready["entries"]) == 1

    chat = await make_chat([Reply.text("must not be used")])
    rt = chat.runtime
    state = await rt.thread(tid)
    await asyncio.sleep(0.2)
    await rt.wait_idle(tid, timeout=5)
    assert chat.provider.requests == []
    assert not rt.running(tid)
    rows = await _messages(state)
    assert [(m.role, m.status, m.content) for m in rows] == [
        ("user", "completed", "Hello"),
        ("assistant", "completed", "Hi"),
        ("user", "pending", "child says hi"),
    ]
    assert rows[2].id == ready["entries"][0]
    assert (rows[2].metadata or {}).get("queue_source") == "subagent"
    assert (await rt.store.get_thread(tid)).stopped is True
    assert await _status(state) == ("idle", "stop_on_response")


async def test_c04_098_close_drain_zero_then_restart(make_chat: Any, db_url: str) -> None:
    """C04-098: `Runtime.close(drain=0)` during a delayed response with one send queued →
    status `failed`/`aborted`; no new run starts before the process ends; the queued entry
    is kept and, after restart, delivered by a run started at start-up."""
    child = await _child(db_url, "drain")
    try:
        result = await child.line("RESULT")
        async with asyncio.timeout(10):
            await child.proc.wait()
    finally:
        await child.kill()
    assert child.proc.returncode == 0
    tid = result["thread_id"]
    assert [(s["state"], s["reason"]) for s in result["statuses"]] == [
        ("running", None),
        ("failed", "aborted"),
    ]
    assert result["requests"] == 1 and result["running"] is False

    row, before, queue, logs = await _raw_state(db_url, tid)
    assert (row.status.state, row.status.reason) == ("failed", "aborted")
    assert [e.id for e in queue] == [result["queued_id"]]
    assert [(m.role, m.status) for m in before] == [("user", "completed"), ("assistant", "failed")]
    assert [(r.error, r.error_type) for r in logs] == [
        ("Execution aborted: the runtime is shutting down", "interrupted_incomplete")
    ]

    chat = await make_chat([Reply.text("after restart")])
    state = await chat.runtime.thread(tid)
    await _requested(chat)
    await chat.runtime.wait_idle(tid, timeout=5)
    rows = await _messages(state)
    assert [(m.role, m.status, m.content) for m in rows][2:] == [
        ("user", "completed", "queued"),
        ("assistant", "completed", "after restart"),
    ]
    assert rows[2].id == result["queued_id"]
    assert await _status(state) == ("idle", "stop_on_response")


# -- §4.13, §4.12.2, §4.26 -----------------------------------------------------------------


async def test_c04_099_duplicate_tool_call_id(make_chat: Any) -> None:
    """C04-099: a response reusing a tool call id already stored → status
    `failed`/`step_error`; runtime log row error starts `Duplicate tool call id:`."""
    chat = await make_chat(
        [
            Reply.tool_calls(Call("echo", {"v": 1}, id="call_dup")),
            Reply.text("d1"),
            Reply.tool_calls(Call("echo", {"v": 2}, id="call_dup")),
        ]
    )
    state = await chat.thread()
    tid = state.thread_id
    for text in ("one", "two"):
        await chat.runtime.send_message(tid, text)
        await chat.runtime.wait_idle(tid, timeout=5)
    assert await _status(state) == ("failed", "step_error")
    runtime_rows = [r for r in await _logs(chat, tid) if r.provider == "system"]
    assert len(runtime_rows) == 1
    row = runtime_rows[0]
    assert (row.error or "").startswith("Duplicate tool call id:")
    assert (row.error_type, row.error_origin, row.is_complete) == (
        "step_execution_error",
        "runtime",
        True,
    )
    tools = [m for m in await _messages(state) if m.role == "tool"]
    assert [(m.tool_call_id, m.content) for m in tools] == [("call_dup", "echo 1")]


async def test_c04_100_streaming_chunks_then_message(make_chat: Any) -> None:
    """C04-100: streaming with chunk size 2 and content "abcde" → bus `message_chunk` events
    "ab", "cd", "e" for the pending id, then a `message` event with the completed message."""
    chat = await make_chat([Reply.text("abcde", chunk_size=2)])
    state = await chat.thread()
    tid = state.thread_id
    sub = chat.runtime.events.subscribe(tid, kinds=["message", "message_chunk"])
    await chat.runtime.send_message(tid, "Hello")
    await chat.runtime.wait_idle(tid, timeout=5)
    events = sub.drain()
    assistant = (await _messages(state))[1]
    chunks = [e for e in events if e.kind == "message_chunk"]
    assert [(e.data["message_id"], e.data["chunk"], e.data["offset"]) for e in chunks] == [
        (assistant.id, "ab", 0),
        (assistant.id, "cd", 2),
        (assistant.id, "e", 4),
    ]
    assert all(e.data["depth"] == 0 for e in chunks)
    mine = [e for e in events if e.kind == "message" and e.data["message"]["id"] == assistant.id]
    assert [e.data["message"]["status"] for e in mine] == ["pending", "completed"]
    last_chunk = events.index(chunks[-1])
    completed = events.index(mine[-1])
    assert completed > last_chunk
    assert mine[-1].data["message"]["content"] == "abcde"


async def test_c04_101_retry_after_partial_output_restarts_offset(make_chat: Any) -> None:
    """C04-101: retry after partial output (`fail_after_chunks`) → the second attempt's
    first chunk has `offset` 0; the stored content is only the second attempt's text."""
    chat = await make_chat(
        [
            Reply(
                content="abcd",
                chunk_size=2,
                fail_after_chunks=1,
                error=Fail("flaky", code="server_error", retryable=True),
            ),
            Reply.text("xyz", chunk_size=2),
        ],
        options=FAST,
    )
    state = await chat.thread()
    tid = state.thread_id
    sub = chat.runtime.events.subscribe(tid, kinds=["message_chunk"])
    await chat.runtime.send_message(tid, "Hello")
    await chat.runtime.wait_idle(tid, timeout=5)
    chunks = [(e.data["chunk"], e.data["offset"]) for e in sub.drain()]
    assert chunks == [("ab", 0), ("xy", 0), ("z", 2)]
    assistant = (await _messages(state))[1]
    assert (assistant.status, assistant.content) == ("completed", "xyz")
    assert len(chat.provider.requests) == 2


async def test_c04_102_telemetry_of_a_tool_round(make_chat: Any) -> None:
    """C04-102: the run of C04-021 → telemetry `step_started` with steps 0 and 1; a
    `tool_started`/`tool_completed` pair for echo; `stopped` with reason
    `stop_on_response`."""
    chat = await make_chat([Reply.tool_calls(Call("echo", {"v": 1})), Reply.text("done")])
    state = await chat.thread()
    tid = state.thread_id
    sub = chat.runtime.events.subscribe(tid, kinds=["telemetry"])
    await chat.runtime.send_message(tid, "go")
    await chat.runtime.wait_idle(tid, timeout=5)
    records = _telemetry(sub)
    assert [(r["step"], r["side"]) for r in records if r["type"] == "step_started"] == [
        (0, "a"),
        (1, "a"),
    ]
    tools = [(r["type"], r["tool"]) for r in records if r["type"].startswith("tool_")]
    assert tools == [("tool_started", "echo"), ("tool_completed", "echo")]
    (completed,) = [r for r in records if r["type"] == "tool_completed"]
    assert completed["status"] == "success"
    stopped = [r for r in records if r["type"] == "stopped"]
    assert [(r["reason"], r["side"]) for r in stopped] == [("stop_on_response", "a")]
    assert all(isinstance(r["timestamp"], int) for r in records)


async def test_c04_103_continue_on_running_thread_is_busy(make_chat: Any) -> None:
    """C04-103: `continue` on a running thread → Python `ThreadBusy`; nothing changes."""
    chat = await make_chat([Reply.text("late", delay=0.4)])
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "Hello")
    await _requested(chat)
    status = await state.status()
    before = await _messages(state)
    with pytest.raises(ThreadBusy):
        await chat.runtime.continue_thread(tid, "a")
    assert await state.status() == status and status.state == "running"
    assert await _messages(state) == before
    assert (await chat.runtime.store.get_thread(tid)).stopped is False
    await chat.runtime.wait_idle(tid, timeout=5)
    assert len(chat.provider.requests) == 1
    assert [m.content for m in await _messages(state)] == ["Hello", "late"]


async def test_c04_104_cascade_stop_parent_and_running_child(make_chat: Any) -> None:
    """C04-104: `stop(cascade=True)` on a parent with a running child → both runs settle
    `idle`/`aborted_by_user`; both threads have the stop flag. (The child is a thread
    created with `parent=`; both are running delayed responses.)"""
    chat = await make_chat([Reply.text("p", delay=5), Reply.text("c", delay=5)])
    rt = chat.runtime
    parent = await chat.thread()
    child = await rt.create_thread("chat", parent=parent.thread_id)
    await rt.send_message(parent.thread_id, "to parent")
    await _requested(chat, 1)
    await rt.send_message(child.thread_id, "to child")
    await _requested(chat, 2)
    assert rt.running(parent.thread_id) and rt.running(child.thread_id)
    await rt.stop(parent.thread_id, cascade=True)
    for state in (parent, child):
        tid = state.thread_id
        assert await _status(state) == ("idle", "aborted_by_user")
        assert (await rt.store.get_thread(tid)).stopped is True
        assert not rt.running(tid)
        rows = await _messages(state)
        assert [(m.role, m.status) for m in rows] == [
            ("user", "completed"),
            ("assistant", "failed"),
            ("system", "completed"),
        ]
        assert rows[2].content == STOPPED_NOTE


async def test_c04_105_reasoning_duration(make_chat: Any) -> None:
    """C04-105: reasoning "think" streamed 200 ms before the first content delta → the
    finalised message has `metadata.reasoning_duration_ms` ≈ 200 (bounds 150–600 ms)."""
    chat = await make_chat([Reply.reasoning("answer", "think", chunk_delay=0.2)])
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assistant = (await _messages(state))[1]
    assert assistant.reasoning_content == "think"
    duration = (assistant.metadata or {}).get("reasoning_duration_ms")
    assert isinstance(duration, int) and 150 <= duration <= 600
