"""Spec 08 §8.1.9: a thread whose agent the served project does not have (an orphaned
thread, e.g. one written by another project's ``threadloom run`` on the same
``threadloom.db``) refuses work that could never run, and says so in its answers."""

from __future__ import annotations

import base64
from typing import Any

from conftest import USERS, Api
from threadloom.records import new_id
from threadloom.store.base import NewThread

GONE = "support_bot"  # an agent of another project: the served one has no such agent


async def orphan(api: Api) -> str:
    """A thread of alice's written by a project that has the agent ``GONE``: the row
    another project's runtime stores on the shared database."""
    row = await api.runtime.store.create_thread(
        NewThread(id=new_id(), agent_id=GONE, user_id=USERS["alice"].id)
    )
    return row.id


async def snapshot(api: Api, thread: str) -> dict[str, Any]:
    """What a refused request must leave unchanged: messages (queue entries included),
    files, the stream head and the status."""
    client = api.client()
    info = (await client.get(f"/api/threads/{thread}")).json()
    page = (await client.get(f"/api/threads/{thread}/messages?includeSilent=true")).json()
    files = (await client.get(f"/api/threads/{thread}/fs")).json()
    return {
        "messages": page["messages"],
        "seq": info["seq"],
        "status": info["status"],
        "stats": info["stats"],
        "files": files["files"],
    }


def refused(response: Any) -> None:
    assert response.status_code == 409, response.text
    body = response.json()
    assert body["code"] == "agent_not_found"
    assert body["agent_id"] == GONE
    assert body["error"].startswith(f"Agent not found: {GONE} ")


async def test_c08_150_a_send_to_an_orphaned_thread_is_409_and_stores_nothing(api: Api) -> None:
    """C08-150: POST messages (with and without an attachment, any role) → 409
    ``agent_not_found`` naming the agent; no message, queue entry, file, frame or status
    change. A terminated orphan still answers 423 (§8.1.4: it is refused anyway)."""
    thread = await orphan(api)
    client = api.client()
    before = await snapshot(api, thread)
    picture = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 32).decode()
    for body in (
        {"content": "hello?"},
        {"content": "as the bot", "role": "assistant"},
        {
            "content": "with a file",
            "attachments": [{"name": "a.png", "mimeType": "image/png", "data": picture}],
        },
        {"content": "retry", "metadata": {"client_message_id": "c-1"}},
    ):
        refused(await client.post(f"/api/threads/{thread}/messages", json=body))
    assert await snapshot(api, thread) == before
    assert before["stats"]["queued_count"] == 0 and before["messages"] == []
    await client.post(f"/api/threads/{thread}/terminate")
    response = await client.post(f"/api/threads/{thread}/messages", json={"content": "x"})
    assert response.status_code == 423


async def test_c08_151_continue_on_an_orphaned_thread_is_409(api: Api) -> None:
    """C08-151: POST continue (either side) → 409 ``agent_not_found``; nothing changes."""
    thread = await orphan(api)
    state = await api.runtime.thread(thread)
    await state.inject_message(role="user", content="left by the other project")
    client = api.client()
    before = await snapshot(api, thread)
    refused(await client.post(f"/api/threads/{thread}/continue", json={}))
    refused(await client.post(f"/api/threads/{thread}/continue", json={"side": "b"}))
    assert await snapshot(api, thread) == before
    assert not api.runtime.running(thread)


async def test_c08_152_thread_answers_say_orphaned_and_a_reassigned_thread_runs(
    api: Api,
) -> None:
    """C08-152: GET /api/threads and GET /api/threads/{id} carry ``orphaned`` (true for
    the orphan, whose detail ``agent`` is null; false for a thread of a served agent);
    after PATCH ``agent_id`` to a served agent it is false and a send is answered."""
    lost = await orphan(api)
    served = await api.thread()
    client = api.client()
    listed = {t["id"]: t for t in (await client.get("/api/threads")).json()["threads"]}
    assert listed[lost]["orphaned"] is True
    assert listed[lost]["agent"] == {"name": GONE, "title": GONE}
    assert listed[served]["orphaned"] is False
    detail = (await client.get(f"/api/threads/{lost}")).json()
    assert detail["thread"]["orphaned"] is True and detail["agent"] is None
    assert (await client.get(f"/api/threads/{served}")).json()["thread"]["orphaned"] is False

    patched = await client.patch(f"/api/threads/{lost}", json={"agent_id": "echo"})
    assert patched.status_code == 200
    assert (await client.get(f"/api/threads/{lost}")).json()["thread"]["orphaned"] is False
    sent = await client.post(f"/api/threads/{lost}/messages", json={"content": "back"})
    assert sent.status_code == 202
    await api.settle(lost)
    page = (await client.get(f"/api/threads/{lost}/messages?order=asc")).json()
    assert [m["content"] for m in page["messages"]] == ["back", "echo: back"]
