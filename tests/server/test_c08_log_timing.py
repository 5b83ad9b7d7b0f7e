"""``GET /api/threads/{id}/logs?timing=true`` (spec 08 §8.6.1, our addition): each list
row also carries the timing keys of its detail, so a list (the web UI's logs panel) can
show how long every call took without reading each detail."""

from __future__ import annotations

from conftest import Api
from threadloom.records import LOG_LIST_KEYS

TIMING = ["latency_ms", "time_to_first_token_ms", "finish_reason"]


async def test_c08_132_log_rows_with_timing(api: Api) -> None:
    client = api.client()
    thread = await api.thread()
    await client.post(f"/api/threads/{thread}/messages", json={"content": "hi"})
    await api.settle(thread)
    state = await api.runtime.thread(thread)
    await state.log({"name": "cache.miss"})
    logs = f"/api/threads/{thread}/logs"
    plain = (await client.get(logs)).json()["logs"]
    assert all(list(row) == list(LOG_LIST_KEYS) for row in plain)  # unchanged without it
    timed = (await client.get(logs, params={"timing": "true"})).json()["logs"]
    assert [r["id"] for r in timed] == [r["id"] for r in plain]
    assert all(list(row) == [*LOG_LIST_KEYS, *TIMING] for row in timed)
    llm, app = timed
    detail = (await client.get(f"{logs}/{llm['id']}")).json()
    assert {k: llm[k] for k in TIMING} == {k: detail[k] for k in TIMING}
    assert isinstance(llm["latency_ms"], int) and llm["finish_reason"] == "stop"
    assert app["latency_ms"] is None and app["finish_reason"] is None
    # every mode takes it; a value that is no boolean is a 400
    by_id = (await client.get(logs, params={"ids": llm["id"], "timing": "1"})).json()["logs"]
    assert by_id[0]["latency_ms"] == llm["latency_ms"]
    bad = await client.get(logs, params={"timing": "maybe"})
    assert bad.status_code == 400
    assert bad.json()["error"] == "timing must be true or false"
    off = (await client.get(logs, params={"timing": "false"})).json()["logs"]
    assert all(list(row) == list(LOG_LIST_KEYS) for row in off)
