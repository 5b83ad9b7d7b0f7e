"""A step's pending message held back while its request is young (engine/step/pending.py).

An answer that comes within ``EngineOptions.pending_hold_s`` is stored with its pending
message in one commit; anything that could see the difference — a reader, a writer, a
subscriber, a failure, a stop — commits the pending message first, so it finds what it
would have found without the hold.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from test_c04_control import _logs, _messages, _requested, _status, _until
from test_store_refusals import REFUSAL, refusing

from threadloom.define import hook
from threadloom.engine.options import EngineOptions
from threadloom.engine.step.pending import HeldPending
from threadloom.providers.scripted import Call, Reply

LONG_HOLD = EngineOptions(pending_hold_s=30.0)
"""A hold no test outlasts: only what the test does commits the pending message."""


async def _raw_messages(chat: Any, tid: str) -> list[Any]:
    """The stored messages, read from the store itself (no hub: nothing is committed)."""
    return list(await chat.runtime.store.top_level_history(tid))


async def _turn_commits(make_chat: Any, options: EngineOptions | None) -> tuple[int, Any, Any]:
    chat = await make_chat(
        [Reply.tool_calls(Call("echo", {"v": 1}, id="c1")), Reply.text("done")],
        options=options,
    )
    state = await chat.thread()
    before = chat.runtime.store.commits
    await chat.runtime.send_message(state.thread_id, "hello")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    return chat.runtime.store.commits - before, chat, state


async def _has_pending(chat: Any, tid: str) -> bool:
    return any(m.status == "pending" for m in await _raw_messages(chat, tid))


async def _in_request(make_chat: Any, script: list[Any], options: EngineOptions) -> Any:
    """A chat thread sent "hi", once the provider has its first request: (chat, state)."""
    chat = await make_chat(script, options=options)
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "hi")
    await _requested(chat)
    return chat, state


async def _records(chat: Any, state: Any) -> None:
    """What a turn stores, whether its pending messages were held or not."""
    messages = await _messages(state)
    assert [(m.role, m.status, m.content) for m in messages] == [
        ("user", "completed", "hello"),
        ("assistant", "completed", None),
        ("tool", "completed", "echo 1"),
        ("assistant", "completed", "done"),
    ]
    rows = await _logs(chat, state.thread_id)
    assert [(r.is_complete, r.finish_reason) for r in rows] == [
        (True, "tool_calls"),
        (True, "stop"),
    ]
    assert all(r.created_at > 0 and r.request_body and r.response_body for r in rows)
    assert [m.log_id for m in messages if m.role == "assistant"] == [r.id for r in rows]
    assert await _status(state) == ("idle", "stop_on_response")


async def test_a_quick_answer_is_stored_with_its_pending_message(make_chat: Any) -> None:
    commits = []
    for options in (None, EngineOptions(pending_hold_s=0)):
        count, chat, state = await _turn_commits(make_chat, options)
        commits.append(count)
        await _records(chat, state)
        await chat.runtime.close()  # one runtime on the file at a time
    # held: the send, the finalised tool call, the tool result, the final message;
    # not held: each pending message in a commit of its own too
    assert commits == [4, 6]


async def test_the_timer_commits_a_pending_message_whose_answer_is_slow(make_chat: Any) -> None:
    chat, state = await _in_request(
        make_chat, [Reply.text("late", delay=5)], EngineOptions(pending_hold_s=0.05)
    )
    tid = state.thread_id
    await _until(lambda: _has_pending(chat, tid))  # no reader, no writer: the timer
    rows = await _logs(chat, tid)
    assert [r.is_complete for r in rows] == [False]
    await chat.runtime.stop(tid)


async def test_a_reader_sees_the_pending_message(make_chat: Any) -> None:
    chat, state = await _in_request(make_chat, [Reply.text("late", delay=5)], LONG_HOLD)
    tid = state.thread_id
    assert [m.status for m in await _raw_messages(chat, tid)] == ["completed"]  # held
    page = await state.get_messages(order="asc")
    assert [(m.role, m.status) for m in page.messages] == [
        ("user", "completed"),
        ("assistant", "pending"),
    ]
    assert [r.is_complete for r in await _logs(chat, tid)] == [False]
    await chat.runtime.stop(tid)


async def test_a_write_during_the_hold_is_stored_after_the_pending_message(
    make_chat: Any,
) -> None:
    chat = await make_chat([Reply.text("answer", delay=0.3)], options=LONG_HOLD)
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "question")
    await _requested(chat)
    await state.inject_message(role="user", content="meanwhile")
    await chat.runtime.wait_idle(tid, timeout=5)
    messages = await _messages(state)
    assert [(m.role, m.content) for m in messages] == [
        ("user", "question"),
        ("assistant", "answer"),  # stored pending before the injected message
        ("user", "meanwhile"),
    ]
    assert messages[1].created_at < messages[2].created_at


async def test_a_subscriber_sees_the_pending_message_before_its_chunks(make_chat: Any) -> None:
    """Watched when the request starts: no hold. Watched only from the middle of it: the
    chunks wait until the pending message is committed and published."""
    chat = await make_chat(
        [
            Reply.text("abcd", chunk_size=2, chunk_delay=0.05),
            Reply.text("efgh", chunk_size=2, delay=0.1, chunk_delay=0.05),
        ],
        options=LONG_HOLD,
    )
    state = await chat.thread()
    tid = state.thread_id
    watched = chat.runtime.events.subscribe(tid)
    await chat.runtime.send_message(tid, "one")
    await chat.runtime.wait_idle(tid, timeout=5)
    first = watched.drain()
    watched.close()
    await chat.runtime.send_message(tid, "two")
    await _requested(chat, 2)
    late = chat.runtime.events.subscribe(tid)  # joins during the second request
    await chat.runtime.wait_idle(tid, timeout=5)
    second = late.drain()
    late.close()
    answers = {m.content: m.id for m in await _messages(state) if m.role == "assistant"}
    for events, answer in ((first, "abcd"), (second, "efgh")):
        mid = answers[answer]
        shape = [
            (e.kind, e.data["chunk"] if e.kind == "message_chunk" else e.data["message"]["status"])
            for e in events
            if e.data.get("message_id") == mid or (e.data.get("message") or {}).get("id") == mid
        ]
        assert shape == [
            ("message", "pending"),
            ("message_chunk", answer[:2]),
            ("message_chunk", answer[2:]),
            ("message", "completed"),
        ]


async def test_a_stop_during_the_hold_settles_the_pending_message(make_chat: Any) -> None:
    chat, state = await _in_request(make_chat, [Reply.text("late", delay=5)], LONG_HOLD)
    tid = state.thread_id
    assert await chat.runtime.stop(tid) is True
    assert await _status(state) == ("idle", "aborted_by_user")
    rows = await _messages(state)
    assert [(m.role, m.status) for m in rows] == [
        ("user", "completed"),
        ("assistant", "failed"),
        ("system", "completed"),
    ]
    (row,) = await _logs(chat, tid)
    assert (row.is_complete, row.error, row.error_type) == (
        True,
        "Interrupted by user",
        "user_interrupted",
    )


async def test_a_failed_request_and_its_retry_are_logged_after_the_pending_message(
    make_chat: Any,
) -> None:
    chat = await make_chat(
        [Reply.error("overloaded"), Reply.text("ok")],
        options=EngineOptions(pending_hold_s=30.0, backoff_base_s=0.01),
    )
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "hi")
    await chat.runtime.wait_idle(tid, timeout=5)
    messages = await _messages(state)
    assert [(m.role, m.status, m.content) for m in messages] == [
        ("user", "completed", "hi"),
        ("assistant", "completed", "ok"),
    ]
    first, retry = await _logs(chat, tid)
    assert first.error_type == "api_error" and first.is_complete and first.created_at > 0
    assert retry.retry_of_log_id == first.id and retry.is_complete and retry.error is None
    assert messages[1].log_id == retry.id
    assert messages[1].created_at <= first.created_at <= retry.created_at


async def test_hooks_that_see_stored_messages_turn_the_hold_off(make_chat: Any) -> None:
    seen: list[str | None] = []

    @hook("after_create_message")
    async def note(state: Any, message: Any) -> None:
        seen.append(message.status)

    commits = []
    for options in (None, EngineOptions(pending_hold_s=0)):
        chat = await make_chat(
            [Reply.text("hi")], extra=[note], agent={"hooks": ("note",)}, options=options
        )
        state = await chat.thread()
        before = chat.runtime.store.commits
        await chat.runtime.send_message(state.thread_id, "hello")
        await chat.runtime.wait_idle(state.thread_id, timeout=5)
        commits.append(chat.runtime.store.commits - before)
        await chat.runtime.close()  # one runtime on the file at a time
    assert commits[0] == commits[1]
    assert seen.count("pending") == 2  # the hook saw each pending message stored


async def test_a_turn_leaves_no_reference_cycle(make_chat: Any) -> None:
    """A turn — its run, its steps, a hold whose timer fired or not — is freed by reference
    counting. With a thousand threads at once, a cycle through a hold left each step's
    records to the garbage collector's oldest generation (seen: 3.4× the objects it
    collected, +0.6 ms of CPU a turn in the concurrent benchmark)."""
    chat = await make_chat(
        [Reply.text("warm"), Reply.text("quick"), Reply.text("slow", delay=0.1)],
        options=EngineOptions(pending_hold_s=0.02),
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "first")  # what is made once
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    gc.collect()
    gc.disable()
    try:
        for text in ("one", "two"):  # claimed back; committed by the timer
            await chat.runtime.send_message(state.thread_id, text)
            await chat.runtime.wait_idle(state.thread_id, timeout=5)
        await asyncio.sleep(0.05)
        alive = [o for o in gc.get_objects() if isinstance(o, HeldPending)]
        cyclic = gc.collect()  # what reference counting could not free
    finally:
        gc.enable()
    assert alive == []
    assert cyclic == 0  # nor anything else of the two turns (the run, its steps, …)
    contents = [m.content for m in await _messages(state)]
    assert contents == ["first", "warm", "one", "quick", "two", "slow"]


async def test_a_model_slower_than_the_hold_is_not_held(make_chat: Any) -> None:
    """After an answer that outlasted the hold, the model's next pending message is
    committed before its request (no timer, no task); a quick answer brings the hold back."""
    chat = await make_chat(
        [Reply.text("slow", delay=0.6), Reply.text("slow too", delay=0.6), Reply.text("quick")],
        options=EngineOptions(pending_hold_s=0.5),
    )
    state = await chat.thread()
    tid = state.thread_id
    await chat.runtime.send_message(tid, "one")
    await chat.runtime.wait_idle(tid, timeout=5)
    assert chat.runtime.runs.slow_models == {"M"}
    await chat.runtime.send_message(tid, "two")
    await _requested(chat, 2)
    assert await _has_pending(chat, tid)  # stored before the request, not 0.5 s after it
    await chat.runtime.wait_idle(tid, timeout=5)
    before = chat.runtime.store.commits
    await chat.runtime.send_message(tid, "three")
    await chat.runtime.wait_idle(tid, timeout=5)
    assert chat.runtime.store.commits - before == 3  # the send, the pending, the answer
    assert chat.runtime.runs.slow_models == set()  # 'slow too' outlasted it; 'quick' not
    contents = [m.content for m in await _messages(state)]
    assert contents == ["one", "slow", "two", "slow too", "three", "quick"]


@pytest.mark.parametrize("delay", [0.0, 0.3], ids=["quick", "by-the-timer"])
async def test_a_store_that_refuses_the_pending_message_leaves_what_it_would_have_unheld(
    make_chat: Any, db_url: str, delay: float
) -> None:
    """The database refuses the step's pending message: held or not, the same records
    remain (no model message, the run failed with the database's reason), whether the
    finalisation and its fallback pair or the hold's timer met the refusal. (A refused
    answer, each write of a turn: test_store_refusals.py.)"""
    seen = []
    for hold in (0.0, 0.05 if delay else 30.0):
        chat = await make_chat(
            [Reply.text("answer", delay=delay)], options=EngineOptions(pending_hold_s=hold)
        )
        state = await chat.thread()
        with refusing(db_url, "messages", "NEW.role = 'assistant'"):
            await chat.runtime.send_message(state.thread_id, "hi")
            await chat.runtime.wait_idle(state.thread_id, timeout=5)
            rows = await _logs(chat, state.thread_id)
            seen.append(
                (
                    [(m.role, m.status, m.content) for m in await _messages(state)],
                    [(r.is_complete, (r.error or "").split("\n")[0], r.error_type) for r in rows],
                    await _status(state),
                )
            )
        await chat.runtime.close()
    unheld, held = seen
    assert held == unheld
    assert held == (
        [("user", "completed", "hi")],
        [(True, REFUSAL, "step_execution_error")],  # the database's own reason
        ("failed", "step_error"),
    )
