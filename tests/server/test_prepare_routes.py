"""``prepare_routes``: ``threadloom serve`` has FastAPI prepare every route at start-up, so
the first request to a late one (a web UI page, its static files) does not pay for all of
them. Preparing changes nothing a request sees: each route answers as before, on both
stores."""

from __future__ import annotations

from typing import Any

from threadloom.server.app import prepare_routes


async def test_prepared_routes_answer_as_before(make_api: Any) -> None:
    api = await make_api()
    thread = await api.thread()
    await api.settle(thread)
    client = api.client()
    before = {
        "thread": (await client.get(f"/api/threads/{thread}")).json(),
        "page": (await client.get(f"/threads/{thread}")).text,
    }
    prepare_routes(api.app.app)
    prepare_routes(api.app.app)  # again: nothing more to do, nothing changed
    assert (await client.get(f"/api/threads/{thread}")).json() == before["thread"]
    page = await client.get(f"/threads/{thread}")
    assert page.status_code == 200 and page.text == before["page"]
    messages = await client.get(f"/api/threads/{thread}/messages", params={"limit": 100})
    assert messages.status_code == 200 and messages.json()["total"] == 0
    assert (await client.get("/ui/static/js/thread.js")).status_code == 200
    missing = await client.get("/api/nope")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    refused = await api.client(user=None).get(f"/api/threads/{thread}")
    assert refused.status_code == 401
