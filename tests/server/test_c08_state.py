"""A thread's shared state over HTTP (spec 08 §8.3.7, spec 02 §2.20) against a real server
on SQLite and PostgreSQL: read and replaced with ``GET``/``PUT /api/threads/{id}/state``,
versioned, refused whole when bad, published on the thread's stream as ``state_updated``;
and the Python client's ``threads.state`` / ``threads.set_state``."""

from __future__ import annotations

import json
import uuid
from typing import Any

from conftest import Api
from threadloom.client import AsyncClient, ConflictError
from threadloom.records import SHARED_STATE_MAX_BYTES


async def test_c08_156_get_and_put_the_state(make_api: Any) -> None:
    """C08-156: a new thread's state is ``{}`` at version 0 (``updated_at`` null); PUT
    replaces it whole and answers the stored state with its new version; GET reads it;
    another user's thread is 403, an unknown one 404."""
    api: Api = await make_api()
    thread = await api.thread()
    alice = api.client("alice")
    first = await alice.get(f"/api/threads/{thread}/state")
    assert first.status_code == 200
    assert first.json() == {"state": {}, "version": 0, "updated_at": None}
    put = await alice.put(f"/api/threads/{thread}/state", json={"state": {"a": [1, {"b": None}]}})
    assert put.status_code == 200, put.text
    body = put.json()
    assert (body["state"], body["version"]) == ({"a": [1, {"b": None}]}, 1)
    assert isinstance(body["updated_at"], int)
    again = await alice.put(f"/api/threads/{thread}/state", json={"state": {"c": "é"}})
    assert again.json()["state"] == {"c": "é"} and again.json()["version"] == 2
    assert (await alice.get(f"/api/threads/{thread}/state")).json() == again.json()
    bob = await api.client("bob").get(f"/api/threads/{thread}/state")
    assert bob.status_code == 403
    missing = await alice.get(f"/api/threads/{uuid.uuid4()}/state")
    assert (missing.status_code, missing.json()["code"]) == (404, "thread_not_found")


async def test_c08_157_a_stale_version_is_a_conflict(make_api: Any) -> None:
    """C08-157: PUT naming the stored version lands; naming another is 409
    ``state_conflict`` with the stored ``version`` and changes nothing."""
    api: Api = await make_api()
    thread = await api.thread()
    alice = api.client("alice")
    path = f"/api/threads/{thread}/state"
    ok = await alice.put(path, json={"state": {"n": 1}, "version": 0})
    assert ok.status_code == 200 and ok.json()["version"] == 1
    stale = await alice.put(path, json={"state": {"n": 2}, "version": 0})
    assert stale.status_code == 409
    assert (stale.json()["code"], stale.json()["version"]) == ("state_conflict", 1)
    assert (await alice.get(path)).json()["state"] == {"n": 1}


async def test_c08_158_bad_states_are_refused_whole(make_api: Any) -> None:
    """C08-158: a state that is not an object, a negative or non-integer version, a body
    without state → 400 naming the field; a state over the limit → 413
    ``payload_too_large``; each changes nothing."""
    api: Api = await make_api()
    thread = await api.thread()
    alice = api.client("alice")
    path = f"/api/threads/{thread}/state"
    for body, field in (
        ({"state": [1]}, "state"),
        ({"state": "x"}, "state"),
        ({}, "state"),
        ({"state": {}, "version": -1}, "version"),
        ({"state": {}, "version": True}, "version"),
    ):
        refused = await alice.put(path, json=body)
        assert refused.status_code == 400, (body, refused.text)
        assert refused.json()["details"][0]["field"] == field
    big = {"state": {"blob": "x" * SHARED_STATE_MAX_BYTES}}
    large = await alice.put(
        path, content=json.dumps(big), headers={"Content-Type": "application/json"}
    )
    assert (large.status_code, large.json()["code"]) == (413, "payload_too_large")
    assert (await alice.get(path)).json()["version"] == 0


async def test_c08_159_a_change_is_a_state_updated_frame_of_the_stream(make_api: Any) -> None:
    """C08-159 (spec 09 §9.9.8): a change is a durable ``state_updated`` frame with the
    whole state and its version; a replay from before it gives it too."""
    api: Api = await make_api()
    thread = await api.thread()
    alice = api.client("alice")
    await alice.put(f"/api/threads/{thread}/state", json={"state": {"todos": ["milk"]}})
    frames: list[dict[str, Any]] = []
    headers = {"Accept": "text/event-stream"}
    async with alice.stream(
        "GET", f"/api/threads/{thread}/stream?since=0", headers=headers
    ) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                frames.append(json.loads(line[6:]))
                if frames[-1]["type"] == "state_updated":
                    break
    frame = frames[-1]
    assert frame["type"] == "state_updated" and isinstance(frame["seq"], int)
    assert (frame["state"], frame["version"]) == ({"todos": ["milk"]}, 1)


async def test_c08_160_the_python_client_reads_and_replaces_the_state(make_api: Any) -> None:
    """C08-160 (spec 11): ``client.threads.state`` and ``set_state`` (with ``version``: a
    stale one raises ``ConflictError`` whose code is ``state_conflict``)."""
    api: Api = await make_api()
    thread = await api.thread()
    async with AsyncClient(api.base, token=api.keys["alice"]) as client:
        assert (await client.threads.state(thread)).version == 0
        written = await client.threads.set_state(thread, {"k": [1]}, version=0)
        assert (written.state, written.version) == ({"k": [1]}, 1)
        assert (await client.threads.state(thread)).state == {"k": [1]}
        try:
            await client.threads.set_state(thread, {"k": 2}, version=0)
        except ConflictError as exc:
            assert exc.code == "state_conflict"
        else:
            raise AssertionError("a stale version was accepted")
