"""Spec 08 §8.5.1: a continue says what it starts (its run plan), and ``ifUnanswered``
refuses one that would only make the acting side answer again."""

from __future__ import annotations

import asyncio
from typing import Any

from conftest import Api


async def stored(api: Api, thread: str) -> list[dict[str, Any]]:
    response = await api.client().get(f"/api/threads/{thread}/messages?order=asc")
    assert response.status_code == 200
    found: list[dict[str, Any]] = response.json()["messages"]
    return found


async def answered(api: Api, text: str = "hi") -> tuple[str, dict[str, Any]]:
    """An ``echo`` thread after one exchange, and its answer."""
    thread = await api.thread()
    await api.client().post(f"/api/threads/{thread}/messages", json={"content": text})
    await api.settle(thread)
    last = (await stored(api, thread))[-1]
    assert (last["role"], last["content"]) == ("assistant", f"echo: {text}")
    return thread, last


async def test_c08_153_continue_on_a_finished_thread_says_it_answers_again(api: Api) -> None:
    """C08-153: the answer carries the run plan; the run stores a second answer."""
    thread, answer = await answered(api)
    response = await api.client().post(f"/api/threads/{thread}/continue", json={})
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "queued" and isinstance(body["queueId"], str)
    assert body["run"] == {
        "side": "a",
        "queued": 0,
        "after": {"id": answer["id"], "role": "assistant", "status": "completed"},
        "again": True,
    }
    await api.settle(thread)
    assert [m["content"] for m in await stored(api, thread)] == ["hi", "echo: hi", "echo: hi"]


async def test_c08_154_if_unanswered_refuses_a_second_answer(api: Api) -> None:
    """C08-154: 409 ``nothing_to_continue`` with the plan; nothing changes, the stop flag
    included; a bad ``ifUnanswered`` is a 400."""
    thread, answer = await answered(api)
    client = api.client()
    assert (await client.post(f"/api/threads/{thread}/stop", json={})).status_code == 200
    before = (await client.get(f"/api/threads/{thread}")).json()
    response = await client.post(f"/api/threads/{thread}/continue", json={"ifUnanswered": True})
    assert response.status_code == 409
    assert response.json() == {
        "error": "Nothing to continue: side a has already answered the last message",
        "code": "nothing_to_continue",
        "run": {
            "side": "a",
            "queued": 0,
            "after": {"id": answer["id"], "role": "assistant", "status": "completed"},
            "again": True,
        },
    }
    assert not api.runtime.running(thread)
    assert (await client.get(f"/api/threads/{thread}")).json() == before
    row = await api.runtime.store.get_thread(thread)
    assert row is not None and row.stopped  # the refused continue did not clear it
    assert [m["content"] for m in await stored(api, thread)] == ["hi", "echo: hi"]
    bad = await client.post(f"/api/threads/{thread}/continue", json={"ifUnanswered": "yes"})
    assert bad.status_code == 400
    assert bad.json()["error"] == "ifUnanswered must be true or false"
    sent = await client.post(f"/api/threads/{thread}/messages", json={"content": "more"})
    assert sent.status_code == 202
    await api.settle(thread)
    assert (await stored(api, thread))[-1]["content"] == "echo: more"


async def test_c08_155_an_unanswered_message_is_continued(api: Api) -> None:
    """C08-155: a trailing user message, a stopped run's note, and side b after side a's
    answer are not answers of the acting side: ``again`` is false and the run starts."""
    client = api.client()
    thread = await api.thread(initial_messages=[{"role": "user", "content": "q"}])
    question = (await stored(api, thread))[-1]
    response = await client.post(f"/api/threads/{thread}/continue", json={"ifUnanswered": True})
    assert response.status_code == 202
    run = response.json()["run"]
    assert run == {
        "side": "a",
        "queued": 0,
        "after": {"id": question["id"], "role": "user", "status": "completed"},
        "again": False,
    }
    await api.settle(thread)
    assert [m["content"] for m in await stored(api, thread)] == ["q", "echo: q"]
    as_b = await client.post(f"/api/threads/{thread}/continue", json={"side": "b"})
    assert as_b.status_code == 202
    assert as_b.json()["run"]["again"] is False  # side b's own answer would be a user one
    await api.settle(thread)

    gated = await api.thread("gate")
    await client.post(f"/api/threads/{gated}/messages", json={"content": "first"})
    await asyncio.wait_for(api.gate.entered.wait(), 10)
    assert (await client.post(f"/api/threads/{gated}/stop", json={})).status_code == 200
    note = (await stored(api, gated))[-1]
    assert (note["role"], note["content"]) == ("system", "Execution stopped by user")
    api.gate.open()
    again = await client.post(f"/api/threads/{gated}/continue", json={"ifUnanswered": True})
    assert again.status_code == 202
    assert again.json()["run"]["after"]["id"] == note["id"]
    assert again.json()["run"]["again"] is False
    await api.settle(gated)
