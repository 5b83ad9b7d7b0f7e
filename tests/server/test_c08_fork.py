"""Forks over HTTP (spec 08 §8.3.8, issue 35 item 3) against a real server on SQLite and
PostgreSQL: ``POST /api/threads/{id}/fork`` copies the history up to a message (on to the
end of an open tool round, with the files its attachments name), optionally edited;
``GET /api/threads/{id}/forks`` and the ``forked_from_*`` fields show the lineage both
ways; the original never changes."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import httpx
from test_c09_list_events import events_ws
from test_c09_stream import until

from conftest import Api


async def history(client: httpx.AsyncClient, thread: str) -> list[dict[str, Any]]:
    page = await client.get(f"/api/threads/{thread}/messages", params={"limit": 1000})
    assert page.status_code == 200, page.text
    messages: list[dict[str, Any]] = page.json()["messages"]
    return messages


async def chatted(api: Api, *texts: str) -> str:
    """A thread of ``echo`` where alice said each text and the model answered it."""
    thread = await api.thread(tags=["kept"], arguments={"shop": "north"})
    alice = api.client()
    for text in texts:
        sent = await alice.post(f"/api/threads/{thread}/messages", json={"content": text})
        assert sent.status_code in (200, 202), sent.text
        await api.settle(thread)
    return thread


async def fork(
    client: httpx.AsyncClient, thread: str, message_id: str, **body: Any
) -> httpx.Response:
    return await client.post(f"/api/threads/{thread}/fork", json={"message_id": message_id, **body})


def call(call_id: str, name: str = "lookup") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


async def test_c08_177_a_fork_copies_the_history_up_to_the_message(api: Api) -> None:
    """C08-177: the fork holds copies (new ids, same roles, texts and times) of the
    messages up to the fork point, the original's agent, owner, tags and arguments, is idle
    and names its origin; the original is unchanged."""
    thread = await chatted(api, "a", "b")
    alice = api.client()
    before = await history(alice, thread)
    assert [m["content"] for m in before] == ["a", "echo: a", "b", "echo: b"]
    seq_before = (await alice.get(f"/api/threads/{thread}")).json()["seq"]
    point = before[1]
    made = await fork(alice, thread, point["id"])
    assert made.status_code == 200, made.text
    body = made.json()
    fork_id = body["threadId"]
    assert fork_id != thread and body["copiedCount"] == 2
    item = body["thread"]
    assert item["id"] == fork_id
    assert (item["forked_from_thread_id"], item["forked_from_message_id"]) == (
        thread,
        point["id"],
    )
    copies = await history(alice, fork_id)
    assert [(m["role"], m["content"], m["created_at"]) for m in copies] == [
        (m["role"], m["content"], m["created_at"]) for m in before[:2]
    ]
    assert not {m["id"] for m in copies} & {m["id"] for m in before}
    assert body["messageId"] == copies[-1]["id"]
    detail = (await alice.get(f"/api/threads/{fork_id}")).json()
    original = (await alice.get(f"/api/threads/{thread}")).json()
    for key in ("agent_id", "origin_agent_id", "user_id", "tags", "arguments", "overlap"):
        assert detail["thread"][key] == original["thread"][key], key
    assert detail["thread"]["tags"] == ["kept"]
    assert detail["thread"]["arguments"] == {"shop": "north"}
    assert detail["status"]["state"] == "idle" and detail["status"]["reason"] is None
    assert detail["stats"]["message_count"] == 2
    assert await history(alice, thread) == before
    assert original["seq"] == seq_before


async def test_c08_178_edit_and_rerun(api: Api) -> None:
    """C08-178: with ``content`` the copy of the fork point has the new text; a continue on
    the fork answers it there, and the original keeps its messages."""
    thread = await chatted(api, "a", "b")
    alice = api.client()
    before = await history(alice, thread)
    made = await fork(alice, thread, before[2]["id"], content="c")
    assert made.status_code == 200, made.text
    fork_id = made.json()["threadId"]
    copies = await history(alice, fork_id)
    assert [(m["role"], m["content"]) for m in copies] == [
        ("user", "a"),
        ("assistant", "echo: a"),
        ("user", "c"),
    ]
    ran = await alice.post(f"/api/threads/{fork_id}/continue", json={})
    assert ran.status_code == 202, ran.text
    await api.settle(fork_id)
    assert [m["content"] for m in await history(alice, fork_id)][-1] == "echo: c"
    assert [m["content"] for m in await history(alice, thread)] == [
        "a",
        "echo: a",
        "b",
        "echo: b",
    ]


async def test_c08_179_lineage_is_shown_both_ways(api: Api) -> None:
    """C08-179: the fork's detail and list item name its origin, the original's are null;
    ``…/forks`` lists a thread's direct forks oldest first."""
    thread = await chatted(api, "a")
    alice = api.client()
    messages = await history(alice, thread)
    f1 = (await fork(alice, thread, messages[0]["id"])).json()["threadId"]
    f2 = (await fork(alice, thread, messages[1]["id"])).json()["threadId"]
    f1_first = (await history(alice, f1))[0]["id"]
    f3 = (await fork(alice, f1, f1_first)).json()["threadId"]
    detail = (await alice.get(f"/api/threads/{f1}")).json()["thread"]
    assert (detail["forked_from_thread_id"], detail["forked_from_message_id"]) == (
        thread,
        messages[0]["id"],
    )
    plain = (await alice.get(f"/api/threads/{thread}")).json()["thread"]
    assert plain["forked_from_thread_id"] is None and plain["forked_from_message_id"] is None
    listed = {
        t["id"]: t
        for t in (await alice.get("/api/threads", params={"limit": 100})).json()["threads"]
    }
    assert listed[f1]["forked_from_thread_id"] == thread
    assert listed[f3]["forked_from_thread_id"] == f1
    assert listed[f3]["forked_from_message_id"] == f1_first
    assert listed[thread]["forked_from_thread_id"] is None
    forks = await alice.get(f"/api/threads/{thread}/forks")
    assert forks.status_code == 200
    assert [t["id"] for t in forks.json()["forks"]] == [f1, f2]
    assert forks.json()["forks"][0]["last_message_preview"] == "a"
    assert [t["id"] for t in (await alice.get(f"/api/threads/{f1}/forks")).json()["forks"]] == [f3]
    assert (await alice.get(f"/api/threads/{f3}/forks")).json() == {"forks": []}
    # a deleted fork is no longer listed
    assert (await alice.delete(f"/api/threads/{f2}")).status_code == 200
    after = (await alice.get(f"/api/threads/{thread}/forks")).json()["forks"]
    assert [t["id"] for t in after] == [f1]


