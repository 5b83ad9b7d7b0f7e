"""The project the MCP interop tests serve (``test_c13_mcp_node.py``,
``test_c13_mcp_python.py``): agents exposed as MCP tools — ``summarizer`` answers at once,
``slow`` streams for about 5 s without committing a message, ``holder`` calls a tool that
holds for two minutes — and ``threadloom serve`` on it (spec 13 §13.5)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

from node_clients import serving

TOKEN = "mcp-node-test-admin-token-" + "x" * 16
SLOW_TEXT = "Slowly, one piece at a time, the answer comes. " * 2
PROGRESS_S = "0.3"
"""The server's steady progress interval here (THREADLOOM_MCP_PROGRESS_SECONDS)."""

PROJECT = {
    "models/models.py": f"""
        from threadloom.define import Model
        from threadloom.providers.script import Call
        from threadloom.providers.scripted import Reply, ScriptedProvider

        def summary(request):
            return Reply.text("summary of: " + request.messages[-1].text)

        def slow(request):
            # about 5 s of streaming, and no message committed until the end
            return Reply.text({SLOW_TEXT!r}, chunk_size=4, chunk_delay=0.2)

        def hold(request):
            if request.messages[-1].role == "tool":
                return Reply.text("held")
            return Reply.tool_calls(Call("hold", {{"seconds": 120}}))

        summary_model = Model(name="summary_model", provider=ScriptedProvider(summary), model="s")
        slow_model = Model(name="slow_model", provider=ScriptedProvider(slow), model="slow")
        hold_model = Model(name="hold_model", provider=ScriptedProvider(hold), model="hold")
    """,
    "tools/hold.py": """
        import asyncio

        from threadloom.define import tool

        @tool
        async def hold(seconds: int) -> str:
            \"\"\"Wait a while.\"\"\"
            await asyncio.sleep(seconds)
            return "waited"
    """,
    "prompts/prompts.py": """
        from threadloom.define import Prompt

        summary_prompt = Prompt(name="summary_prompt", model="summary_model", system="Sum up.")
        slow_prompt = Prompt(name="slow_prompt", model="slow_model", system="Be slow.")
        hold_prompt = Prompt(name="hold_prompt", model="hold_model", system="Hold.", tools=["hold"])
    """,
    "agents/agents.py": """
        from threadloom import Agent, Side

        def exposed(name, prompt, description):
            return Agent(
                name=name,
                expose_as_tool=True,
                tool_description=description,
                side_a=Side(prompt=prompt),
                side_b=Side(label="Caller"),
            )

        summarizer = exposed("summarizer", "summary_prompt", "Summarises a text")
        slow = exposed("slow", "slow_prompt", "Answers slowly")
        holder = exposed("holder", "hold_prompt", "Calls a tool that holds")
    """,
}


def write_project(folder: Path) -> Path:
    for name, text in PROJECT.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text))
    return folder


def serve(folder: Path, db_url: str) -> Iterator[str]:
    """``threadloom serve`` on the project written into ``folder`` (credentials required:
    the admin token); stopped with SIGTERM, its output free of tracebacks."""
    with serving(
        write_project(folder), db_url, TOKEN, THREADLOOM_MCP_PROGRESS_SECONDS=PROGRESS_S
    ) as base:
        yield base
