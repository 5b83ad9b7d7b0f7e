"""The cached constant part of a model request (``engine/request/request_head.py``, spec 04 §4.25):
its request fields and body text equal what serialising the whole request gives, and a
re-registered definition never gets a stale head."""

from __future__ import annotations

import json
from typing import Any

import pytest

from threadloom import Definitions
from threadloom.define import Model, Prompt, Reasoning, tool
from threadloom.engine.request.request_head import SLOT, Heads, head_for
from threadloom.providers.types import OutputFormat, ProviderRequest, ReasoningRequest, ToolSpec
from threadloom.records import json_compact

HEADS: Heads = {}


@tool
def lookup(order: int, note: str = "") -> str:
    """Look an order up."""
    return f"order {order}"


@tool
def other(v: int) -> str:
    """Another tool."""
    return str(v)


def _reference(prompt: Any, model: Any, tools: list[Any], system: str) -> tuple[Any, str]:
    """The request and body head as ``build_request`` made them before the cache: the
    whole request built and dumped for every request."""
    offered = [t for t in tools if t.direct] if model.supports_tools else []
    specs = [
        ToolSpec(name=t.name, description=t.description, parameters=t.parameters) for t in offered
    ]
    reasoning = prompt.reasoning
    wants = reasoning is not None and (
        reasoning.effort is not None or reasoning.max_tokens is not None
    )
    request = ProviderRequest.model_construct(
        model=model.model,
        messages=[],
        tools=specs,
        tool_choice=prompt.tool_choice if specs else None,
        parallel_tool_calls=prompt.parallel_tool_calls if specs else None,
        reasoning=ReasoningRequest(
            effort=reasoning.effort, max_tokens=reasoning.max_tokens, exclude=reasoning.exclude
        )
        if wants
        else None,
        max_output_tokens=model.max_output_tokens,
        provider_options={**model.provider_options, **prompt.provider_options},
        metadata={},
        output=OutputFormat(
            name=prompt.output.name, json_schema=prompt.output.schema, strict=prompt.output_strict
        )
        if prompt.output is not None
        else None,
    )
    head = request.model_dump(mode="json", exclude={"metadata", "messages"})
    if head["output"] is None:  # spec 24 §24.2: a body without an output type is unchanged
        del head["output"]
    head["_metadata"] = {"promptName": prompt.name, "systemPrompt": system}
    return request, json_compact({"model": head.pop("model"), "messages": SLOT, **head})


PROMPTS = [
    Prompt(name="P", model="M", system="S", tools=["lookup", "other"]),
    Prompt(
        name="P", model="M", tools=["lookup"], tool_choice="required", parallel_tool_calls=False
    ),
    Prompt(name="P", model="M", tools=[], provider_options={"temperature": 0.2, "x": "é"}),
    Prompt(
        name="P",
        model="M",
        tools=["other"],
        tool_choice={"name": "other"},
        reasoning=Reasoning(effort="high", exclude=True),
    ),
    Prompt(name="P", model="M", tools=["lookup"], reasoning=Reasoning(include=False)),
    Prompt(
        name="P",
        model="M",
        tools=["lookup"],
        output_type={"type": "object", "properties": {"n": {"type": "integer"}}},
        output_strict=True,
    ),
]
MODELS = [
    Model(name="M", provider="scripted", model="m-1"),
    Model(
        name="M",
        provider="scripted",
        model="m-2",
        max_output_tokens=64,
        provider_options={"temperature": 1.0, "top_p": 0.5},
    ),
    Model(name="M", provider="scripted", model="m-3", supports_tools=False),
]


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("model", MODELS)
def test_head_matches_the_whole_request_serialised(prompt: Prompt, model: Model) -> None:
    defs = Definitions().add(model, prompt, lookup, other)
    tools = defs.offered_tools(prompt)
    for system in ("You are P.", 'Ünïcode \u2028 "quoted"', ""):
        head = head_for(HEADS, prompt, model, tools)
        expected_request, expected_text = _reference(prompt, model, tools, system)
        assert head.body_head(prompt.name, system, None) == expected_text
        request = head.request(model.model, [], {})
        assert request.model_dump(exclude={"metadata"}) == expected_request.model_dump(
            exclude={"metadata"}
        )
    assert head_for(HEADS, prompt, model, tools) is head  # built once


def test_requests_do_not_share_mutable_lists() -> None:
    prompt, model = PROMPTS[2], MODELS[1]
    head = head_for(HEADS, prompt, model, [])
    first = head.request(model.model, [], {})
    first.provider_options["temperature"] = 9
    first.tools.append(ToolSpec(name="x"))
    second = head.request(model.model, [], {})
    assert second.provider_options["temperature"] == 0.2
    assert second.tools == []


def test_extra_metadata_joins_the_metadata_object() -> None:
    """An adapter's ``log_metadata`` (e.g. Anthropic's ``thinkingDisabled``) is added after
    the prompt name and system prompt, and may override them, as a dict update would."""
    prompt, model = PROMPTS[0], MODELS[0]
    defs = Definitions().add(model, prompt, lookup, other)
    head = head_for(HEADS, prompt, model, defs.offered_tools(prompt))
    text = head.body_head("P", "S", {"thinkingDisabled": True, "promptName": "Q"})
    body = json.loads(text)
    assert body["_metadata"] == {"promptName": "Q", "systemPrompt": "S", "thinkingDisabled": True}
    assert list(body)[:2] == ["model", "messages"] and list(body)[-1] == "_metadata"
    # the plain head is unaffected by the call with extras
    assert json.loads(head.body_head("P", "S", None))["_metadata"] == {
        "promptName": "P",
        "systemPrompt": "S",
    }


def test_a_re_registered_definition_gets_its_own_head() -> None:
    """Definitions are frozen: re-registering makes new objects, which are new keys."""
    model = MODELS[0]
    first = Prompt(name="P", model="M", tools=["lookup"], tool_choice="auto")
    second = Prompt(name="P", model="M", tools=["lookup"], tool_choice="required")
    one = Definitions().add(model, first, lookup)
    two = Definitions().add(model, second, lookup)
    head_one = head_for(HEADS, first, model, one.offered_tools(first))
    head_two = head_for(HEADS, second, model, two.offered_tools(second))
    assert head_one is not head_two
    assert json.loads(head_one.body_head("P", "", None))["tool_choice"] == "auto"
    assert json.loads(head_two.body_head("P", "", None))["tool_choice"] == "required"
    renamed = Model(name="M", provider="scripted", model="m-9")
    head_three = head_for(HEADS, first, renamed, one.offered_tools(first))
    assert json.loads(head_three.body_head("P", "", None))["model"] == "m-9"