async def test_c08_180_a_fork_inside_a_tool_round_ends_the_round(api: Api) -> None:
    """C08-180: a fork point inside a tool round (the call message, or one of its results)
    carries the copy on to the round's last result; never a call without its result."""
    thread = await api.thread(
        initial_messages=[
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "content": "two"},
            {"role": "assistant", "content": "done"},
        ]
    )
    alice = api.client()
    messages = await history(alice, thread)
    for at, count in ((1, 4), (2, 4), (3, 4), (4, 5), (0, 1)):
        made = await fork(alice, thread, messages[at]["id"])
        assert made.status_code == 200, made.text
        assert made.json()["copiedCount"] == count, at
        copies = await history(alice, made.json()["threadId"])
        assert len(copies) == count
        calls = {c["id"] for m in copies if m["tool_calls"] for c in json.loads(m["tool_calls"])}
        answered = {m["tool_call_id"] for m in copies if m["role"] == "tool"}
        assert calls == answered
        assert [m["content"] for m in copies] == [m["content"] for m in messages[:count]]


async def test_c08_181_an_unanswered_call_cannot_be_forked(api: Api) -> None:
    """C08-181: a copy that would hold a call with no stored result is 409
    ``fork_point_unfinished`` naming the call's message, and creates nothing; an earlier
    fork point is fine."""
    thread = await api.thread(
        initial_messages=[
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [call("c9")]},
        ]
    )
    alice = api.client()
    messages = await history(alice, thread)
    total = (await alice.get("/api/threads")).json()["total"]
    refused = await fork(alice, thread, messages[1]["id"])
    assert refused.status_code == 409, refused.text
    assert refused.json()["code"] == "fork_point_unfinished"
    assert refused.json()["message_id"] == messages[1]["id"]
    assert (await alice.get("/api/threads")).json()["total"] == total
    ok = await fork(alice, thread, messages[0]["id"])
    assert ok.status_code == 200 and ok.json()["copiedCount"] == 1


