"""Spec 04 §4.12.2: the stall timeout between stream events. One timer watches the whole
stream (``engine.step.stream._Watch``): every event moves its deadline, the timer re-arms itself
when it fires early, so a steady stream never times out and a stalled one does."""

from __future__ import annotations

import json
import time
from typing import Any

from threadloom.engine.options import EngineOptions
from threadloom.providers.script import Reply


async def _llm_rows(chat: Any, tid: str) -> list[Any]:
    rows = await chat.runtime.store.list_logs(tid, limit=None)
    return [r for r in rows if r.provider != "system"]


async def _messages(state: Any) -> list[Any]:
    page = await state.get_messages(limit=50, include_silent=True)
    return list(page.messages)


async def test_steady_stream_longer_than_the_stall_timeout_completes(make_chat: Any) -> None:
    """Chunks every 0.05 s for ~0.4 s with a 0.15 s stall timeout: the timer fires before
    the moved deadline several times and re-arms; the answer is stored whole."""
    text = "abcdefgh"
    chat = await make_chat(
        [Reply.text(text, chunk_size=1, chunk_delay=0.05)],
        options=EngineOptions(first_chunk_timeout_s=0.15, stall_timeout_s=0.15),
    )
    state = await chat.thread()
    started = time.monotonic()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert time.monotonic() - started > 0.3  # longer than two stall timeouts
    rows = await _llm_rows(chat, state.thread_id)
    assert [(r.error_type, r.is_complete) for r in rows] == [(None, True)]
    answers = [(m.status, m.content) for m in await _messages(state) if m.role == "assistant"]
    assert answers == [("completed", text)]
    assert (await state.status()).reason == "stop_on_response"


async def test_stall_after_first_chunk_times_out(make_chat: Any) -> None:
    """A long first-chunk timeout, a short stall timeout: chunks stop after the first one
    (0.6 s between chunks) → the attempt fails with a timeout after ~0.15 s of silence,
    not after the first-chunk limit, and the partial text is kept on the failed message."""
    chat = await make_chat(
        [Reply.text("ab", chunk_size=1, chunk_delay=0.6), Reply.text("would answer")],
        options=EngineOptions(first_chunk_timeout_s=5.0, stall_timeout_s=0.15, backoff_base_s=0.01),
    )
    state = await chat.thread()
    started = time.monotonic()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert time.monotonic() - started < 0.5  # the stall limit fired, not the chunk delay
    rows = await _llm_rows(chat, state.thread_id)
    assert len(rows) == 1  # a timeout is not retried (spec 04 §4.12.3)
    assert rows[0].error_type == "api_error"
    assert [e["type"] for e in json.loads(rows[0].errors or "[]")] == ["timeout"]
    assert "no response data within 0.15 s" in (rows[0].error or "")
    failed = [m for m in await _messages(state) if m.role == "assistant"]
    assert [(m.status, m.content) for m in failed] == [("failed", "a")]
    assert (await state.status()).reason == "step_error"


async def test_stall_limit_shorter_than_first_chunk_limit_re_arms_earlier(
    make_chat: Any,
) -> None:
    """The first wait arms the timer at the first-chunk limit (5 s); the stall limit after
    the first chunk is shorter, so the timer must move earlier, not keep the 5 s one."""
    chat = await make_chat(
        [Reply.text("abc", chunk_size=1, chunk_delay=1.0)],
        options=EngineOptions(first_chunk_timeout_s=5.0, stall_timeout_s=0.1),
    )
    state = await chat.thread()
    started = time.monotonic()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert time.monotonic() - started < 0.8
    assert (await state.status()).reason == "step_error"


async def test_first_chunk_after_the_stall_limit_but_within_its_own_limit_completes(
    make_chat: Any,
) -> None:
    """The first wait's timer fires at the (shorter) stall limit, finds the first-chunk
    deadline not reached and re-arms for it: a first chunk later than the stall limit but
    within the first-chunk limit is no timeout."""
    chat = await make_chat(
        [Reply.text("late but fine", delay=0.3)],
        options=EngineOptions(first_chunk_timeout_s=2.0, stall_timeout_s=0.1),
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    answers = [m for m in await _messages(state) if m.role == "assistant"]
    assert [(m.status, m.content) for m in answers] == [("completed", "late but fine")]


async def test_no_first_chunk_times_out_at_the_first_chunk_limit_not_the_stall_limit(
    make_chat: Any,
) -> None:
    chat = await make_chat(
        [Reply.text("never", delay=3.0)],
        options=EngineOptions(first_chunk_timeout_s=0.4, stall_timeout_s=0.1),
    )
    state = await chat.thread()
    started = time.monotonic()
    await chat.runtime.send_message(state.thread_id, "Hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    elapsed = time.monotonic() - started
    assert 0.4 <= elapsed < 2.0
    rows = await _llm_rows(chat, state.thread_id)
    assert "no response data within 0.4 s" in (rows[0].error or "")
    assert (await state.status()).reason == "step_error"
