"""The real Python MCP clients against a real ``threadloom serve`` (spec 13 §13.5, C13-080,
C13-081): pydantic-ai's ``MCPToolset`` giving an Agent the project's agents as tools, and
fastmcp's ``Client``. Both are in the ``dev`` extra; the project is the Node tests' one
(``mcp_project.py``), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from fastmcp import Client as FastMCPClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_project import TOKEN, serve
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

HEADERS = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def served(tmp_path: Path, db_url: str) -> Iterator[str]:
    yield from serve(tmp_path / "project", db_url)


async def test_c13_080_pydantic_ai_hands_its_model_the_agents_answer(served: str) -> None:
    """C13-080: an Agent on a FunctionModel calls ``summarizer`` through ``MCPToolset``; the
    tool result its model receives is the Threadloom agent's answer (not the thread's
    metadata)."""
    received: list[Any] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            assert [t.name for t in info.function_tools] == ["holder", "slow", "summarizer"]
            return ModelResponse(parts=[ToolCallPart("summarizer", {"message": "the report"})])
        received.extend(p.content for p in returns)
        return ModelResponse(parts=[TextPart("done")])

    toolset: MCPToolset[None] = MCPToolset(f"{served}/mcp", headers=HEADERS)
    agent = Agent(FunctionModel(model), toolsets=[toolset])
    async with agent:
        result = await agent.run("Summarise the report")
    assert result.output == "done"
    assert received == ["summary of: the report"]


async def test_c13_081_fastmcp_data_is_the_answer(served: str) -> None:
    """C13-081: fastmcp's ``result.data`` is the answer; ``result.meta`` has the thread; a
    failed call raises ``ToolError`` with the session result's text."""
    async with FastMCPClient(f"{served}/mcp", auth=TOKEN) as client:
        result = await client.call_tool("summarizer", {"message": "the minutes"})
        info = client.initialize_result
    assert result.data == "summary of: the minutes"
    assert result.structured_content == {"result": "summary of: the minutes"}
    assert result.meta is not None and result.meta["threadloom"]["success"] is True
    assert result.meta["threadloom"]["threadId"]
    if info is not None:  # the 2025 handshake; the 2026 wire has no initialize
        assert info.server_info.version


async def test_c13_086_a_dropped_call_stops_its_thread(served: str) -> None:
    """C13-086: the official SDK's client (the 2026-07-28 wire, where a cancel is closing
    the response stream) gives up on a ``holder`` call once progress says it calls
    ``hold``: the thread settles stopped (``aborted_by_user``) after one model request."""
    calling = asyncio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        if message == "calling hold":
            calling.set()

    async with (
        httpx2.AsyncClient(headers=HEADERS, timeout=30) as http,
        Client(streamable_http_client(f"{served}/mcp", http_client=http)) as client,
    ):
        call = asyncio.create_task(
            client.call_tool("holder", {"message": "hold on"}, progress_callback=progress)
        )
        await asyncio.wait_for(calling.wait(), 60)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    async with httpx.AsyncClient(base_url=served, headers=HEADERS) as rest:
        for _ in range(600):  # the stop lands once the server sees the stream closed
            listed = (await rest.get("/api/threads", params={"agent_id": "holder"})).json()
            status = listed["threads"][0]["status"]
            if status["state"] != "running":
                break
            await asyncio.sleep(0.05)
        assert (status["state"], status["reason"]) == ("idle", "aborted_by_user"), status
        thread_id = listed["threads"][0]["id"]
        logs = (await rest.get(f"/api/threads/{thread_id}/logs")).json()
    assert len(logs["logs"]) == 1, logs


async def test_c13_086_a_dropped_connection_on_the_2025_wire_stops_the_thread(
    served: str,
) -> None:
    """C13-086: a ``tools/call`` of the 2025 wire (``MCP-Protocol-Version: 2025-11-25``)
    whose client closes the connection after the first progress → the thread settles
    ``aborted_by_user``."""
    headers = {
        **HEADERS,
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "holder", "arguments": {"message": "x"}, "_meta": {"progressToken": 7}},
    }
    async with httpx.AsyncClient(base_url=served, headers=headers, timeout=60) as http:
        async with http.stream("POST", "/mcp", json=call) as answer:
            assert answer.headers["content-type"].startswith("text/event-stream")
            async for line in answer.aiter_lines():
                if "calling hold" in line:
                    break
        for _ in range(600):  # the stop lands once the server sees the connection closed
            status = (await http.get("/api/threads")).json()["threads"][0]["status"]
            if status["state"] != "running":
                break
            await asyncio.sleep(0.05)
    assert (status["state"], status["reason"]) == ("idle", "aborted_by_user"), status
