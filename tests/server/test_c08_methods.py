"""Methods of spec 08 §8.1.4 step 3 (issue 23 item 10): ``HEAD`` on every GET route answers
as the ``GET`` without a body; ``Allow`` lists only what the path serves (``/api/threads/
owners`` is not a thread id); ``cascade`` must be a boolean, ``null`` included (§8.5.2)."""

from __future__ import annotations

import asyncio

import httpx
from fastapi.routing import iter_route_contexts

from conftest import Api
from threadloom.server.app import _build
from threadloom.server.settings import ServerSettings


def get_paths() -> list[str]:
    """Every GET path under /api, from the app's route table."""
    routes = iter_route_contexts(_build(ServerSettings()).router.routes)
    return sorted(
        {
            r.path
            for r in routes
            if r.path and r.path.startswith("/api") and "GET" in (r.methods or ())
        }
    )


async def test_head_answers_every_get_route_like_get_without_a_body(api: Api) -> None:
    client = api.client("root")
    thread = await api.thread(user="root")
    assert (await client.post(f"/api/threads/{thread}/fs/a.txt", json={"data": "aGk="})).is_success
    paths = get_paths()
    assert "/api/threads/{id:thread_id}" in paths and "/api/health" in paths
    for template in paths:
        url = (
            template.replace("{id:thread_id}", thread)
            .replace("{id}", thread)
            .replace("{log_id}", "no-such-log")
            .replace("{path:fspath}", "a.txt")
        )
        if template == "/api/threads/{id}/stream":  # SSE: the headers, then the end
            head = await asyncio.wait_for(
                client.head(url, headers={"Accept": "text/event-stream"}), 10
            )
            assert head.status_code == 200, (url, head.text)
            assert head.headers["content-type"].startswith("text/event-stream")
            assert head.content == b""
            continue
        got = await client.get(url)
        head = await client.head(url)
        assert head.status_code == got.status_code, (url, head.status_code, got.text)
        assert head.content == b"", url
        assert head.headers.get("content-type") == got.headers.get("content-type"), url
        assert head.headers.get("content-length") == got.headers.get("content-length"), url
        assert head.headers["x-request-id"] and head.headers["x-content-type-options"] == "nosniff"


async def test_head_of_a_path_without_get_is_405_and_of_an_unknown_path_404(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    response = await client.head(f"/api/threads/{thread}/continue")
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert (await client.head("/api/nope")).status_code == 404
    allowed = (await client.put(f"/api/threads/{thread}")).headers["allow"]
    assert allowed == "GET, HEAD, PATCH, DELETE"


async def test_owners_is_not_a_thread_id(api: Api) -> None:
    client = api.client()
    await api.thread()
    for method in ("OPTIONS", "PATCH", "DELETE", "PUT", "POST"):
        response = await client.request(method, "/api/threads/owners", json={"tags": ["x"]})
        assert response.status_code == 405, (method, response.text)
        assert response.json()["code"] == "method_not_allowed"
        assert response.headers["allow"] == "GET, HEAD", method
    owners = await client.get("/api/threads/owners")
    assert owners.status_code == 200 and owners.json()["owners"][0]["thread_count"] == 1
    # a thread path still takes any other segment (an unknown id is the thread 404)
    missing = await client.patch("/api/threads/owners2", json={"tags": []})
    assert missing.status_code == 404 and missing.json()["code"] == "thread_not_found"


async def test_cascade_null_is_a_400_and_changes_nothing(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    for action in ("stop", "terminate"):
        for value in (None, "true", 1, [], {}):
            response = await client.post(f"/api/threads/{thread}/{action}", json={"cascade": value})
            assert response.status_code == 400, (action, value, response.text)
            body = response.json()
            assert body["error"] == "cascade must be a boolean"
            assert body["details"] == [{"field": "cascade", "problem": "must be a boolean"}]
    detail = (await client.get(f"/api/threads/{thread}")).json()
    assert detail["thread"]["terminated"] is None
    assert (await client.post(f"/api/threads/{thread}/stop")).status_code == 200
    stopped = await client.post(f"/api/threads/{thread}/stop", json={"cascade": False})
    assert stopped.status_code == 200


async def test_a_head_on_a_stream_ends_at_once(api: Api) -> None:
    """The SSE answer of a HEAD ends with its headers: the connection is free again."""
    thread = await api.thread()
    async with httpx.AsyncClient(base_url=api.base, timeout=10) as client:
        client.headers["Authorization"] = f"Bearer {api.keys['alice']}"
        for _ in range(3):
            response = await client.head(
                f"/api/threads/{thread}/stream", headers={"Accept": "text/event-stream"}
            )
            assert response.status_code == 200
        assert (await client.get(f"/api/threads/{thread}")).status_code == 200
