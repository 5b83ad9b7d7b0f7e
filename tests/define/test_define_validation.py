"""Load-time validation (spec 04 §4.2.3–§4.2.4): the message of every check V1–V21.

Each test builds definitions in code (origin ``defined in code``) and compares the exact
problem lines; discovery origins are covered by the C04 cases and the discovery tests.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from threadloom import Runtime
from threadloom.define import (
    Agent,
    Definitions,
    Model,
    ParentHook,
    Prompt,
    Reasoning,
    Side,
    Subagent,
    Subprompt,
    hook,
    tool,
)
from threadloom.errors import DefinitionError, UnknownHookError


@tool
def finish(summary: str) -> str:
    """End the session."""
    return summary


@tool
def search(query: str) -> str:
    """Search."""
    return query


@hook("filter_messages")
def keep_all(state: Any, messages: list[Any]) -> None:
    return None


class Brief(BaseModel):
    topic: str
    depth: int = 1


def base(*more: Any) -> Definitions:
    """Model ``M``, prompt ``P`` (tools finish, search) and both tools, plus ``more``."""
    return Definitions().add(
        Model(name="M", provider="scripted", model="m"),
        Prompt(name="P", model="M", tools=["finish", "search"]),
        finish,
        search,
        *more,
    )


def problems(defs: Definitions, providers: list[str] | None = None) -> list[str]:
    with pytest.raises(DefinitionError) as info:
        defs.validate(providers)
    assert str(info.value) == "\n".join(info.value.problems)
    assert defs.problems(providers) == info.value.problems
    return info.value.problems


def child(name: str = "researcher", **fields: Any) -> tuple[Agent, Prompt, Prompt]:
    """A ``dual_ai`` agent exposed as a tool, with its two prompts."""
    a = Prompt(name=f"{name}_a", model="M", required_schema=fields.pop("schema", None))
    b = Prompt(name=f"{name}_b", model="M")
    agent = Agent(
        name=name,
        type="dual_ai",
        side_a=Side(prompt=a.name),
        side_b=Side(prompt=b.name),
        expose_as_tool=True,
        tool_description="Researches",
        **fields,
    )
    return agent, a, b


def test_valid_definitions_pass() -> None:
    agent = Agent(name="support", side_a=Side(prompt="P", session_stop="finish"))
    base(agent, keep_all).validate()
    assert base().problems() == []


# --- construction checks types only -------------------------------------------------------


def test_construction_rejects_wrong_types_and_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        Agent.model_validate({"name": "a", "max_session_turns": "many"})
    with pytest.raises(ValidationError):
        Prompt(name="p", model="M", colour="red")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        Model(name="m", provider=42, model="x")
    with pytest.raises(ValidationError):
        Prompt.model_validate({"name": "p", "model": "M", "system": [{"type": "env"}]})


def test_definitions_are_frozen() -> None:
    prompt = Prompt(name="p", model="M")
    with pytest.raises(ValidationError):
        prompt.name = "q"  # type: ignore[misc]


def test_values_are_not_range_checked_at_construction() -> None:
    agent = Agent(name="bad name", max_session_turns=0, side_a=Side(max_steps=0))
    assert agent.max_session_turns == 0
    assert Model(name="m", provider="x", model="y", input_price=-1).input_price == -1


def test_defaults() -> None:
    agent = Agent(name="a", side_a=Side(prompt="P"))
    assert agent.title == "a"
    assert agent.side("b") == Side()
    assert Agent(name="a", title="Support").display_title == "Support"
    model = Model(name="m", provider="p", model="x", input_price=1.0, output_price=2.0)
    assert (model.effective_cached_price, model.effective_reasoning_price) == (1.0, 2.0)
    assert model.max_attempts == 2 and model.fallbacks == ()
    assert Reasoning().include is True and not Reasoning().requested
    assert Subprompt("s") == Subprompt(name="s")
    assert Subagent("r").relationship_name == "r"
    assert Subagent("r", relationship="rel").relationship_name == "rel"


# --- V1, V2 ------------------------------------------------------------------------------


def test_v1_invalid_names() -> None:
    @tool(name="no spaces")
    def spaced() -> str:
        """Spaced."""
        return ""

    defs = Definitions().add(
        Model(name="bad model!", provider="scripted", model="m"),
        Model(name="ok.model:v1/x-y_z", provider="scripted", model="m"),
        Prompt(name="p.q", model="ok.model:v1/x-y_z"),
        spaced,
        Agent(name="a" * 65, side_a=Side(prompt="p.q")),
    )
    assert problems(defs) == [
        'defined in code: Model name "bad model!" is invalid',
        'defined in code: Tool name "no spaces" is invalid',
        'defined in code: Prompt name "p.q" is invalid',
        f'defined in code: Agent name "{"a" * 65}" is invalid',
    ]


def test_v2_duplicates_within_and_across_kinds() -> None:
    defs = base(
        Agent(name="P", side_a=Side(prompt="P")),
        Agent(name="x", side_a=Side(prompt="P")),
        Agent(name="x", side_a=Side(prompt="P"), title="Other"),
        Model(name="M", provider="scripted", model="other"),
    )
    assert problems(defs) == [
        'defined in code: Duplicate name "P": prompt defined in code and agent defined in code',
        'defined in code: Duplicate name "x": agent defined in code and agent defined in code',
        'defined in code: Duplicate name "M": model defined in code and model defined in code',
    ]


async def test_a_definition_added_in_code_is_said_to_be_defined_in_code(tmp_path: Any) -> None:
    """A problem of a definition made in Python (not found in a project file) names its
    origin in words — ``defined in code`` — where a project file's problems name the file;
    a name used by both says where each came from."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "p.py").write_text(
        "from threadloom import Prompt\nhelp = Prompt(name='help', model='m', system='x')\n"
    )
    defs = Definitions().add(
        Model(name="m", provider="scripted", model="x"),
        Agent(name="help", side_a=Side(prompt="nowhere")),
    )
    with pytest.raises(DefinitionError) as refused:
        await Runtime.open(f"sqlite:///{tmp_path / 't.db'}", definitions=defs, project=tmp_path)
    assert refused.value.problems == [
        'prompts/p.py: Duplicate name "help": agent defined in code and prompt in prompts/p.py',
        'defined in code: Agent "help": side a prompt "nowhere" is not defined',
    ]


