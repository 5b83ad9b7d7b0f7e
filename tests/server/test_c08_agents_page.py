"""What the web UI's agents page reads (spec 08 §8.10.2): each prompt's variables, its
subagent relationships and its MCP servers with their tools, on a real server and Runtime
with a real MCP server over stdio, on both stores."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import Api
from threadloom import Agent, MCPServer, Side
from threadloom.define import Prompt, Subagent

CALC = Path(__file__).resolve().parents[1] / "interop" / "mcp_servers" / "calc.py"

DEFS = (
    MCPServer(
        name="calc",
        command=sys.executable,
        args=(str(CALC),),
        env={"SECRET_TOKEN": "s3cret"},
        description="Arithmetic",
    ),
    Prompt(
        name="desk_prompt",
        model="echo_model",
        system="You help {{shop}}.",
        variables={"shop": "The shop's name"},
        tools=["calc", Subagent("desk_helper", relationship="echoer", description="Says it back")],
    ),
    Prompt(name="helper_prompt", model="echo_model", system="You help the desk."),
    Agent(
        name="desk_helper",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Helps the desk",
        side_a=Side(prompt="helper_prompt"),
        side_b=Side(prompt="helper_prompt"),
    ),
    Agent(name="desk", side_a=Side(prompt="desk_prompt"), side_b=Side(label="Customer")),
)


async def test_c08_176_prompts_list_variables_subagents_and_mcp_servers(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api(extra=DEFS)
    answer = await api.client("root").get("/api/prompts")
    assert answer.status_code == 200, answer.text
    assert "s3cret" not in answer.text and str(CALC) not in answer.text
    prompts = {p["id"]: p for p in answer.json()["prompts"]}
    desk = prompts["desk_prompt"]
    assert desk["prompt"] == "You help {{shop}}."
    assert desk["variables"] == [{"name": "shop", "description": "The shop's name"}]
    assert desk["subagents"] == [
        {
            "relationship": "echoer",
            "agent": "desk_helper",
            "description": "Says it back",
            "blocking": False,
        }
    ]
    [server] = desk["mcp_servers"]
    assert server["name"] == "calc" and server["transport"] == "stdio"
    assert server["description"] == "Arithmetic" and server["only"] is None
    assert server["error"] is None
    tools = {t["name"]: t for t in server["tools"]}
    assert "add" in tools
    assert tools["add"]["schema"]["type"] == "object"
    assert set(tools["add"]["schema"]["properties"]) >= {"a", "b"}
    # a prompt without any: empty lists
    others = [p for name, p in prompts.items() if name != "desk_prompt"]
    assert others and all(p["mcp_servers"] == [] for p in others)
    # not for a user
    refused = await api.client("alice").get("/api/prompts")
    assert refused.status_code == 403, refused.text
