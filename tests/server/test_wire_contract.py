"""The HTTP contract is declared once (issue 32): a route that parses its body with a wire
model parses it with the model its row of ``wire.routes.OPERATIONS`` declares, so
``/openapi.json`` describes what the route really reads; and the one mapper turns a
refusal into the spec's field, problem and sentence."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping

import pytest
from pydantic import BaseModel, ValidationError

from threadloom.server.app import _build
from threadloom.server.settings import ServerSettings
from threadloom.wire.messages import SendMessage
from threadloom.wire.problems import field_name, problems_of
from threadloom.wire.routes import OPERATIONS, Content
from threadloom.wire.threads import AgentSummary, CreateThread, PatchThread
from threadloom.wire.users import CreateUser

PARSES = re.compile(r"\b(?:body_of\(request, |parse\()(\w+)\b")
"""``deps.body_of(request, Model …)`` or ``deps.parse(Model, …)`` in a route's code."""


def _models(content: Content) -> set[str]:
    if content is None:
        return set()
    if isinstance(content, Mapping):
        return {n for v in content.values() if not isinstance(v, Mapping) for n in _models(v)}
    if isinstance(content, tuple):
        return {m.__name__ for m in content}
    return {content.__name__}


def _endpoints() -> dict[str, str]:
    """Each documented route's name and the source of its handler."""
    found: dict[str, str] = {}
    stack = list(_build(ServerSettings()).routes)
    while stack:
        route = stack.pop()
        included = getattr(route, "original_router", None)
        if included is not None:
            stack.extend(included.routes)
        elif getattr(route, "include_in_schema", False) and hasattr(route, "endpoint"):
            found[route.name] = inspect.getsource(route.endpoint)
    return found


def test_routes_parse_with_the_models_their_row_declares() -> None:
    parsed = 0
    for name, source in _endpoints().items():
        for model in PARSES.findall(source):
            assert model in _models(OPERATIONS[name].body), (name, model)
            parsed += 1
    assert parsed >= 12  # the converted groups: threads, messages, control, auth, users, files


@pytest.mark.parametrize(
    ("model", "body", "expected"),
    [
        (
            SendMessage,
            {"metadata": {"queued": True}, "attachments": [{"name": "a", "mimeType": "x"}]},
            [
                ("metadata.queued", "is reserved", "metadata.queued is reserved"),
                (
                    "attachments[0].mimeType",
                    "must be a MIME type such as image/png",
                    "attachments[0].mimeType must be a MIME type such as image/png",
                ),
                (
                    "attachments[0].data",
                    "must be base64-encoded data",
                    "attachments[0].data must be base64-encoded data",
                ),
            ],
        ),
        (
            SendMessage,
            {"content": " "},
            [
                (
                    "content",
                    "must not be blank without attachments",
                    "Message content or attachments required",
                )
            ],
        ),
        (
            CreateUser,
            {"password": "short"},
            [
                (
                    "username",
                    "must be 1-64 characters of [A-Za-z0-9._-]",
                    "username must be 1-64 characters of [A-Za-z0-9._-]",
                ),
                (
                    "password",
                    "must be at least 12 characters",
                    "Password must be at least 12 characters",
                ),
            ],
        ),
        (  # one rule, several problems: across the items, and a caller's text kept as sent
            CreateThread,
            {
                "agent_id": "a",
                "tags": [""],
                "user_id": 3,
                "arguments": {},
                "data": {},
                "initial_messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "{at}", "function": {"name": "f"}}],
                    },
                    {
                        "role": "user",
                        "content": "hi",
                        "id": "x",
                        "tool_calls": [{"id": "{at}", "function": {"name": "f"}}],
                    },
                    {"role": "tool", "tool_call_id": "c9", "content": "r", "silent": 1},
                ],
            },
            [
                ("tags[0]", "must be 1-200 characters", "tags[0] must be 1-200 characters"),
                ("user_id", "must be a string or null", "user_id must be a string or null"),
                ("arguments", "conflicts with data", "Use either arguments or data, not both"),
                (
                    "initial_messages[1].id",
                    "cannot be set on an initial message",
                    "initial_messages[1].id cannot be set on an initial message",
                ),
                (
                    "initial_messages[1].tool_calls",
                    "repeats call id {at}",
                    "initial_messages[1].tool_calls repeats call id {at}",
                ),
                (
                    "initial_messages[2].tool_call_id",
                    "must name a call of an earlier assistant item",
                    "initial_messages[2].tool_call_id must name a call of an earlier"
                    " assistant item",
                ),
                (
                    "initial_messages[2].silent",
                    "must be a boolean",
                    "initial_messages[2].silent must be a boolean",
                ),
            ],
        ),
        (  # an object's keys named as they are; tenvs read as env; env_types only with env
            PatchThread,
            {"tenvs": {"A": 1}, "env_patch": {" ": "x", "0": 5}, "env_types": {}},
            [
                (
                    "env",
                    "must be an object of string values",
                    "env must be an object of string values",
                ),
                (
                    "env_patch",
                    "keys must be non-empty strings",
                    "env_patch keys must be non-empty strings",
                ),
                ("env_patch.0", "must be a string", "env_patch.0 must be a string"),
            ],
        ),
        (
            PatchThread,
            {"env_types": {"A": "text"}, "tags": None},
            [
                (
                    "env_types",
                    "must be an object given together with env",
                    "env_types must be an object given together with env",
                )
            ],
        ),
        (
            PatchThread,
            {"tags": None},
            [("body", "has no field to update", "No valid fields to update")],
        ),
    ],
)
def test_the_mapper_gives_the_spec_texts(
    model: type[BaseModel], body: dict[str, object], expected: list[tuple[str, str, str]]
) -> None:
    with pytest.raises(ValidationError) as info:
        model.model_validate(body)
    assert [(p.field, p.problem, p.message) for p in problems_of(info.value)] == expected


def test_field_names() -> None:
    assert field_name(("attachments", 0, "name")) == "attachments[0].name"
    assert field_name((1, "data"), "initial_messages[2].attachments") == (
        "initial_messages[2].attachments[1].data"
    )
    assert field_name(()) == ""


def test_an_answer_is_the_keys_it_was_built_with() -> None:
    """``to_wire()``: by alias, in the declared order, a key left out stays out (the agent of
    a thread item has no ``description`` when the agent has none)."""
    built = AgentSummary(name="a", title="A", side_b_backing="human", side_a_backing="prompt")
    assert list(built.to_wire()) == ["name", "title", "side_a_backing", "side_b_backing"]
    assert AgentSummary(name="gone", title="gone").to_wire() == {"name": "gone", "title": "gone"}