def test_v2_same_object_twice_is_a_no_op_and_models_have_their_own_namespace() -> None:
    agent = Agent(name="a", side_a=Side(prompt="P"))
    defs = base(agent, agent, Agent(name="a", side_a=Side(prompt="P")), finish, keep_all)
    defs.add(Model(name="P", provider="scripted", model="m"), origin="models/p.py")
    defs.validate()
    assert defs.agent("a") is agent
    assert defs.origin_of(agent) == "defined in code"
    model = defs.model("P")
    assert model is not None and defs.origin_of(model) == "models/p.py"


def test_v2_reserved_names() -> None:
    @hook("after_create_message", id="subagents")
    def watcher(state: Any, message: Any) -> None:
        return None

    defs = base(
        Prompt(name="subagent_message", model="M"),
        Agent(name="subagent_create", side_a=Side(prompt="P")),
        watcher,
    )
    assert problems(defs) == [
        'defined in code: Name "subagent_message" is reserved',
        'defined in code: Name "subagent_create" is reserved',
        'defined in code: Name "subagents" is reserved',
    ]


def test_add_rejects_non_definitions() -> None:
    with pytest.raises(DefinitionError, match="not a definition"):
        Definitions().add(lambda: None)


# --- models: V3, V4, V17, V18 --------------------------------------------------------------


def test_v3_prompt_model_missing() -> None:
    assert problems(base(Prompt(name="q", model="ghost"))) == [
        'defined in code: Prompt "q": model "ghost" is not defined'
    ]


def test_v4_fallbacks() -> None:
    defs = base(
        Model(name="A", provider="scripted", model="a", fallbacks=["M", "ghost", "A"]),
    )
    assert problems(defs) == [
        'defined in code: Model "A": fallback "A" must not list itself',
        'defined in code: Model "A": fallback "ghost" is not defined',
    ]


def test_v17_prices_and_ranges() -> None:
    defs = base(
        Model(
            name="A",
            provider="scripted",
            model="a",
            input_price=-0.1,
            output_price=math.nan,
            cached_price=math.inf,
            reasoning_price=0.0,
            max_attempts=6,
        )
    )
    assert problems(defs) == [
        'defined in code: Model "A": input_price must be a number >= 0',
        'defined in code: Model "A": output_price must be a number >= 0',
        'defined in code: Model "A": cached_price must be a number >= 0',
        'defined in code: Model "A": max_attempts must be between 1 and 5',
    ]


class FakeProvider:
    name = "fake"

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        yield None


