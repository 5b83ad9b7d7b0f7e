"""Declared prompt variables over HTTP (spec 08 §8.10.1, spec 04 §4.4.2): the agent list
names them, and a thread created without one is refused. A real server and Runtime."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conftest import Api
from threadloom import Agent, Side
from threadloom.define import Prompt

SHOP = (
    Prompt(
        name="shop_prompt",
        model="echo_model",
        system="You sell for {{shop}}.",
        variables={"shop": "The shop's name"},
    ),
    Agent(name="shop", side_a=Side(prompt="shop_prompt"), side_b=Side(label="Customer")),
)


async def test_c08_172_declared_variables_are_listed_and_required(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api(extra=SHOP)
    client = api.client()
    agents = {a["id"]: a for a in (await client.get("/api/agents")).json()["agents"]}
    assert agents["shop"]["variables"] == [
        {"name": "shop", "description": "The shop's name", "prompt": "shop_prompt"}
    ]
    assert agents["echo"]["variables"] == []
    before = (await client.get("/api/threads")).json()["total"]
    refused = await client.post("/api/threads", json={"agent_id": "shop"})
    assert refused.status_code == 400, refused.text
    assert refused.json()["code"] == "invalid_request"
    assert "arguments.shop" in refused.json()["error"]
    assert (await client.get("/api/threads")).json()["total"] == before
    made = await client.post(
        "/api/threads", json={"agent_id": "shop", "arguments": {"shop": "Walnut"}}
    )
    assert made.status_code == 200, made.text
