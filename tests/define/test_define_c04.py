"""Conformance cases C04-001 … C04-014 and C04-018 (spec 04 §4.28): definitions and loading.

Discovery cases write real project folders to ``tmp_path``. ``Runtime.open(url,
project=…)`` is not wired yet, so "load" is ``Definitions.from_project(path)`` followed by
``validate()`` — or ``Runtime.open(url, definitions=…)``, which validates the same way.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from threadloom import Runtime, ThreadState
from threadloom.define import (
    Agent,
    Definitions,
    Model,
    Prompt,
    SessionBinding,
    Side,
    tool,
    tool_definition_of,
)
from threadloom.define.discovery import reset_project_modules
from threadloom.errors import DefinitionError

MODEL = 'M = Model(name="M", provider="scripted", model="m")\n'


@pytest.fixture(autouse=True)
def _forget_project_modules() -> Iterator[None]:
    yield
    reset_project_modules()


def write(root: Path, files: dict[str, str]) -> Path:
    """Write ``{relative path: source}`` under ``root``; sources are dedented."""
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return root


def problems_of(root: Path) -> list[str]:
    with pytest.raises(DefinitionError) as info:
        Definitions.from_project(root).validate()
    return info.value.problems


def base_definitions() -> Definitions:
    return Definitions().add(
        Model(name="M", provider="scripted", model="m"), Prompt(name="P", model="M")
    )


async def test_c04_001_unknown_side_prompt(tmp_path: Path, db_url: str) -> None:
    """C04-001: ``agents/a.py`` names the undefined side a prompt ``nope`` → DefinitionError
    whose ``problems`` contain ``agents/a.py: Agent "a": side a prompt "nope" is not defined``."""
    root = write(
        tmp_path / "project",
        {
            "agents/a.py": """
                from threadloom import Agent, Side
                a = Agent(name="a", side_a=Side(prompt="nope"))
            """
        },
    )
    expected = 'agents/a.py: Agent "a": side a prompt "nope" is not defined'
    assert expected in problems_of(root)
    with pytest.raises(DefinitionError) as info:
        await Runtime.open(db_url, definitions=Definitions.from_project(root))
    assert expected in info.value.problems


def test_c04_002_two_problems_in_two_files(tmp_path: Path) -> None:
    """C04-002: two problems in two files → one DefinitionError listing both."""
    root = write(
        tmp_path / "project",
        {
            "models/m.py": "from threadloom.define import Model\n" + MODEL,
            "prompts/p.py": """
                from threadloom.define import Prompt
                p = Prompt(name="p", model="ghost")
            """,
            "agents/a.py": """
                from threadloom.define import Agent, Side
                a = Agent(name="a", side_a=Side(prompt="p"), max_session_turns=0)
            """,
        },
    )
    problems = problems_of(root)
    assert problems == [
        'prompts/p.py: Prompt "p": model "ghost" is not defined',
        'agents/a.py: Agent "a": max_session_turns must be between 1 and 250',
    ]


def test_c04_003_tool_and_prompt_share_a_name(tmp_path: Path) -> None:
    """C04-003: a tool and a prompt both named ``lookup`` → ``Duplicate name "lookup"``."""
    root = write(
        tmp_path / "project",
        {
            "models/m.py": "from threadloom.define import Model\n" + MODEL,
            "tools/lookup.py": '''
                from threadloom.define import tool

                @tool
                def lookup(order_id: str) -> str:
                    """Look an order up."""
                    return order_id
            ''',
            "prompts/lookup.py": """
                from threadloom.define import Prompt
                lookup_prompt = Prompt(name="lookup", model="M")
            """,
        },
    )
    assert problems_of(root) == [
        'prompts/lookup.py: Duplicate name "lookup": tool in tools/lookup.py '
        "and prompt in prompts/lookup.py"
    ]


def test_c04_004_max_session_turns_above_cap_is_rejected_not_clamped() -> None:
    """C04-004: ``max_session_turns=251`` constructs, keeps 251 and fails validation."""
    agent = Agent(name="a", side_a=Side(prompt="P"), max_session_turns=251)
    assert agent.max_session_turns == 251
    with pytest.raises(DefinitionError) as info:
        base_definitions().add(agent).validate()
    assert info.value.problems == [
        'defined in code: Agent "a": max_session_turns must be between 1 and 250'
    ]


def test_c04_005_max_session_turns_defaults_to_250() -> None:
    """C04-005: an agent without ``max_session_turns`` has 250."""
    assert Agent(name="a", side_a=Side(prompt="P")).max_session_turns == 250


def test_c04_006_ai_human_side_b_with_a_prompt() -> None:
    """C04-006: ``ai_human`` with ``side_b=Side(prompt="x")`` → V7."""
    agent = Agent(name="a", side_a=Side(prompt="P"), side_b=Side(prompt="x"))
    with pytest.raises(DefinitionError) as info:
        base_definitions().add(agent).validate()
    assert info.value.problems == [
        'defined in code: Agent "a": '
        "side_b of an ai_human agent is the human side and only takes a label"
    ]
    base_definitions().add(
        Agent(name="ok", side_a=Side(prompt="P"), side_b=Side(label="Customer"))
    ).validate()


def test_c04_007_dual_ai_without_side_b() -> None:
    """C04-007: ``dual_ai`` agent without ``side_b`` → V7."""
    agent = Agent(name="d", type="dual_ai", side_a=Side(prompt="P"))
    with pytest.raises(DefinitionError) as info:
        base_definitions().add(agent).validate()
    assert info.value.problems == [
        'defined in code: Agent "d": a dual_ai agent requires side_b with a prompt'
    ]


def test_c04_008_bare_string_session_binding(tmp_path: Path) -> None:
    """C04-008: ``session_stop="finish"`` → loads as ``SessionBinding(name="finish")``."""
    root = write(
        tmp_path / "project",
        {
            "models/m.py": "from threadloom.define import Model\n" + MODEL,
            "tools/finish.py": '''
                from threadloom.define import tool

                @tool
                def finish(summary: str) -> str:
                    """End the session."""
                    return summary
            ''',
            "prompts/p.py": """
                from threadloom.define import Prompt
                p = Prompt(name="p", model="M", tools=["finish"])
            """,
            "agents/a.py": """
                from threadloom.define import Agent, Side
                a = Agent(name="a", side_a=Side(prompt="p", session_stop="finish"))
            """,
        },
    )
    defs = Definitions.from_project(root)
    defs.validate()
    agent = defs.agent("a")
    assert agent is not None
    assert agent.side_a.session_stop == SessionBinding(name="finish")


def test_c04_009_stop_tool_not_offered_by_the_prompt() -> None:
    """C04-009: ``stop_tool="finish"`` not among the prompt's tools → V11."""
    agent = Agent(name="a", side_a=Side(prompt="P", stop_tool="finish"))
    with pytest.raises(DefinitionError) as info:
        base_definitions().add(agent).validate()
    assert info.value.problems == [
        'defined in code: Agent "a": side a stop_tool "finish" is not a tool of prompt "P"'
    ]


