"""The routers pass over a path none of their routes could match (``server/routing.py``,
spec 08 §8.1.4 step 3): which route answers is what it was without the check."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from starlette.routing import Match

from threadloom.server.app import _build
from threadloom.server.routing import Router
from threadloom.server.settings import ServerSettings

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def entries(app: Any) -> list[Any]:
    return list(app.router.routes)


def resolve(app: Any, method: str, path: str, root: str = "") -> tuple[int | None, int | None]:
    """The index of the first route entry that matches ``method path`` fully, and of the
    first that matches it partly (FastAPI's own order of asking)."""
    scope = {
        "type": "http",
        "method": method,
        "path": root + path,
        "root_path": root,
        "headers": [],
        "query_string": b"",
    }
    full = partial = None
    for index, entry in enumerate(entries(app)):
        match, _ = entry.matches(dict(scope))
        if match == Match.FULL and full is None:
            full = index
        elif match == Match.PARTIAL and partial is None:
            partial = index
    return full, partial


def filled(path: str) -> str:
    return re.sub(r"\{[^}:]+(:path)?\}", "x1", path)


def test_c08_196_routers_resolve_as_without_their_pattern_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = _build(ServerSettings())
    included = [e for e in entries(app) if hasattr(e, "original_router")]
    assert included, "the app includes routers"
    assert all(isinstance(e.original_router, Router) for e in included)
    assert all(e.original_router.gate() is not None for e in included)

    paths: set[str] = set()
    for entry in included:
        for route in entry.original_router.routes:
            path = filled(route.path)
            paths.update({path, path.rstrip("/") + "/", path.rstrip("/") + "/extra"})
    paths.update({"/", "/api", "/api/", "/api/nope", "/apix/threads"})
    checked = sorted(paths)
    with_check = {
        (m, p, root): resolve(app, m, p, root)
        for m in METHODS
        for p in checked
        for root in ("", "/tl")
    }
    assert any(full is not None for full, _ in with_check.values())
    assert any(full is None and partial is not None for full, partial in with_check.values())

    monkeypatch.setattr(Router, "gate", lambda self: None)
    for router in (e.original_router for e in included):
        router._gate_routes = -1  # asked again: None now, so every route is tried
    without = {key: resolve(app, *key) for key in with_check}
    assert with_check == without


async def test_c08_196_requests_route_through_the_checks(make_api: Any) -> None:
    api = await make_api()
    thread = await api.thread()
    await api.settle(thread)
    client = api.client()
    assert (await client.get("/api/health")).status_code == 200
    page = await client.get(f"/api/threads/{thread}/messages")
    assert page.status_code == 200 and page.json()["total"] == 0
    assert (await client.get(f"/api/threads/{thread}")).json()["thread"]["id"] == thread
    missing = await client.get("/api/schedulesx")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    wrong = await client.put(f"/api/threads/{thread}/messages")
    assert wrong.status_code == 405
    assert wrong.json()["code"] == "method_not_allowed"
    assert "GET" in wrong.headers["allow"] and "POST" in wrong.headers["allow"]


async def test_c08_196_root_path_behind_a_proxy(make_api: Any) -> None:
    api = await make_api()
    thread = await api.thread()
    transport = httpx.ASGITransport(app=api.app, root_path="/tl")
    headers = dict(api.client().headers)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://t", headers=headers
    ) as client:
        found = await client.get(f"/tl/api/threads/{thread}")
        assert found.status_code == 200 and found.json()["thread"]["id"] == thread
        missing = await client.get("/tl/api/nope")
        assert missing.status_code == 404
