"""System text (spec 04 §4.4.2), tool entries (§4.4.3, spec 06 §6.2–§6.3.4) and side prompts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from threadloom.define import (
    Agent,
    Definitions,
    Model,
    Prompt,
    ResolvedTool,
    Side,
    Subagent,
    Subprompt,
    tool,
)
from threadloom.errors import AgentNotFound, DefinitionError


class Brief(BaseModel):
    topic: str


@tool
def search(query: str) -> str:
    """Search the web."""
    return query


def registry(*more: Any) -> Definitions:
    return Definitions().add(Model(name="M", provider="scripted", model="m"), search, *more)


# --- render_system ----------------------------------------------------------------------------


def test_variables_from_arguments_then_context() -> None:
    """Same shape as C04-022: ``Hi {{who}} {{n}} {{missing}}`` → ``Hi Ann [1,2] {{missing}}``."""
    defs = registry(Prompt(name="P", model="M", system="Hi {{who}} {{n}} {{missing}}"))
    assert defs.render_system("P", {"who": "Ann"}, {"n": [1, 2]}) == "Hi Ann [1,2] {{missing}}"


def test_variable_syntax_and_values() -> None:
    system = "{{ a }}|{{b}}|{{c}}|{{d}}|{{ 1x }}|{{e-f}}|{{ missing }}|{{z}}"
    defs = registry(Prompt(name="P", model="M", system=system))
    arguments = {"a": "arg", "b": None, "z": "{{a}}"}
    context = {"a": "ctx", "c": {"é": True}, "d": 1.5}
    assert defs.render_system("P", arguments, context) == (
        'arg|null|{"é":true}|1.5|{{ 1x }}|{{e-f}}|{{ missing }}|{{a}}'
    )


def test_custom_lookup() -> None:
    defs = registry(Prompt(name="P", model="M", system="{{x}} {{y}}"))

    def lookup(name: str) -> tuple[bool, Any]:
        return (True, name.upper()) if name == "x" else (False, None)

    assert defs.render_system("P", lookup=lookup) == "X {{y}}"


def test_parts_and_nested_includes() -> None:
    defs = registry(
        Prompt(
            name="P",
            model="M",
            system=[
                {"type": "text", "content": "Start {{who}}. "},
                {"type": "include", "prompt": "Q"},
                {"type": "text", "content": " End."},
            ],
        ),
        Prompt(
            name="Q",
            model="M",
            system=[{"type": "include", "prompt": "R"}, {"type": "text", "content": "+q"}],
        ),
        Prompt(name="R", model="M", system="r:{{who}}"),
    )
    defs.validate()
    assert defs.render_system("P", {"who": "Ann"}) == "Start Ann. r:Ann+q End."
    prompt = defs.prompt("P")
    assert prompt is not None and prompt.includes == ["Q"]


def test_render_errors() -> None:
    defs = registry(
        Prompt(name="A", model="M", system=[{"type": "include", "prompt": "B"}]),
        Prompt(name="B", model="M", system=[{"type": "include", "prompt": "A"}]),
        Prompt(name="C", model="M", system=[{"type": "include", "prompt": "ghost"}]),
    )
    with pytest.raises(DefinitionError, match="include cycle A -> B -> A"):
        defs.render_system("A")
    with pytest.raises(DefinitionError, match='included prompt "ghost" is not defined'):
        defs.render_system("C")
    with pytest.raises(DefinitionError, match='Prompt "nope" is not defined'):
        defs.render_system("nope")


# --- resolve_tools ----------------------------------------------------------------------------


def subagent_world() -> Definitions:
    return registry(
        Prompt(name="sub", model="M", tool_description="Summarise", required_schema=Brief),
        Prompt(name="plain", model="M"),
        Prompt(name="human_a", model="M", required_schema={"type": "object", "x-custom": 1}),
        Agent(
            name="handoff",
            side_a=Side(prompt="human_a"),
            expose_as_tool=True,
            tool_description="Hand over",
        ),
        Prompt(name="child_a", model="M"),
        Prompt(name="child_b", model="M"),
        Agent(
            name="child",
            type="dual_ai",
            side_a=Side(prompt="child_a"),
            side_b=Side(prompt="child_b"),
            expose_as_tool=True,
            tool_description="Does research",
        ),
        Prompt(name="kid_a", model="M", required_schema=Brief),
        Agent(
            name="kid",
            type="dual_ai",
            side_a=Side(prompt="kid_a"),
            side_b=Side(prompt="child_b"),
            expose_as_tool=True,
            tool_description="Kid",
        ),
    )


def test_resolve_tools_kinds_and_order() -> None:
    defs = subagent_world()
    lead = Prompt(
        name="lead",
        model="M",
        tools=[
            "search",
            "sub",
            Subprompt("plain", include_errors=False),
            "handoff",
            "child",
            Subagent(agent="child", relationship="oneshot", resumable=False, blocking=True),
            Subagent(agent="kid", relationship="direct_kid", resumable=False, description="K"),
        ],
    )
    defs.add(lead)
    defs.validate()
    resolved = defs.resolve_tools("lead")
    assert [(r.name, r.kind, r.direct) for r in resolved] == [
        ("search", "tool", True),
        ("sub", "subprompt", True),
        ("plain", "subprompt", True),
        ("handoff", "handoff", True),
        ("child", "subagent", False),
        ("oneshot", "subagent", True),
        ("direct_kid", "subagent", True),
    ]
    tool_, sub, plain, handoff, child, oneshot, kid = resolved
    assert tool_.target is search.tool_definition  # type: ignore[attr-defined]
    assert tool_.description == "Search the web."
    assert sub.description == "Summarise" and sub.options == Subprompt("sub")
    assert sub.parameters == {
        "properties": {"topic": {"title": "Topic", "type": "string"}},
        "required": ["topic"],
        "type": "object",
        "additionalProperties": False,
    }
    assert plain.description == "Run the plain prompt"
    assert plain.options == Subprompt("plain", include_errors=False)
    assert plain.parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    assert handoff.description == "Hand over"
    assert handoff.parameters == {"type": "object", "x-custom": 1}  # a dict is used as given
    assert isinstance(child.options, Subagent)
    assert (child.options.relationship, child.options.description) == ("child", "Does research")
    assert child.description == "Does research"
    assert oneshot.description == "Does research (blocking: waits for the result)"
    assert oneshot.parameters["required"] == ["message"]
    assert isinstance(oneshot.options, Subagent)
    assert oneshot.options.init_user_message_property == "message"
    assert oneshot.options.init_attachments_property == "attachments"
    assert kid.description == (
        "K (non-blocking: returns a reference at once, the result arrives later)"
    )
    assert kid.parameters["required"] == ["topic"]
    assert isinstance(kid.options, Subagent) and kid.options.init_user_message_property is None
    assert defs.offered_names(lead) == [
        "search",
        "sub",
        "plain",
        "handoff",
        "oneshot",
        "direct_kid",
        "subagent_create",
        "subagent_message",
        "subagents",
    ]


def test_resolved_parameters_are_copies() -> None:
    defs = subagent_world().add(Prompt(name="lead", model="M", tools=["search"]))
    first: ResolvedTool = defs.resolve_tools("lead")[0]
    first.parameters["properties"].clear()
    assert defs.resolve_tools("lead")[0].parameters["properties"] != {}


def test_offered_tools_resolved_once_per_registry_state() -> None:
    """The engine's view (``offered_tools``) shares its entries between calls until the
    registry changes; ``resolve_tools`` keeps handing out copies meanwhile."""
    defs = subagent_world().add(Prompt(name="lead", model="M", tools=["search", "sub"]))
    first = defs.offered_tools("lead")
    again = defs.offered_tools("lead")
    assert first == again and all(a is b for a, b in zip(first, again, strict=True))
    assert first is not again  # a fresh list: the caller may append runtime tools
    assert defs.resolve_tools("lead")[0] is not first[0]
    assert defs.resolve_tools("lead") == first
    defs.add(Prompt(name="other", model="M"))  # any add starts over
    assert defs.offered_tools("lead")[0] is not first[0]


def test_offered_tools_follow_a_new_prompt_object() -> None:
    """A prompt object with the same name (another registry, or one passed in directly)
    is resolved on its own, never served the entries of the first."""
    defs = subagent_world().add(Prompt(name="lead", model="M", tools=["search"]))
    assert [t.name for t in defs.offered_tools("lead")] == ["search"]
    other = Prompt(name="lead", model="M", tools=["sub"])
    assert [t.name for t in defs.offered_tools(other)] == ["sub"]
    assert [t.name for t in defs.offered_tools("lead")] == ["search"]


def test_resolve_tools_unknown_entry() -> None:
    defs = registry(Prompt(name="lead", model="M", tools=["ghost"]))
    with pytest.raises(DefinitionError, match='Prompt "lead": tool "ghost" is not defined'):
        defs.resolve_tools("lead")


# --- side_prompt ------------------------------------------------------------------------------


def test_side_prompt() -> None:
    defs = subagent_world()
    handoff = defs.agent("handoff")
    assert handoff is not None
    assert defs.side_prompt(handoff, "a") == defs.prompt("human_a")
    assert defs.side_prompt("handoff", "b") is None
    assert defs.side_prompt("child", "b") == defs.prompt("child_b")
    with pytest.raises(AgentNotFound):
        defs.side_prompt("nobody", "a")
    broken = Agent(name="broken", side_a=Side(prompt="ghost"))
    with pytest.raises(DefinitionError):
        defs.side_prompt(broken, "a")
