"""A failed run's cause on the wire (spec 08 §8.2.1, spec 09 §9.5.1, spec 01 §1.7.4): the
thread's status in ``GET /api/threads/{id}`` and in the ``thread_status`` frames. A real
server and Runtime (SQLite and PostgreSQL); the agent ``keyless`` runs on the real OpenAI
adapter without a key, which fails before any request leaves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_c09_stream import open_ws, recv, settled_idle, until

from conftest import Api
from threadloom import Agent, Side
from threadloom.define import Model, Prompt

KEYLESS = (
    Model(name="keyless-model", provider="openai", model="gpt-4o-mini"),
    Prompt(name="keyless_prompt", model="keyless-model", system="You help."),
    Agent(name="keyless", side_a=Side(prompt="keyless_prompt"), side_b=Side(label="Customer")),
)
CAUSE = 'Model "keyless-model" (openai): OPENAI_API_KEY is not set'


@pytest.fixture
async def keyless_api(make_api: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> Api:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    made: Api = await make_api(extra=KEYLESS)
    return made


async def test_c08_131_get_thread_shows_why_the_run_failed(keyless_api: Api) -> None:
    api = keyless_api
    thread = await api.thread("keyless")
    client = api.client()
    sent = await client.post(f"/api/threads/{thread}/messages", json={"content": "hi"})
    assert sent.status_code == 202, sent.text
    await api.settle(thread)
    status = (await client.get(f"/api/threads/{thread}")).json()["status"]
    assert (status["state"], status["reason"]) == ("failed", "step_error")
    error = status["error"]
    assert set(error) == {"type", "message", "log_id", "code", "retryable"}
    assert (error["type"], error["code"], error["retryable"]) == (
        "ProviderError",
        "authentication",
        False,
    )
    assert error["message"] == CAUSE
    row = await client.get(f"/api/threads/{thread}/logs/{error['log_id']}")
    assert row.status_code == 200, row.text
    assert "OPENAI_API_KEY is not set" in row.text

    idle = await api.thread("echo")
    assert (await client.get(f"/api/threads/{idle}")).json()["status"]["error"] is None


async def test_c09_045_the_failed_frame_and_the_snapshot_carry_the_cause(
    keyless_api: Api,
) -> None:
    api = keyless_api
    thread = await api.thread("keyless")
    async with await open_ws(api, thread) as ws:
        assert (await recv(ws))["status"]["error"] is None  # the snapshot of a new thread
        await api.client().post(f"/api/threads/{thread}/messages", json={"content": "hi"})
        frames = await until(ws, settled_idle)
    statuses = [f["status"] for f in frames if f["type"] == "thread_status"]
    assert [s["state"] for s in statuses] == ["running", "failed"]
    assert statuses[0]["error"] is None
    failed = statuses[-1]["error"]
    assert failed["message"] == CAUSE and failed["log_id"]
    async with await open_ws(api, thread) as ws:
        snapshot = await recv(ws)
    assert snapshot["snapshot"] is True and snapshot["status"]["error"] == failed
