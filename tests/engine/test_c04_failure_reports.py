"""Failures say why, where the user looks (spec 04 §4.2.5, §4.12.3, §4.14.4, §4.21): cases
C04-106 … C04-110. A missing credential is reported when the definitions load and is the
failed run's cause; failed runs, tool exceptions and failed requests reach stdlib logging.
Real Runtime on SQLite and PostgreSQL; the OpenAI adapter is the real one (it fails before
any request when it has no key)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, tool
from threadloom.providers.script import Call, Reply


def _keyless(provider: str = "openai") -> Definitions:
    return Definitions().add(
        Model(name="fast", provider=provider, model="gpt-4o-mini"),
        Prompt(name="p", model="fast", system="You help."),
        Agent(name="support", side_a=Side(prompt="p"), side_b=Side(label="Customer")),
    )


async def test_c04_106_a_missing_key_is_reported_at_load_and_on_use(
    db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with caplog.at_level(logging.WARNING, logger="threadloom"):
        runtime = await Runtime.open(db_url, definitions=_keyless())
    try:
        warnings = [r for r in caplog.records if r.name == "threadloom.providers"]
        assert [r.levelno for r in warnings] == [logging.WARNING]
        assert warnings[0].getMessage() == (
            'Model "fast" (provider openai): OPENAI_API_KEY is not set;'
            " its requests will fail until it is"
        )
        assert [(m.model, m.provider, m.variable) for m in runtime.missing_credentials] == [
            ("fast", "openai", "OPENAI_API_KEY")
        ]
        state = await runtime.create_thread("support")
        await runtime.send_message(state.thread_id, "hi")
        await runtime.wait_idle(state.thread_id, timeout=10)
        status = await state.status()
        assert (status.state, status.reason) == ("failed", "step_error")
        assert status.error is not None
        assert status.error.message == 'Model "fast" (openai): OPENAI_API_KEY is not set'
        assert status.error.code == "authentication" and status.error.retryable is False
        rows = list(await runtime.store.list_logs(state.thread_id, limit=None))
        assert len([r for r in rows if r.error_type == "api_error"]) == 1
        page = await state.get_messages(order="asc")
        assert [(m.role, m.content) for m in page.messages if m.role == "assistant"] in (
            [],
            [("assistant", None)],
        )
    finally:
        await runtime.close()


async def test_c04_107_no_warning_with_a_key_or_a_scripted_model(
    db_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    with caplog.at_level(logging.WARNING, logger="threadloom"):
        with_key = await Runtime.open(db_url, definitions=_keyless())
        await with_key.close()
        scripted = await Runtime.open(db_url, definitions=_keyless("scripted"))
        await scripted.close()
    assert with_key.missing_credentials == [] and scripted.missing_credentials == []
    assert [r for r in caplog.records if r.name == "threadloom.providers"] == []


async def test_c04_108_failed_runs_are_logged(
    make_chat: Any, caplog: pytest.LogCaptureFixture
) -> None:
    chat = await make_chat(
        [
            Reply.error("upstream refused", "invalid_request", retryable=False),
            Reply.tool_calls(Call("echo", {"v": 1}, id="call_dup")),
            Reply.text("ok"),
            Reply.tool_calls(Call("echo", {"v": 2}, id="call_dup")),
        ]
    )
    state = await chat.thread()
    with caplog.at_level(logging.ERROR, logger="threadloom.engine"):
        for text in ("one", "two", "three"):
            await chat.runtime.send_message(state.thread_id, text)
            await chat.runtime.wait_idle(state.thread_id, timeout=10)
    failed = [r for r in caplog.records if getattr(r, "threadloom_run_failed", False)]
    assert len(failed) == 2
    model, step = failed
    assert model.levelno == logging.ERROR and state.thread_id in model.getMessage()
    assert 'Model "M" (scripted): upstream refused' in model.getMessage()
    assert model.exc_info is None
    assert "Duplicate tool call id" in step.getMessage()
    assert step.exc_info is not None and step.exc_info[0].__name__ == "StepError"


@tool
def inventory(sku: str) -> str:
    """Look a SKU up in the inventory database."""
    raise RuntimeError("database down")


async def test_c04_109_tool_exceptions_are_logged_with_their_traceback(
    make_chat: Any, caplog: pytest.LogCaptureFixture
) -> None:
    chat = await make_chat(
        [Reply.tool_calls(Call("inventory", {"sku": "A1"})), Reply.text("sorry")],
        prompt={"tools": ["echo", "inventory"]},
        extra=[inventory],
    )
    state = await chat.thread()
    with caplog.at_level(logging.WARNING, logger="threadloom.tools"):
        await chat.runtime.send_message(state.thread_id, "stock?")
        await chat.runtime.wait_idle(state.thread_id, timeout=10)
    (record,) = [r for r in caplog.records if r.name == "threadloom.tools"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        f"tool inventory raised RuntimeError in thread {state.thread_id}: database down"
    )
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
    page = await state.get_messages(order="asc")
    tool_rows = [m for m in page.messages if m.role == "tool"]
    assert [m.content for m in tool_rows] == ["Failed to execute tool: database down"]
    assert (await state.status()).state == "idle"  # the run went on


async def test_c04_110_failed_requests_are_logged_in_full_at_debug(
    make_chat: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from threadloom.engine.options import EngineOptions

    chat = await make_chat(
        [Reply.error("busy", "overloaded"), Reply.error("still busy", "overloaded")],
        options=EngineOptions(backoff_base_s=0.001),
    )
    state = await chat.thread()
    with caplog.at_level(logging.DEBUG, logger="threadloom.engine"):
        await chat.runtime.send_message(state.thread_id, "where is my parcel")
        await chat.runtime.wait_idle(state.thread_id, timeout=10)
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG and "attempt" in r.msg]
    assert len(debug) == 2
    for record in debug:
        text = record.getMessage()
        assert "You are P." in text and "where is my parcel" in text
    rows = list(await chat.runtime.store.list_logs(state.thread_id, limit=None))
    (runtime_row,) = [r for r in rows if r.error_type == "step_execution_error"]
    assert (runtime_row.error or "").startswith(
        "All retry attempts exhausted for model M and 0 fallbacks: still busy"
    )
