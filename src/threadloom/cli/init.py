"""``threadloom init DIR``: a small working project to start from.

One agent (``assistant``) with a prompt, a tool (``lookup_order``) and a model that answers
offline (a scripted model, ``threadloom.testing``) unless ``OPENAI_API_KEY`` is set, plus a
test that runs the agent on the scripted model (and a ``pyproject.toml`` for pytest, so the
tests run without a warning, pytest-asyncio installed or not). ``threadloom run DIR`` answers
at once.
"""

from __future__ import annotations

from pathlib import Path

from threadloom.errors import ThreadloomError

FILES: dict[str, str] = {
    "README.md": """\
# {name}

A Threadloom project: one agent, `assistant`, that looks orders up with the tool
`lookup_order`.

```sh
threadloom run {name}                              # chat in the terminal
threadloom run {name} -m "Where is order A-1001?"  # one message
threadloom serve {name}                            # the web UI and the REST API
python -m pytest {name}/tests                      # the agent's tests
```

The model answers offline (a scripted model) until `OPENAI_API_KEY` is set; then it is
OpenAI's `gpt-4o-mini` (`models/models.py`). The folders are read in this order: `models/`,
`tools/`, `hooks/`, `prompts/`, `agents/`; every definition at the top level of a file is
registered.
""",
    "pyproject.toml": """\
[tool.pytest.ini_options]
testpaths = ["tests"]
# The tests run their own event loop (asyncio.run) and need no pytest-asyncio; where that
# plugin is installed it would warn on every run that its loop scope is unset. If you write
# `async def` tests for it, replace this line with
# asyncio_default_fixture_loop_scope = "function".
addopts = "-p no:asyncio"
""",
    "models/models.py": '''\
"""The project's model: OpenAI when OPENAI_API_KEY is set, else an offline scripted model.

The offline model is a function of the request (threadloom.testing): it calls lookup_order
when the last message names an order (A-1001), answers from the tool's result, and
otherwise says what it can do.
"""

import os
import re

from threadloom import Model
from threadloom.testing import Call, ProviderRequest, Reply, ScriptedProvider

ORDER = re.compile(r"\\b[A-Z]-\\d{{4}}\\b")


def offline_reply(request: ProviderRequest) -> Reply:
    """The offline model's answer to ``request``."""
    last = request.messages[-1]
    if last.role == "tool":
        return Reply.text(f"I checked: {{last.text}}.", chunk_size=6)
    found = ORDER.search(last.text.upper())
    if found:
        return Reply.tool_calls(Call("lookup_order", {{"order_id": found.group(0)}}))
    return Reply.text(
        f'You said "{{last.text}}". I look orders up: try "Where is order A-1001?"',
        chunk_size=6,
    )


if os.environ.get("OPENAI_API_KEY"):
    assistant = Model(name="assistant", provider="openai", model="gpt-4o-mini")
else:
    assistant = Model(
        name="assistant", provider=ScriptedProvider(offline_reply, record=False), model="offline"
    )
''',
    "tools/orders.py": '''\
"""The tools of the project: plain functions decorated with @tool."""

from typing import Annotated

from pydantic import Field

from threadloom import tool

ORDERS = {{
    "A-1001": "shipped, arriving Thursday",
    "A-1002": "being packed, shipping tomorrow",
}}


@tool
def lookup_order(
    order_id: Annotated[str, Field(description="The order number, like A-1001")],
) -> str:
    """Look up the status of an order."""
    status = ORDERS.get(order_id.strip().upper())
    if status is None:
        return f"there is no order {{order_id}}"
    return f"order {{order_id}} is {{status}}"
''',
    "prompts/prompts.py": '''\
"""What the agent is told and which tools it may call."""

from threadloom import Prompt

assistant_prompt = Prompt(
    name="assistant_prompt",
    model="assistant",
    system="You are the assistant of a small shop. Be brief. Use lookup_order to check an order.",
    tools=["lookup_order"],
)
''',
    "agents/agents.py": '''\
"""The agent: an AI side (the prompt) and a human side (you)."""

from threadloom import Agent, Side

assistant = Agent(
    name="assistant",
    title="Assistant",
    description="Answers questions about orders.",
    side_a=Side(prompt="assistant_prompt", label="Assistant"),
    side_b=Side(label="You"),
)
''',
    "tests/test_assistant.py": '''\
"""The agent's tests, on the scripted model: ``python -m pytest tests`` in the project."""

import asyncio
from pathlib import Path

import pytest

from threadloom import Runtime
from threadloom.testing import Call, Reply, ScriptedProvider

PROJECT = Path(__file__).resolve().parent.parent


async def conversation(runtime: Runtime, text: str) -> list[tuple[str, str | None]]:
    """Send ``text`` to a new thread of the agent; the thread's messages once it is idle."""
    state = await runtime.create_thread("assistant")
    await runtime.send_message(state.thread_id, text)
    await runtime.wait_idle(state.thread_id, timeout=30)
    status = await state.status()
    assert status.error is None, status.error  # a failed run says why
    page = await state.get_messages(order="asc")
    return [(m.role, m.content) for m in page.messages]


def test_the_offline_model_looks_the_order_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the offline model

    async def main() -> list[tuple[str, str | None]]:
        runtime = await Runtime.open(f"sqlite:///{{tmp_path / 'test.db'}}", project=PROJECT)
        try:
            return await conversation(runtime, "Where is order A-1001?")
        finally:
            await runtime.close()

    messages = asyncio.run(main())
    assert [role for role, _ in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2] == ("tool", "order A-1001 is shipped, arriving Thursday")
    assert messages[3] == ("assistant", "I checked: order A-1001 is shipped, arriving Thursday.")


def test_a_scripted_conversation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The project's OpenAI configuration with the provider "openai" replaced by a scripted
    model: no network, and the test says what the model answers and checks what it saw."""
    monkeypatch.setenv("OPENAI_API_KEY", "not-used")  # models.py picks provider="openai"
    model = ScriptedProvider(
        [
            Reply.tool_calls(Call("lookup_order", {{"order_id": "A-1002"}})),
            Reply.text("It ships tomorrow."),
        ]
    )

    async def main() -> list[tuple[str, str | None]]:
        runtime = await Runtime.open(
            f"sqlite:///{{tmp_path / 'test.db'}}", project=PROJECT, providers={{"openai": model}}
        )
        try:
            return await conversation(runtime, "And A-1002?")
        finally:
            await runtime.close()

    messages = asyncio.run(main())
    assert messages[-2:] == [
        ("tool", "order A-1002 is being packed, shipping tomorrow"),
        ("assistant", "It ships tomorrow."),
    ]
    model.assert_complete()  # every scripted reply was used
    second = model.requests[1]  # the model saw the tool's result
    assert second.messages[-1].text == "order A-1002 is being packed, shipping tomorrow"
''',
}


class InitError(ThreadloomError):
    """The folder cannot be made into a project (it holds files already)."""


def init_project(root: Path) -> list[Path]:
    """Write the project's files under ``root`` (created; it must be empty or missing);
    returns the files written."""
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise InitError(f"{root} already exists and is not an empty folder")
    name = root.name
    written: list[Path] = []
    for relative, template in FILES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(name=name), encoding="utf-8")
        written.append(path)
    return written
