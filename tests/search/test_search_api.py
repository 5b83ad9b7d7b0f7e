"""``GET /api/search`` (spec 08 §8.14): threads found by the text of their messages over
HTTP on a real server, on both stores — who may see what, the hits' shape, the thread
list's filters combined with the text, paging, and the refusals."""

from __future__ import annotations

from typing import Any

from conftest import Api
from server.conftest import USERS


async def talk(api: Api, text: str, user: str = "alice", **body: Any) -> str:
    """A thread of ``echo`` with one exchange: ``text`` and ``echo: text``."""
    tid = await api.thread(user=user, **body)
    sent = await api.client(user).post(f"/api/threads/{tid}/messages", json={"content": text})
    assert sent.status_code == 202, sent.text
    await api.settle(tid)
    return tid


async def search(api: Api, query: str, user: str = "alice") -> dict[str, Any]:
    response = await api.client(user).get(f"/api/search?{query}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def ids(body: dict[str, Any]) -> list[str]:
    return sorted(hit["thread"]["id"] for hit in body["hits"])


async def test_c08_207_a_user_finds_only_their_threads(api: Api) -> None:
    mine = await talk(api, "where is my parcel")
    theirs = await talk(api, "my parcel is late", user="bob")
    assert ids(await search(api, "q=parcel")) == [mine]
    # user_id is ignored for a user: still their own
    assert ids(await search(api, f"q=parcel&user_id={USERS['bob'].id}")) == [mine]
    assert ids(await search(api, "q=parcel", user="bob")) == [theirs]
    assert ids(await search(api, "q=parcel", user="root")) == sorted([mine, theirs])
    only_bob = await search(api, f"q=parcel&user_id={USERS['bob'].id}", user="root")
    assert ids(only_bob) == [theirs]


async def test_c08_208_a_hit_names_the_thread_message_and_snippet(api: Api) -> None:
    tid = await talk(api, "The <b>blue</b> teapot & the kettle")
    body = await search(api, "q=teapot")
    assert body["total"] == 1 and body["hasMore"] is False
    (hit,) = body["hits"]
    listed = (await api.client().get("/api/threads")).json()["threads"]
    assert hit["thread"] == next(t for t in listed if t["id"] == tid)
    page = (await api.client().get(f"/api/threads/{tid}/messages?order=asc")).json()
    texts = {m["id"]: m["content"] for m in page["messages"]}
    # the user's text and the echo both match; the hit is one of them
    assert hit["matches"] == 2
    assert "teapot" in texts[hit["message_id"]]
    assert isinstance(hit["rank"], float)
    # the snippet is plain text in parts: markup stays text, the matched word is marked
    assert [p["text"] for p in hit["snippet"] if p["match"]] == ["teapot"]
    joined = "".join(p["text"] for p in hit["snippet"])
    assert "<b>blue</b> teapot" in joined


async def test_c08_209_filters_combine_with_the_text(api: Api) -> None:
    billing = await talk(api, "refund my order", tags=["billing"])
    urgent = await talk(api, "refund now please", tags=["billing", "urgent"])
    plain = await talk(api, "refund question")
    assert ids(await search(api, "q=refund")) == sorted([billing, urgent, plain])
    assert ids(await search(api, "q=refund&tag=billing")) == sorted([billing, urgent])
    assert ids(await search(api, "q=refund&tag=urgent")) == [urgent]
    assert ids(await search(api, "q=refund&agent_id=echo")) == sorted([billing, urgent, plain])
    assert ids(await search(api, "q=refund&agent_id=gate")) == []
    assert ids(await search(api, "q=refund&status=idle")) == sorted([billing, urgent, plain])
    assert ids(await search(api, "q=refund&status=running,failed")) == []
    assert ids(await search(api, "q=refund+-please")) == sorted([billing, plain])
    assert ids(await search(api, "q=%22my+order%22")) == [billing]


async def test_c08_210_paged_with_total_and_has_more(api: Api) -> None:
    made = [await talk(api, f"lantern number {i}") for i in range(5)]
    first = await search(api, "q=lantern&limit=2")
    second = await search(api, "q=lantern&limit=2&offset=2")
    last = await search(api, "q=lantern&limit=2&offset=4")
    assert [b["total"] for b in (first, second, last)] == [5, 5, 5]
    assert [b["hasMore"] for b in (first, second, last)] == [True, True, False]
    seen = [h["thread"]["id"] for b in (first, second, last) for h in b["hits"]]
    assert sorted(seen) == sorted(made)
    beyond = await search(api, "q=lantern&offset=50")
    assert beyond == {"hits": [], "total": 5, "hasMore": False}
    # a text with no word to look for finds nothing, without an error
    assert await search(api, "q=---") == {"hits": [], "total": 0, "hasMore": False}


async def test_c08_211_refusals(api: Api) -> None:
    client = api.client()
    for query, field in (
        ("", "q"),
        ("q=", "q"),
        ("q=%20%20", "q"),
        ("q=" + "a" * 501, "q"),
        ("q=x&limit=-1", "limit"),
        ("q=x&offset=x", "offset"),
        ("q=x&status=done", "status"),
        ("q=x&include_children=maybe", "include_children"),
        ("q=x%00", "q"),
    ):
        response = await client.get(f"/api/search?{query}")
        assert response.status_code == 400, (query, response.text)
        body = response.json()
        assert body["code"] == "invalid_request" and field in body["error"], (query, body)
    assert (await api.client(None).get("/api/search?q=x")).status_code == 401
    assert (await client.get("/api/search?q=" + "a" * 500)).status_code == 200


async def test_c08_212_declared_in_openapi(api: Api) -> None:
    doc = (await api.client().get("/openapi.json")).json()
    operation = doc["paths"]["/api/search"]["get"]
    assert operation["operationId"] == "search_threads"
    params = {p["name"]: p for p in operation["parameters"]}
    assert params["q"]["required"] is True
    assert params["q"]["schema"]["maxLength"] == 500
    assert {"limit", "offset", "user_id", "agent_id", "tag", "status"} <= set(params)
    assert "400" in operation["responses"] and "200" in operation["responses"]
