"""Compaction over HTTP (spec 23 §23.6) on a real server and Runtime (users alice and bob,
admin root), both stores: compact, list, undo, and the errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from test_c09_stream import open_ws, recv, until


async def test_c23_020_compact_list_and_undo_over_http(make_api: Callable[..., Any]) -> None:
    """C23-020: POST /api/threads/{id}/compact answers 201 with the record; GET
    …/compactions lists it as active; DELETE …/compactions/{cid} answers it undone and
    the list then names no active compaction; the messages are all still there, and the
    thread's cost counts the summary request (spec 23 §23.2 rule 5)."""
    api = await make_api()
    alice = api.client("alice")
    created = await alice.post("/api/threads", json={"agent_id": "echo"})
    assert created.status_code == 200, created.text
    thread_id = created.json()["threadId"]
    state = await api.runtime.thread(thread_id)
    for n in range(4):
        await state.inject_message(role="user", content=f"question {n}")
        await state.inject_message(role="assistant", content=f"answer {n}")
    before = (await alice.get(f"/api/threads/{thread_id}/messages")).json()
    cost_before = (await alice.get(f"/api/threads/{thread_id}/cost")).json()
    made = await alice.post(f"/api/threads/{thread_id}/compact", json={"keep_messages": 2})
    assert made.status_code == 201, made.text
    record = made.json()
    assert record["thread_id"] == thread_id and record["message_count"] == 6
    assert record["trigger"] == "explicit" and record["undone_at"] is None
    assert "question 0" in record["summary"] and "answer 2" in record["summary"]
    listed = await alice.get(f"/api/threads/{thread_id}/compactions")
    assert listed.status_code == 200
    assert listed.json() == {"compactions": [record], "active": record["id"]}
    undone = await alice.delete(f"/api/threads/{thread_id}/compactions/{record['id']}")
    assert undone.status_code == 200
    assert undone.json()["undone_at"] is not None and undone.json()["id"] == record["id"]
    listed = await alice.get(f"/api/threads/{thread_id}/compactions")
    assert listed.json() == {"compactions": [undone.json()], "active": None}
    after = (await alice.get(f"/api/threads/{thread_id}/messages")).json()
    assert after["messages"] == before["messages"]  # its log rows moved the stream on
    cost = (await alice.get(f"/api/threads/{thread_id}/cost")).json()
    assert cost["requestCount"] == cost_before["requestCount"] + 1  # the summary request
    assert cost["messageCount"] == cost_before["messageCount"]


async def test_c23_021_errors_over_http(make_api: Callable[..., Any]) -> None:
    """C23-021: nothing to compact → 409 ``nothing_to_compact``; an unknown compaction →
    404 ``compaction_not_found``; another user's thread → 403 and nothing written; a bad
    ``keep_messages`` → 400 naming it."""
    api = await make_api()
    alice, bob = api.client("alice"), api.client("bob")
    thread_id = (await alice.post("/api/threads", json={"agent_id": "echo"})).json()["threadId"]
    empty = await alice.post(f"/api/threads/{thread_id}/compact", json={})
    assert (empty.status_code, empty.json()["code"]) == (409, "nothing_to_compact")
    missing = await alice.delete(f"/api/threads/{thread_id}/compactions/{'0' * 32}")
    assert (missing.status_code, missing.json()["code"]) == (404, "compaction_not_found")
    state = await api.runtime.thread(thread_id)
    for n in range(3):
        await state.inject_message(role="user", content=f"q{n}")
        await state.inject_message(role="assistant", content=f"a{n}")
    other = await bob.post(f"/api/threads/{thread_id}/compact", json={})
    assert other.status_code == 403
    assert (await bob.get(f"/api/threads/{thread_id}/compactions")).status_code == 403
    bad = await alice.post(f"/api/threads/{thread_id}/compact", json={"keep_messages": 0})
    assert bad.status_code == 400 and "keep_messages" in bad.text
    assert await api.runtime.store.list_compactions(thread_id) == []


async def test_c09_051_compactions_made_and_undone_are_stream_events(
    make_api: Callable[..., Any],
) -> None:
    """C09-051: a compaction made over HTTP reaches the thread's socket as an ``event``
    frame ``compaction_created`` whose data is the record and the active id; its undo as
    ``compaction_undone`` with the undone record and ``active`` null."""
    api = await make_api()
    alice = api.client("alice")
    created = await alice.post("/api/threads", json={"agent_id": "echo"})
    thread_id = created.json()["threadId"]
    state = await api.runtime.thread(thread_id)
    for n in range(3):
        await state.inject_message(role="user", content=f"question {n}")
        await state.inject_message(role="assistant", content=f"answer {n}")
    async with await open_ws(api, thread_id) as ws:
        await recv(ws)

        def named(kind: str) -> Callable[[dict[str, Any]], bool]:
            return lambda f: f["type"] == "event" and f.get("eventType") == kind

        made = await alice.post(f"/api/threads/{thread_id}/compact", json={"keep_messages": 2})
        record = made.json()
        frames = await until(ws, named("compaction_created"))
        assert frames[-1]["data"] == {"compaction": record, "active": record["id"]}
        undone = await alice.delete(f"/api/threads/{thread_id}/compactions/{record['id']}")
        frames = await until(ws, named("compaction_undone"))
        assert frames[-1]["data"] == {"compaction": undone.json(), "active": None}
