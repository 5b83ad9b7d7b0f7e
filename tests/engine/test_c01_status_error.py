"""A failed run keeps its cause with its status (spec 01 §1.7.4): cases C01-042 … C01-047,
on a real Runtime over SQLite and PostgreSQL with the scripted model (``make_chat``)."""

from __future__ import annotations

from typing import Any

import pytest

from fakes import FakeClock
from threadloom import Runtime
from threadloom.define import tool
from threadloom.providers.script import Call, Reply
from threadloom.records import StatusError, ThreadStatus

NO_KEY = Reply.error("OPENAI_API_KEY is not set", "authentication", retryable=False)


async def _settle(chat: Any, thread_id: str, text: str = "hi") -> None:
    await chat.runtime.send_message(thread_id, text)
    await chat.runtime.wait_idle(thread_id, timeout=10)


async def _logs(chat: Any, thread_id: str) -> list[Any]:
    return list(await chat.runtime.store.list_logs(thread_id, limit=None))


async def test_c01_042_a_model_failure_keeps_its_cause(make_chat: Any) -> None:
    chat = await make_chat([NO_KEY])
    state = await chat.thread()
    await _settle(chat, state.thread_id)
    status = await state.status()
    assert (status.state, status.reason) == ("failed", "step_error")
    error = status.error
    assert error is not None
    assert error.type == "ProviderError"
    assert error.code == "authentication"
    assert error.retryable is False
    assert error.message == 'Model "M" (scripted): OPENAI_API_KEY is not set'
    llm = [row for row in await _logs(chat, state.thread_id) if row.error_type == "api_error"]
    assert len(llm) == 1  # not retryable: one attempt
    assert error.log_id == llm[0].id
    assert "OPENAI_API_KEY is not set" in (llm[0].error or "")


@tool
def echo_again(v: Any = None) -> str:
    """Echo the value back."""
    return f"again {v}"


async def test_c01_043_an_exception_in_a_step_keeps_its_type_and_row(make_chat: Any) -> None:
    # the second reply reuses the first call's id: the step raises "Duplicate tool call id"
    script = [
        Reply.tool_calls(Call("echo", {"v": 1}, id="call_same")),
        Reply.text("first done"),
        Reply.tool_calls(Call("echo", {"v": 2}, id="call_same")),
    ]
    chat = await make_chat(script)
    state = await chat.thread()
    await _settle(chat, state.thread_id, "one")
    assert (await state.status()).state == "idle"
    await _settle(chat, state.thread_id, "two")
    status = await state.status()
    assert (status.state, status.reason) == ("failed", "step_error")
    error = status.error
    assert error is not None
    assert error.type == "StepError"
    assert error.message.startswith("Duplicate tool call id")
    assert error.code is None and error.retryable is False
    (runtime_row,) = [
        row
        for row in await _logs(chat, state.thread_id)
        if row.error_type == "step_execution_error"
    ]
    assert error.log_id == runtime_row.id
    assert "Stack trace:" in (runtime_row.error or "")


async def test_c01_044_the_cause_survives_a_restart(make_chat: Any, db_url: str) -> None:
    chat = await make_chat([NO_KEY])
    state = await chat.thread()
    await _settle(chat, state.thread_id)
    before = await state.status()
    assert before.error is not None
    await chat.runtime.close()
    reopened = await Runtime.open(db_url)
    try:
        after = await (await reopened.thread(state.thread_id)).status()
        assert after == before
        record = await reopened.store.get_thread(state.thread_id)
        assert record is not None and record.status.error == before.error
    finally:
        await reopened.close()


async def test_c01_045_a_new_run_clears_the_cause(make_chat: Any) -> None:
    chat = await make_chat([NO_KEY, Reply.text("fine now")])
    state = await chat.thread()
    await _settle(chat, state.thread_id)
    assert (await state.status()).error is not None
    seen: list[ThreadStatus] = []
    subscription = chat.runtime.events.subscribe(state.thread_id)
    await _settle(chat, state.thread_id, "again")
    for event in subscription.drain():
        if event.kind == "status":
            seen.append(ThreadStatus.model_validate(event.data["status"]))
    assert [s.state for s in seen] == ["running", "idle"]
    assert all(s.error is None for s in seen)
    status = await state.status()
    assert (status.state, status.reason, status.error) == ("idle", "stop_on_response", None)


async def test_c01_046_a_lost_run_says_so(db_url: str) -> None:
    clock = FakeClock()
    rt = await Runtime.open(db_url, clock=clock)
    thread = await rt.create_thread("chat")
    await rt.store.set_status(
        thread.thread_id, ThreadStatus(state="running", since=clock.now + 1, reason=None)
    )
    await rt.close()
    clock.now += 1_000_000
    reopened = await Runtime.open(db_url, clock=clock)
    try:
        status = await (await reopened.thread(thread.thread_id)).status()
        assert (status.state, status.reason) == ("failed", "execution_lost")
        assert status.error == StatusError(
            type="ExecutionLost",
            message="The run was lost: the process running it stopped before it finished",
            retryable=True,
        )
    finally:
        await reopened.close()


@tool
def flaky(n: int) -> str:
    """Always fails the same way."""
    raise RuntimeError("database connection refused")


async def test_c01_047_the_breaker_names_the_tool(make_chat: Any) -> None:
    script = [Reply.tool_calls(Call("flaky", {"n": i})) for i in range(8)]
    chat = await make_chat(script, prompt={"tools": ["echo", "flaky"]}, extra=[flaky])
    state = await chat.thread()
    await _settle(chat, state.thread_id)
    status = await state.status()
    assert (status.state, status.reason) == ("failed", "repeated_tool_error")
    error = status.error
    assert error is not None and error.type == "RepeatedToolError"
    assert error.message == ('Tool "flaky" failed 8 times in a row: database connection refused')
    rows = {row.id: row for row in await _logs(chat, state.thread_id)}
    assert error.log_id in rows
    assert "database connection refused" in (rows[error.log_id].tool_results or "")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\n\n  first   line  \nsecond", "first line"),
        ("x" * 400, "x" * 299 + "…"),
        ("", "KeyError"),
    ],
)
def test_status_error_message_is_one_line(text: str, expected: str) -> None:
    error = StatusError.of_exception(KeyError("k"), message=text)
    assert error.message == expected


def test_to_wire_is_model_dump() -> None:
    cause = StatusError(type="KeyError", message="'k'", log_id="row", code=None)
    for status in (
        ThreadStatus(state="running", since=5),
        ThreadStatus.settled("stop_on_response", 6),
        ThreadStatus.settled("step_error", 7, cause),
    ):
        assert status.to_wire() == status.model_dump()
