"""``POST /api/threads``: ``null`` is as absent for ``arguments`` and ``data`` (spec 08
§8.3.2) — a client generated from /openapi.json sends every property, the unset ones null."""

from __future__ import annotations

from conftest import Api


async def test_c08_146_null_arguments_or_data_is_absent(api: Api) -> None:
    """C08-146: ``arguments`` and ``data`` both null → 200 with ``{}``; ``arguments`` null
    and ``data`` an object → the object is the arguments (and the other way round); both
    objects → 400 (C08-019)."""
    client = api.client()
    cases = [
        ({"arguments": None, "data": None}, {}),
        ({"arguments": None, "data": {"x": 1}}, {"x": 1}),
        ({"arguments": {"y": 2}, "data": None}, {"y": 2}),
    ]
    for fields, expected in cases:
        created = await client.post("/api/threads", json={"agent_id": "echo", **fields})
        assert created.status_code == 200, (fields, created.text)
        thread = (await client.get(f"/api/threads/{created.json()['threadId']}")).json()
        assert thread["thread"]["arguments"] == expected, fields
    both = await client.post("/api/threads", json={"agent_id": "echo", "arguments": {}, "data": {}})
    assert both.status_code == 400