async def test_c08_182_bad_forks_are_refused(api: Api) -> None:
    """C08-182: a bad body is 400 naming the field, an unknown message 404
    ``message_not_found``, another user 403, an unknown thread 404; nothing is created."""
    thread = await chatted(api, "a")
    other = await chatted(api, "z")
    tool_thread = await api.thread(
        initial_messages=[
            {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
        ]
    )
    alice = api.client()
    messages = await history(alice, thread)
    total = (await alice.get("/api/threads")).json()["total"]
    path = f"/api/threads/{thread}/fork"
    for body, field in (
        ({}, "message_id"),
        ({"message_id": 5}, "message_id"),
        ({"message_id": messages[0]["id"], "content": "  "}, "content"),
        ({"message_id": messages[0]["id"], "content": 7}, "content"),
    ):
        refused = await alice.post(path, json=body)
        assert refused.status_code == 400, (body, refused.text)
        assert refused.json()["details"][0]["field"] == field
    tool_result = (await history(alice, tool_thread))[1]["id"]
    edited_tool = await fork(alice, tool_thread, tool_result, content="other")
    assert edited_tool.status_code == 400, edited_tool.text
    assert edited_tool.json()["details"][0]["field"] == "content"
    for message_id in (str(uuid.uuid4()), (await history(alice, other))[0]["id"]):
        missing = await fork(alice, thread, message_id)
        assert (missing.status_code, missing.json()["code"]) == (404, "message_not_found")
    bob = api.client("bob")
    assert (await fork(bob, thread, messages[0]["id"])).status_code == 403
    assert (await bob.get(f"/api/threads/{thread}/forks")).status_code == 403
    unknown = await fork(alice, str(uuid.uuid4()), messages[0]["id"])
    assert (unknown.status_code, unknown.json()["code"]) == (404, "thread_not_found")
    assert (await alice.get("/api/threads")).json()["total"] == total


async def test_c08_183_an_admin_forks_for_the_owner(api: Api) -> None:
    """C08-183: whoever may read a thread may fork it; the fork is the original's owner's."""
    thread = await chatted(api, "a")
    alice = api.client()
    messages = await history(alice, thread)
    made = await fork(api.client("root"), thread, messages[1]["id"])
    assert made.status_code == 200, made.text
    fork_id = made.json()["threadId"]
    original = (await alice.get(f"/api/threads/{thread}")).json()["thread"]
    assert made.json()["thread"]["user_id"] == original["user_id"]
    listed = (await alice.get(f"/api/threads/{thread}/forks")).json()["forks"]
    assert [t["id"] for t in listed] == [fork_id]
    assert (await alice.get(f"/api/threads/{fork_id}")).status_code == 200
    assert (await api.client("bob").get(f"/api/threads/{fork_id}")).status_code == 403


async def test_c08_184_the_files_of_copied_attachments_come_along(api: Api) -> None:
    """C08-184: each file a copied message's attachment names is in the fork at the same
    path with the same bytes; other files are not; the two copies are independent."""
    data = b"the notes\n"
    thread = await api.thread(
        initial_messages=[
            {
                "role": "user",
                "content": "see the notes",
                "attachments": [
                    {
                        "name": "notes.txt",
                        "mimeType": "text/plain",
                        "data": base64.b64encode(data).decode(),
                    }
                ],
            },
            {"role": "assistant", "content": "read them"},
        ]
    )
    alice = api.client()
    stray = await alice.post(
        f"/api/threads/{thread}/fs/other/stray.txt",
        content=b"not named",
        headers={"Content-Type": "text/plain"},
    )
    assert stray.status_code == 201, stray.text
    messages = await history(alice, thread)
    ref = messages[0]["attachments"][0]
    made = await fork(alice, thread, messages[1]["id"])
    assert made.status_code == 200, made.text
    fork_id = made.json()["threadId"]
    copy = (await history(alice, fork_id))[0]
    assert copy["attachments"][0]["path"] == ref["path"]
    read = await alice.get(f"/api/threads/{fork_id}/fs{ref['path']}")
    assert read.status_code == 200 and read.content == data
    assert (await alice.get(f"/api/threads/{fork_id}/fs/other/stray.txt")).status_code == 404
    removed = await alice.delete(f"/api/threads/{fork_id}/fs{ref['path']}")
    assert removed.status_code == 204, removed.text
    kept = await alice.get(f"/api/threads/{thread}/fs{ref['path']}")
    assert kept.status_code == 200 and kept.content == data


async def test_c08_186_a_fork_is_announced_to_the_thread_list(api: Api) -> None:
    """C08-186: a fork is a ``thread_created`` frame on ``/api/events`` for its owner, whose
    item names its lineage."""
    thread = await chatted(api, "a")
    alice = api.client()
    point = (await history(alice, thread))[1]["id"]
    async with await events_ws(api) as ws:
        fork_id = (await fork(alice, thread, point)).json()["threadId"]
        frames = await until(
            ws, lambda f: f["type"] == "thread_created" and f["thread"]["id"] == fork_id
        )
    item = frames[-1]["thread"]
    assert (item["forked_from_thread_id"], item["forked_from_message_id"]) == (thread, point)
    assert item["agent_name"] == "echo"


async def test_c08_185_a_fork_outlives_its_original(api: Api) -> None:
    """C08-185: deleting the original leaves the fork, still naming it."""
    thread = await chatted(api, "a")
    alice = api.client()
    messages = await history(alice, thread)
    fork_id = (await fork(alice, thread, messages[1]["id"])).json()["threadId"]
    assert (await alice.delete(f"/api/threads/{thread}")).status_code == 200
    detail = await alice.get(f"/api/threads/{fork_id}")
    assert detail.status_code == 200
    assert detail.json()["thread"]["forked_from_thread_id"] == thread
    assert [m["content"] for m in await history(alice, fork_id)] == ["a", "echo: a"]
    gone = await alice.get(f"/api/threads/{thread}/forks")
    assert (gone.status_code, gone.json()["code"]) == (404, "thread_not_found")
