"""The project's agents as tools of the MCP server at ``/mcp`` (spec 13 §13.5), called with the
official ``mcp`` SDK's client over streamable HTTP against a real server (SQLite and
PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel

from conftest import USERS, Api, last_user_text
from threadloom import Agent, Side
from threadloom.define import Model, Prompt
from threadloom.errors import ProviderError
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest


class Sum(BaseModel):
    """Two numbers to add."""

    a: int
    b: int


def add_reply(request: ProviderRequest) -> Reply:
    numbers = json.loads(last_user_text(request))
    return Reply.text(f"{numbers['a']} + {numbers['b']} = {numbers['a'] + numbers['b']}")


def failing(request: ProviderRequest) -> Reply:
    raise ProviderError("the model is down", code="invalid_request", retryable=False)


def exposed() -> tuple[Any, ...]:
    """``summarizer`` (a message), ``adder`` (arguments), ``broken`` (its model fails) and
    ``hidden`` (not exposed)."""
    summary = ScriptedProvider(lambda r: Reply.text(f"summary of: {last_user_text(r)}"))
    return (
        Model(name="sum_model", provider=summary, model="scripted-summary"),
        Model(name="add_model", provider=ScriptedProvider(add_reply), model="scripted-add"),
        Model(name="bad_model", provider=ScriptedProvider(failing), model="scripted-bad"),
        Prompt(name="sum_prompt", model="sum_model", system="You summarise."),
        Prompt(name="add_prompt", model="add_model", system="You add.", required_schema=Sum),
        Prompt(name="bad_prompt", model="bad_model", system="You fail."),
        Agent(
            name="summarizer",
            title="Summarizer",
            expose_as_tool=True,
            tool_description="Summarises a text",
            side_a=Side(prompt="sum_prompt"),
            side_b=Side(label="Caller"),
        ),
        Agent(
            name="adder",
            expose_as_tool=True,
            tool_description="Adds two numbers",
            side_a=Side(prompt="add_prompt"),
            side_b=Side(label="Caller"),
        ),
        Agent(
            name="broken",
            expose_as_tool=True,
            tool_description="Always fails",
            side_a=Side(prompt="bad_prompt"),
            side_b=Side(label="Caller"),
        ),
        Agent(name="hidden", side_a=Side(prompt="sum_prompt"), side_b=Side(label="Caller")),
    )


@asynccontextmanager
async def mcp_client(api: Api, user: str = "alice") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {api.keys[user]}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(f"{api.base}/mcp", http_client=http)
        async with Client(transport) as client:
            yield client


async def test_c13_030_exposed_agents_are_the_tools(make_api: Any) -> None:
    api: Api = await make_api(extra=exposed())
    async with mcp_client(api) as client:
        listed = (await client.list_tools()).tools
    tools = {tool.name: tool for tool in listed}
    assert sorted(tools) == ["adder", "broken", "summarizer"]
    assert tools["summarizer"].description == "Summarises a text"
    assert tools["summarizer"].input_schema["required"] == ["message"]
    adder = tools["adder"].input_schema
    assert sorted(adder["properties"]) == ["a", "b"] and sorted(adder["required"]) == ["a", "b"]


async def test_c13_031_a_call_runs_a_new_thread_and_returns_its_session_result(
    make_api: Any,
) -> None:
    api: Api = await make_api(extra=exposed())
    async with mcp_client(api) as client:
        said = await client.call_tool("summarizer", {"message": "a long story"})
        added = await client.call_tool("adder", {"a": 2, "b": 40})
        bad_args = await client.call_tool("adder", {"a": 2})
    assert not said.is_error
    assert [c.text for c in said.content] == ["summary of: a long story"]  # type: ignore[union-attr]
    # C13-080: the answer is the structured result too; the thread is in _meta
    assert said.structured_content == {"result": "summary of: a long story"}
    assert said.meta is not None
    thread_id = said.meta["threadloom"]["threadId"]
    assert said.meta["threadloom"]["success"] is True
    row = await api.runtime.store.get_thread(thread_id)
    assert row is not None and row.agent_id == "summarizer"
    assert row.user_id == USERS["alice"].id and "mcp" in row.tags
    assert [c.text for c in added.content] == ["2 + 40 = 42"]  # type: ignore[union-attr]
    added_thread = await api.runtime.store.get_thread(added.meta["threadloom"]["threadId"])  # type: ignore[index]
    assert added_thread is not None and added_thread.arguments == {"a": 2, "b": 40}
    assert bad_args.is_error
    assert "Tool argument validation failed" in bad_args.content[0].text  # type: ignore[union-attr]


async def test_c13_032_the_mcp_server_needs_credentials(make_api: Any) -> None:
    api: Api = await make_api(extra=exposed())
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=api.base) as http:
        refused = await http.post("/mcp", json=body, headers=headers)
        wrong = await http.post(
            "/mcp", json=body, headers={**headers, "Authorization": "Bearer tl_nope"}
        )
    assert (refused.status_code, refused.json()["code"]) == (401, "unauthorized")
    assert wrong.status_code == 401


async def test_c13_033_a_failed_run_is_an_error_result(make_api: Any) -> None:
    api: Api = await make_api(extra=exposed())
    async with mcp_client(api, "bob") as client:
        failed = await client.call_tool("broken", {"message": "please"})
        unknown = await client.call_tool("hidden", {"message": "please"})
    assert failed.is_error
    assert failed.structured_content is None and failed.meta is not None
    assert failed.meta["threadloom"]["reason"] == "step_error"
    assert unknown.is_error
    assert unknown.content[0].text == "Unknown tool: hidden"  # type: ignore[union-attr]


async def test_c13_087_a_body_over_the_json_limit_is_refused(make_api: Any) -> None:
    """C13-087: ``/mcp`` reads a POST's body before the MCP layer (the cancel lookup needs
    it) and bounds it as the API bounds JSON: past 1 MiB, the API's 413."""
    api: Api = await make_api(extra=exposed())
    message = "x" * (1024 * 1024)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "summarizer", "arguments": {"message": message}},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {api.keys['alice']}",
    }
    async with httpx.AsyncClient(base_url=api.base) as http:
        refused = await http.post("/mcp", json=body, headers=headers)
    assert (refused.status_code, refused.json()["code"]) == (413, "payload_too_large")
    assert (await api.runtime.list_threads())[1] == 0