def test_v18_provider_registered_only_when_names_are_given() -> None:
    defs = base(
        Model(name="A", provider="openai", model="gpt"),
        Model(name="B", provider=FakeProvider(), model="x"),
    )
    defs.validate()
    assert problems(defs, providers=["scripted"]) == [
        'defined in code: Model "A": provider "openai" is not registered (registered: scripted)'
    ]
    defs.validate(providers=["scripted", "openai"])


# --- prompts: V5, V6, V13–V16, V20 --------------------------------------------------------


def test_v5_unresolved_and_repeated_entries() -> None:
    defs = base(
        Prompt(name="q", model="M", tools=["ghost", Subprompt("nothing"), "finish", "finish"])
    )
    assert problems(defs) == [
        'defined in code: Prompt "q": tool "ghost" is not defined',
        'defined in code: Prompt "q": tool "nothing" is not defined',
        'defined in code: Prompt "q": tool "finish" is listed twice',
    ]


def test_v6_handoff_and_subagent_targets() -> None:
    hidden_human = Agent(name="human_hidden", side_a=Side(prompt="P"))
    exposed_human = Agent(
        name="human_exposed", side_a=Side(prompt="P"), expose_as_tool=True, tool_description="x"
    )
    dual, a, b = child("dual_hidden")
    dual = dual.model_copy(update={"expose_as_tool": False})
    prompt = Prompt(
        name="q",
        model="M",
        tools=[
            "human_hidden",
            "human_exposed",
            "dual_hidden",
            Subagent(agent="human_exposed", relationship="h2"),
            Subagent(agent="ghost"),
        ],
    )
    assert problems(base(hidden_human, exposed_human, dual, a, b, prompt)) == [
        'defined in code: Prompt "q": agent "human_hidden" cannot be used as a handoff: '
        "expose_as_tool is False",
        'defined in code: Prompt "q": agent "dual_hidden" cannot be used as a subagent: '
        "expose_as_tool is False",
        'defined in code: Prompt "q": agent "human_exposed" cannot be used as a subagent: '
        "it is not a dual_ai agent",
        'defined in code: Prompt "q": agent "ghost" cannot be used as a subagent: '
        "it is not defined",
    ]


def test_v13_includes_missing_and_cycles() -> None:
    defs = base(
        Prompt(name="a", model="M", system=[{"type": "include", "prompt": "b"}]),
        Prompt(name="b", model="M", system=[{"type": "include", "prompt": "a"}]),
        Prompt(name="s", model="M", system=[{"type": "include", "prompt": "s"}]),
        Prompt(name="m", model="M", system=[{"type": "include", "prompt": "ghost"}]),
        Prompt(name="ok", model="M", system=[{"type": "include", "prompt": "P"}]),
    )
    assert problems(defs) == [
        'defined in code: Prompt "a": include cycle a -> b -> a',
        'defined in code: Prompt "s": include cycle s -> s',
        'defined in code: Prompt "m": included prompt "ghost" is not defined',
    ]


def test_v14_required_schema() -> None:
    defs = base(
        Prompt(name="cls", model="M", required_schema=Brief),
        Prompt(name="obj", model="M", required_schema={"type": "object", "properties": {}}),
        Prompt(name="arr", model="M", required_schema={"type": "array"}),
    )
    assert problems(defs) == [
        'defined in code: Prompt "arr": required_schema must describe an object'
    ]


def test_v15_reasoning_options() -> None:
    defs = base(
        Prompt(name="q", model="M", reasoning=Reasoning(effort="extreme", max_tokens=0)),
        Prompt(name="ok", model="M", reasoning=Reasoning(effort="low", max_tokens=1)),
    )
    assert problems(defs) == [
        'defined in code: Prompt "q": invalid reasoning option effort',
        'defined in code: Prompt "q": invalid reasoning option max_tokens',
    ]


def test_v16_tool_choice() -> None:
    researcher, a, b = child()
    defs = base(
        researcher,
        a,
        b,
        Prompt(name="w", model="M", tool_choice="sometimes"),
        Prompt(name="x", model="M", tool_choice={"tool": "search"}),
        Prompt(name="y", model="M", tools=["finish"], tool_choice={"name": "search"}),
        Prompt(name="z", model="M", tools=["search"], tool_choice={"name": "search"}),
        Prompt(name="r", model="M", tools=["researcher"], tool_choice={"name": "subagent_create"}),
        Prompt(name="n", model="M", tool_choice="required"),
    )
    assert problems(defs) == [
        'defined in code: Prompt "w": invalid tool_choice',
        'defined in code: Prompt "x": invalid tool_choice',
        'defined in code: Prompt "y": invalid tool_choice',
    ]


