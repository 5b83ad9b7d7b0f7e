"""Spec 08 §8.8 ``GET /fs?find=``: a hostile pattern does not hold the server (issue 23,
item 1). Before, ``**a**a**a**b`` against one path of 4 × 250 characters ran a backtracking
regex on the event loop for about a minute, and every other request waited with it."""

from __future__ import annotations

import asyncio

import httpx

from conftest import Api

SEG = "a" * 250


async def test_hostile_find_runs_while_health_answers(api: Api) -> None:
    """Many paths of 4 × 250 characters, scanned in full by a pattern with four ``**``: the
    find answers the right paths, and ``/api/health`` keeps answering while it runs (the
    server shares this test's event loop, so a blocked loop would hold both)."""
    thread = await api.thread()
    state = await api.runtime.thread(thread)
    paths = [f"/{SEG}/{SEG}/{SEG}/{'a' * 246}{n:04d}" for n in range(120)]
    hits = [f"/{SEG}/{SEG}/{SEG}/{'a' * 245}b{n:04d}" for n in range(3)]
    for path in paths + hits:
        await state.write_file(path, b"x")
    client = api.client()
    fs = f"/api/threads/{thread}/fs"

    find = asyncio.create_task(client.get(fs, params={"find": "**a**a**a**b*", "limit": "1000"}))
    health: list[httpx.Response] = []
    while not find.done():
        health.append(await client.get("/api/health"))
    found = await find

    assert found.status_code == 200, found.text
    assert found.json()["pattern"] == "**a**a**a**b*"
    assert [f["path"] for f in found.json()["files"]] == sorted(hits)
    assert health
    assert all(r.status_code == 200 and r.json()["status"] == "ok" for r in health)
    attack = await client.get(fs, params={"find": "**a**a**a**b"})
    assert attack.status_code == 200
    assert attack.json()["files"] == []