def test_c04_010_tool_file_raising_at_import(tmp_path: Path) -> None:
    """C04-010: a tool file raising at import → an error naming the file and the exception
    text; the other files' errors are listed too (discovery continues)."""
    root = write(
        tmp_path / "project",
        {
            "models/m.py": "from threadloom.define import Model\n" + MODEL,
            "tools/broken.py": 'raise RuntimeError("no network at import")\n',
            "tools/fine.py": '''
                from threadloom.define import tool

                @tool
                def fine() -> str:
                    """Works."""
                    return "ok"
            ''',
            "prompts/p.py": """
                from threadloom.define import Prompt
                p = Prompt(name="p", model="M", tools=["fine", "broken"])
            """,
        },
    )
    assert problems_of(root) == [
        "tools/broken.py: RuntimeError: no network at import",
        'prompts/p.py: Prompt "p": tool "broken" is not defined',
    ]


def test_c04_011_reserved_name(tmp_path: Path) -> None:
    """C04-011: a definition named ``subagent_create`` → ``Name "subagent_create" is reserved``."""
    root = write(
        tmp_path / "project",
        {
            "tools/t.py": '''
                from threadloom.define import tool

                @tool(name="subagent_create")
                def create() -> str:
                    """Shadows a runtime tool."""
                    return ""
            ''',
        },
    )
    assert problems_of(root) == ['tools/t.py: Name "subagent_create" is reserved']


def test_c04_012_schema_of_a_tool_with_state_and_default() -> None:
    """C04-012: ``t(state: ThreadState, n: int, tag: str = "x")`` → object schema with
    ``n`` and ``tag``, ``required`` ``["n"]``, no extra properties, no top-level title."""

    @tool
    async def t(state: ThreadState, n: int, tag: str = "x") -> str:
        """Tag a number."""
        return f"{n}{tag}"

    definition = tool_definition_of(t)
    assert definition is not None
    assert definition.takes_state
    assert definition.parameters == {
        "type": "object",
        "properties": {
            "n": {"title": "N", "type": "integer"},
            "tag": {"title": "Tag", "type": "string", "default": "x"},
        },
        "required": ["n"],
        "additionalProperties": False,
    }
    assert "title" not in definition.parameters


class Order(BaseModel):
    """An order query."""

    order_id: str
    verbose: bool = False


async def test_c04_013_single_model_parameter() -> None:
    """C04-013: a tool with one pydantic-model parameter receives a model instance; its
    schema is the model's, post-processed."""
    received: list[Any] = []

    @tool
    def lookup(query: Order) -> str:
        """Look up an order."""
        received.append(query)
        return query.order_id

    definition = tool_definition_of(lookup)
    assert definition is not None
    expected = Order.model_json_schema()
    del expected["title"]
    expected["additionalProperties"] = False
    assert definition.parameters == expected
    result = await definition.invoke(None, {"order_id": "A-1"})
    assert result.result == "A-1"
    assert received == [Order(order_id="A-1")]
    assert isinstance(received[0], Order)


def test_c04_014_tool_without_description(tmp_path: Path) -> None:
    """C04-014: a tool without docstring or description → V21 at load."""
    root = write(
        tmp_path / "project",
        {
            "tools/t.py": """
                from threadloom.define import tool

                @tool
                def silent(x: int) -> int:
                    return x
            """,
        },
    )
    assert problems_of(root) == [
        'tools/t.py: Tool "silent": has no description (write a docstring or pass description=)'
    ]


def test_c04_018_include_defaults_are_true() -> None:
    """C04-018: a prompt without explicit ``include_chat``/``include_past_tools`` → both True."""
    prompt = Prompt(name="p", model="M")
    assert prompt.include_chat is True
    assert prompt.include_past_tools is True