def test_v20_subagent_entries() -> None:
    researcher, a, b = child(schema=Brief)
    prompt = Prompt(
        name="lead",
        model="M",
        tools=[
            "search",
            Subagent(agent="researcher", relationship="search"),
            Subagent(agent="researcher", max_instances=0),
            Subagent(agent="researcher", relationship="bad name"),
            Subagent(agent="researcher", relationship="subagents"),
            Subagent(
                agent="researcher",
                relationship="direct",
                resumable=False,
                init_user_message_property="topic",
                init_attachments_property="files",
            ),
        ],
    )
    assert problems(base(researcher, a, b, prompt)) == [
        'defined in code: Prompt "lead": subagent "search": '
        "name is already offered by another tool entry",
        'defined in code: Prompt "lead": subagent "researcher": max_instances must be >= 1',
        'defined in code: Prompt "lead": subagent "bad name": relationship name is invalid',
        'defined in code: Prompt "lead": subagent "subagents": relationship name is reserved',
        'defined in code: Prompt "lead": subagent "direct": init_attachments_property "files" '
        'is not a property of the required_schema of prompt "researcher_a"',
    ]


# --- agents: V7–V12 ------------------------------------------------------------------------


def test_v7_side_shapes() -> None:
    defs = base(
        Agent(name="no_prompt"),
        Agent(name="dual", type="dual_ai", side_a=Side(prompt="P"), side_b=Side(label="B")),
        Agent(name="prop", side_a=Side(prompt="P", stop_tool_response_property="answer")),
        Agent(name="human", side_a=Side(prompt="P"), side_b=Side(label="C", max_steps=3)),
    )
    assert problems(defs) == [
        'defined in code: Agent "no_prompt": side_a must name a prompt',
        'defined in code: Agent "dual": side_b of a dual_ai agent must name a prompt',
        'defined in code: Agent "prop": side a stop_tool_response_property requires stop_tool',
        'defined in code: Agent "human": side_b of an ai_human agent is the human side and only '
        "takes a label",
    ]


def test_registry_without_prompts_accepts_prompt_less_agents() -> None:
    """Compatibility: threads-only registries (no prompt at all) keep their bare agents."""
    Definitions().add(Agent(name="a"), Agent(name="b", title="B")).validate()
    defs = Definitions().add(Agent(name="d", type="dual_ai"))
    assert problems(defs) == [
        'defined in code: Agent "d": a dual_ai agent requires side_b with a prompt'
    ]


def test_v8_side_prompts_exist() -> None:
    defs = base(
        Agent(name="d", type="dual_ai", side_a=Side(prompt="ghost"), side_b=Side(prompt="finish"))
    )
    assert problems(defs) == [
        'defined in code: Agent "d": side a prompt "ghost" is not defined',
        'defined in code: Agent "d": side b prompt "finish" is not defined',
    ]


def test_v9_max_session_turns_range() -> None:
    defs = base(
        Agent(name="zero", side_a=Side(prompt="P"), max_session_turns=0),
        Agent(name="one", side_a=Side(prompt="P"), max_session_turns=1),
        Agent(name="cap", side_a=Side(prompt="P"), max_session_turns=250),
    )
    assert problems(defs) == [
        'defined in code: Agent "zero": max_session_turns must be between 1 and 250'
    ]


def test_v10_expose_as_tool_requires_description() -> None:
    defs = base(Agent(name="a", side_a=Side(prompt="P"), expose_as_tool=True, tool_description=" "))
    assert problems(defs) == [
        'defined in code: Agent "a": expose_as_tool requires tool_description'
    ]


def test_v11_session_bindings_must_be_tools_of_the_prompt() -> None:
    side = Side(prompt="P", session_stop="finish", session_fail="fail", session_status="status")
    defs = base(Agent(name="a", side_a=side))
    assert problems(defs) == [
        'defined in code: Agent "a": side a session_fail "fail" is not a tool of prompt "P"',
        'defined in code: Agent "a": side a session_status "status" is not a tool of prompt "P"',
    ]


def test_v12_max_steps() -> None:
    defs = base(Agent(name="a", side_a=Side(prompt="P", max_steps=0), max_run_steps=0))
    assert problems(defs) == [
        'defined in code: Agent "a": side a max_steps must be >= 1',
        'defined in code: Agent "a": max_run_steps must be >= 1',
    ]


