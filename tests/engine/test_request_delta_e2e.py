"""LLM log rows of real runs store their request bodies as deltas (engine/request/request_body.py,
store/sqlite/bodies.py) and read back exactly the request each attempt sent (spec 04
§4.25: ``request_body`` is the JSON of the request as built)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from store_probe import probe
from threadloom.engine.options import EngineOptions
from threadloom.providers.scripted import Call, Reply


def storage(runtime: Any) -> dict[str, tuple[str | None, int]]:
    """log id → (base id, keep) of every structured request body."""
    rows = probe(runtime).rows("SELECT log_id, base_id, keep FROM log_requests")
    return {log_id: (base, keep) for log_id, base, keep in rows}


async def llm_rows(runtime: Any, thread_id: str) -> list[Any]:
    rows = await runtime.store.list_logs(thread_id, limit=None, offset=0, kind=None)
    return [r for r in rows if r.kind is None and r.provider != "system"]


def sent(request: Any) -> list[dict[str, Any]]:
    """The messages of a request the provider received, as the log body writes them."""
    return [json.loads(m.model_dump_json()) for m in request.messages]


async def test_every_attempt_reads_back_the_request_it_sent_and_most_are_deltas(
    make_chat: Any,
) -> None:
    script = []
    for turn in range(8):
        script += [Reply.tool_calls(Call("echo", {"v": turn})), Reply.text(f"done {turn}")]
    script.insert(5, Reply.error("flaky"))  # one retried attempt: a row with nothing new
    chat = await make_chat(script, options=EngineOptions(backoff_base_s=0.01))
    state = await chat.thread()
    for turn in range(8):
        await chat.runtime.send_message(state.thread_id, f"question {turn}")
        await chat.runtime.wait_idle(state.thread_id, timeout=10)

    rows = await llm_rows(chat.runtime, state.thread_id)
    assert len(rows) == 17 == len(chat.provider.requests)
    for row, request in zip(rows, chat.provider.requests, strict=True):
        body = json.loads(row.request_body)
        assert body["model"] == "scripted-1"
        assert body["messages"] == sent(request)
        assert body["_metadata"]["systemPrompt"] == "You are P."
        single = await chat.runtime.store.get_log(state.thread_id, row.id)
        assert single is not None and single.request_body == row.request_body

    stored = storage(chat.runtime)
    roots = [r.id for r in rows if stored[r.id][0] is None]
    assert roots == [rows[0].id]  # one full body, then deltas on the previous row
    for previous, row in itertools.pairwise(rows):
        assert stored[row.id][0] == previous.id
    retry = next(r for r in rows if r.retry_of_log_id is not None)
    assert stored[retry.id][1] == len(json.loads(retry.request_body)["messages"]) - 1


async def test_an_edited_message_starts_a_new_chain_that_reads_back_the_edit(
    make_chat: Any,
) -> None:
    chat = await make_chat([Reply.text("one"), Reply.text("two"), Reply.text("three")])
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "first")
    await chat.runtime.wait_idle(state.thread_id, timeout=10)
    page = await state.get_messages(limit=10)
    first_user = next(m for m in page.messages if m.role == "user")
    await state.update_message(first_user.id, {"content": "first, edited"})
    await chat.runtime.send_message(state.thread_id, "second")
    await chat.runtime.wait_idle(state.thread_id, timeout=10)

    rows = await llm_rows(chat.runtime, state.thread_id)
    assert len(rows) == 2
    last = json.loads(rows[-1].request_body)["messages"]
    assert [m.get("content") for m in last] == [
        "You are P.",
        "first, edited",
        "one",
        "second",
    ]
    assert last == sent(chat.provider.requests[-1])
    assert storage(chat.runtime)[rows[-1].id][0] is None  # the edit rebuilt: a new root
