"""CopilotKit's shared state and readable context through its runtime (spec 13 §13.2.9,
§13.2.11, C13-076): ``copilotkit_node/run_copilotkit.mjs``'s ``state`` scenario, driven as
``test_c13_copilotkit.py`` drives the others (its fixture installs the runtime from the
lock file), against a real ``threadloom serve`` on SQLite and PostgreSQL whose ``todo``
agent's tool changes the shared state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from node_clients import serving
from test_c13_copilotkit import TOKEN, copilotkit, copilotkit_runtime

__all__ = ["copilotkit_runtime"]  # the fixture, shared with test_c13_copilotkit.py

PROJECT = {
    "models/models.py": """
        from threadloom.define import Model
        from threadloom.providers.script import Call
        from threadloom.providers.scripted import Reply, ScriptedProvider

        def todo(request):
            last = request.messages[-1]
            if last.role == "tool":
                # the answer repeats the context the model was given (its system text)
                told = request.messages[0].text.partition("application:")[2].strip()
                return Reply.text(f"Added. Context: {told or 'none'}")
            if last.role == "user" and "milk" in (last.text or ""):
                return Reply.tool_calls(Call("add_todo", {"item": "milk"}))
            return Reply.text("You are welcome.")

        todo_model = Model(name="todo_model", provider=ScriptedProvider(todo), model="todo")
    """,
    "tools/todos.py": """
        from threadloom import ThreadState
        from threadloom.define import tool

        @tool
        async def add_todo(state: ThreadState, item: str) -> str:
            \"\"\"Add an item to the shared todo list.\"\"\"
            todos = (await state.get_shared_state()).get("todos", [])
            await state.update_shared_state({"todos": [*todos, item]})
            return "added"
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


def stored_state(base: str, thread: str) -> Any:
    got = httpx.get(
        f"{base}/api/threads/{thread}/state", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert got.status_code == 200, got.text
    return got.json()


def test_c13_076_copilotkit_shared_state_and_readable_context(
    copilotkit_runtime: tuple[str, Path], served: str
) -> None:
    """C13-076: through CopilotKit's runtime (its bundled schemas and verifier refuse
    nothing), the front end's state becomes the thread's, STATE_SNAPSHOT follows
    RUN_STARTED and the tool's change comes as a STATE_DELTA; the state the front end
    holds after applying them is the stored state; its readable context reached the
    model; a second run carrying the front end's edit of that state stores the edit."""
    context = [{"description": "The user's name", "value": "Ada"}]
    out = copilotkit(
        copilotkit_runtime,
        base=served,
        token=TOKEN,
        scenario="state",
        agents=["todo"],
        state={"todos": ["eggs"]},
        context=context,
        edit={"filter": "done"},
    )
    run, again = out["run"], out["again"]
    assert run["problems"] == [] and again["problems"] == [], out
    kinds = [e["type"] for e in run["events"] if e["type"] != "CUSTOM"]
    assert kinds[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"], kinds
    assert kinds.count("STATE_DELTA") == 1 and kinds[-1] == "RUN_FINISHED"
    assert run["events"][1]["snapshot"] == {"todos": ["eggs"]}
    assert out["held"] == {"todos": ["eggs", "milk"]}
    text = "".join(e.get("delta", "") for e in run["events"] if e["type"].startswith("TEXT"))
    assert text == "Added. Context: - The user's name: Ada"
    stored = stored_state(served, out["threadId"])
    assert stored["state"] == {"todos": ["eggs", "milk"], "filter": "done"}
    assert stored["version"] == 3  # the first request's state, the tool's, the edit
    assert [e["type"] for e in again["events"]][:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert out["heldAgain"] == stored["state"]