# --- hooks: V19 ----------------------------------------------------------------------------


def test_v19_unknown_hooks_raise_unknown_hook_error() -> None:
    defs = base(
        keep_all,
        Prompt(name="q", model="M", hooks=["keep_all", "ghost"]),
        Agent(
            name="a",
            side_a=Side(prompt="P"),
            hooks=["phantom"],
            parent_hooks=[ParentHook(hook="audit", stage="before_parent")],
        ),
    )
    with pytest.raises(UnknownHookError) as info:
        defs.validate()
    assert info.value.problems == [
        'defined in code: Prompt "q": hook "ghost" is not defined',
        'defined in code: Agent "a": hook "phantom" is not defined',
        'defined in code: Agent "a": hook "audit" is not defined',
    ]


def test_v19_mixed_with_other_problems_is_a_plain_definition_error() -> None:
    defs = base(Agent(name="a", side_a=Side(prompt="P"), hooks=["ghost"], max_session_turns=0))
    with pytest.raises(DefinitionError) as info:
        defs.validate()
    assert type(info.value) is DefinitionError
    assert len(info.value.problems) == 2


# --- tools: V21 ----------------------------------------------------------------------------


def test_v21_tool_signature_problems() -> None:
    @tool
    def untyped(x, *args, flag: bool = False, **kwargs):  # type: ignore[no-untyped-def]
        """Untyped."""

    @tool(description="Bad options.", timeout=0, progress_argument="missing")
    def options(query: str) -> str:
        return query

    assert problems(Definitions().add(untyped, options)) == [
        'defined in code: Tool "untyped": parameter "x" has no type annotation',
        'defined in code: Tool "untyped": parameter "*args" is not supported (no *args/**kwargs)',
        'defined in code: Tool "untyped": '
        'parameter "**kwargs" is not supported (no *args/**kwargs)',
        'defined in code: Tool "options": timeout must be a number > 0',
        'defined in code: Tool "options": progress_argument "missing" is not a parameter',
    ]


# --- Runtime.open still validates --------------------------------------------------------


async def test_runtime_open_validates_definitions(db_url: str) -> None:
    with pytest.raises(DefinitionError) as info:
        await Runtime.open(db_url, definitions=base(Prompt(name="q", model="ghost")))
    assert info.value.problems == ['defined in code: Prompt "q": model "ghost" is not defined']
    with pytest.raises(UnknownHookError):
        await Runtime.open(
            db_url, definitions=base(Agent(name="a", side_a=Side(prompt="P"), hooks=["x"]))
        )
    runtime = await Runtime.open(
        db_url, definitions=base(keep_all, Agent(name="a", side_a=Side(prompt="P")))
    )
    try:
        thread = await runtime.create_thread("a")
        assert thread.thread_id
    finally:
        await runtime.close()


def test_definition_error_problems_attribute() -> None:
    error = DefinitionError("one\ntwo")
    assert error.problems == ["one", "two"]
    error = DefinitionError(problems=["a: x", "b: y"])
    assert str(error) == "a: x\nb: y"
    assert isinstance(UnknownHookError("x"), DefinitionError)


def test_c04_115_a_typo_gets_the_name_it_was_meant_to_be() -> None:
    @tool
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return order_id

    defs = Definitions().add(
        Model(name="fast", provider="opneai", model="x"),
        Model(name="slow", provider="nothing", model="x"),
        Prompt(name="support", model="fastt", system="s", tools=["lookup_ordr", "zzz"]),
        Agent(name="a", side_a=Side(prompt="supprt"), side_b=Side(label="User")),
        lookup_order,
    )
    assert problems(defs, providers=["anthropic", "openai", "scripted"]) == [
        'defined in code: Model "fast": '
        'provider "opneai" is not registered; did you mean "openai"?',
        'defined in code: Model "slow": provider "nothing" is not registered'
        " (registered: anthropic, openai, scripted)",
        'defined in code: Prompt "support": model "fastt" is not defined; did you mean "fast"?',
        'defined in code: Prompt "support": tool "lookup_ordr" is not defined;'
        ' did you mean "lookup_order"?',
        'defined in code: Prompt "support": tool "zzz" is not defined',
        'defined in code: Agent "a": '
        'side a prompt "supprt" is not defined; did you mean "support"?',
    ]
