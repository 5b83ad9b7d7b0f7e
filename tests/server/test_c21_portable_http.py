"""Threads that move over HTTP (spec 21 §21.6): ``GET /api/threads/{id}/export`` and
``POST /api/threads/import`` on a real server, on both stores."""

from __future__ import annotations

import json

from conftest import USERS, Api
from threadloom.records.portable import VERSION, parse_export


async def test_c21_008_export_and_import_over_http(api: Api) -> None:
    """C21-008: the owner exports a thread (the file, as an attachment); another user
    gets the thread's 404/403 and cannot import a file of threads not theirs (403); the
    owner imports it back after deleting it (201, same ids, no run), a second import is
    409 ``thread_exists`` naming the id, ``ids=new`` stores a copy under new ids (201)."""
    tid = await api.thread()
    alice = api.client("alice")
    sent = await alice.post(f"/api/threads/{tid}/messages", json={"role": "user", "content": "hi"})
    assert sent.status_code in (200, 202), sent.text
    await api.settle(tid)
    exported = await alice.get(f"/api/threads/{tid}/export")
    assert exported.status_code == 200, exported.text
    assert "attachment" in exported.headers["content-disposition"]
    doc = parse_export(exported.content)
    assert doc.root == tid and [m.content for m in doc.threads[0].messages][:1] == ["hi"]
    bob = api.client("bob")
    assert (await bob.get(f"/api/threads/{tid}/export")).status_code in (403, 404)
    refused = await bob.post("/api/threads/import", content=exported.content)
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"

    assert (await alice.delete(f"/api/threads/{tid}")).status_code == 200
    requests_before = len(api.echo.requests)
    imported = await alice.post("/api/threads/import", content=exported.content)
    assert imported.status_code == 201, imported.text
    assert imported.json() == {"threadId": tid, "threadIds": [tid]}
    again = await alice.get(f"/api/threads/{tid}/export")
    assert again.content == exported.content
    assert len(api.echo.requests) == requests_before  # history, not a run

    twice = await alice.post("/api/threads/import", content=exported.content)
    assert twice.status_code == 409
    assert twice.json()["code"] == "thread_exists" and twice.json()["id"] == tid
    assert tid in twice.json()["error"]
    copy = await alice.post("/api/threads/import?ids=new", content=exported.content)
    assert copy.status_code == 201 and copy.json()["threadId"] != tid
    listed = await alice.get("/api/threads")
    assert listed.json()["total"] == 2
    assert USERS["alice"].id == doc.threads[0].user_id


async def test_c21_009_a_newer_or_broken_file_is_a_400(api: Api) -> None:
    """C21-009: a file of a newer format version is a 400 ``unsupported_version`` naming
    both versions; a body that is no thread file a 400; ``ids`` other than keep/new a 400;
    nothing is stored."""
    tid = await api.thread()
    alice = api.client("alice")
    data = json.loads((await alice.get(f"/api/threads/{tid}/export")).content)
    data["version"] = VERSION + 1
    newer = await alice.post("/api/threads/import", json=data)
    assert newer.status_code == 400, newer.text
    body = newer.json()
    assert body["code"] == "unsupported_version"
    assert (body["version"], body["supported"]) == (VERSION + 1, VERSION)
    assert f"version {VERSION + 1}" in body["error"] and f"version {VERSION})" in body["error"]
    other = await alice.post("/api/threads/import", json={"format": "x", "version": 1})
    assert other.status_code == 400
    bad_ids = await alice.post("/api/threads/import?ids=maybe", json=data)
    assert bad_ids.status_code == 400
    assert (await alice.get("/api/threads")).json()["total"] == 1
