"""AG-UI shared state and context with the real client (spec 13 §13.2.9, §13.2.11, C13-074).

``@ag-ui/client``'s ``HttpAgent`` (installed from the lock file kept in ``agui_node/``, as
``test_c13_agui_node.py`` does) runs ``agui_node/run_agui_state.mjs`` against ``threadloom
serve`` on SQLite and PostgreSQL: the agent's change of the shared state reaches the
client's ``agent.state``, a reloaded client gets the thread's state, and the request's
context reaches the model.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from node_clients import serving
from test_c13_agui_node import HERE, TOKEN, agui_client

__all__ = ["agui_client"]  # the fixture, shared with test_c13_agui_node.py

PROJECT = {
    "models/models.py": """
        from threadloom.define import Model
        from threadloom.providers.script import Call
        from threadloom.providers.scripted import Reply, ScriptedProvider

        def todo(request):
            last = request.messages[-1]
            if last.role == "tool":
                # the answer repeats the context the model was given (its system text)
                system = request.messages[0].text
                told = system.split("Context from the client application:")[-1].strip()
                return Reply.text(f"Added. I was told: {told}")
            return Reply.tool_calls(Call("add_todo", {"item": "milk"}))

        todo_model = Model(name="todo_model", provider=ScriptedProvider(todo), model="todo")
    """,
    "tools/todos.py": """
        from threadloom import ThreadState
        from threadloom.define import tool

        @tool
        async def add_todo(state: ThreadState, item: str) -> str:
            \"\"\"Add an item to the shared todo list.\"\"\"
            todos = (await state.get_shared_state()).get("todos", [])
            written = await state.update_shared_state(
                {"todos": [*todos, {"text": item, "done": False}]}
            )
            return f"version {written.version}"
    """,
    "prompts/prompts.py": """
        from threadloom.define import Prompt

        todo_prompt = Prompt(
            name="todo_prompt", model="todo_model", system="Keep todos.", tools=["add_todo"]
        )
    """,
    "agents/agents.py": """
        from threadloom import Agent, Side

        todo = Agent(name="todo", side_a=Side(prompt="todo_prompt"), side_b=Side(label="User"))
    """,
}


@pytest.fixture
def served(tmp_path: Path, db_url: str) -> Iterator[str]:
    with serving(PROJECT, db_url, TOKEN, tmp_path / "project") as base:
        yield base


def node_state(agui_client: tuple[str, Path], base: str) -> Any:
    node, folder = agui_client
    shutil.copy(HERE / "run_agui_state.mjs", folder / "run_agui_state.mjs")
    done = subprocess.run(
        [node, "run_agui_state.mjs", json.dumps({"base": base, "token": TOKEN})],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"node failed:\n{done.stdout}\n{done.stderr}"
    print(f"--- node state ---\n{done.stdout}")  # shown with -s
    return json.loads(done.stdout)


def test_c13_074_the_agents_state_reaches_the_clients_agent_state(
    agui_client: tuple[str, Path], served: str
) -> None:
    """C13-074: the client's initial state is the thread's before the run; the tool's
    change reaches ``agent.state`` (STATE_SNAPSHOT, then a STATE_DELTA its verifier
    accepts) and equals the stored state; a reloaded client (state ``{}``) gets it whole;
    the context reached the model."""
    out = node_state(agui_client, served)
    first, reloaded = out["first"], out["reloaded"]
    assert first["error"] is None and reloaded["error"] is None, out
    kinds = [e["type"] for e in first["events"]]
    assert kinds[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"], kinds
    assert kinds.count("STATE_DELTA") == 1 and kinds[-1] == "RUN_FINISHED"
    got = httpx.get(
        f"{served}/api/threads/{out['threadId']}/state",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert got.status_code == 200, got.text
    stored = got.json()["state"]
    assert stored == {
        "todos": [{"text": "eggs", "done": True}, {"text": "milk", "done": False}],
        "filter": "all",
    }
    assert first["state"] == stored and first["changed"] == stored
    assert [e["type"] for e in reloaded["events"]][:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert reloaded["state"] == stored
    texts = "".join(e.get("delta", "") for e in first["events"] if e["type"].startswith("TEXT"))
    assert "I was told: - The user's name: Ada\n- Open page: /todos" in texts
