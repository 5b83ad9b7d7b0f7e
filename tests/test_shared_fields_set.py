"""Records of a ``SharingModel`` class built by ``records.trusted`` share one fields set
per (class, names) — the provider messages and request messages the engine keeps for every
message of a warm history — and still behave as if each had its own: an assignment, a
``model_copy`` or a ``copy_with`` that adds a name gives that record a set of its own, and
the other records never see it."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from threadloom.engine.request.presentation import RequestMessage
from threadloom.providers.types import AssistantMessage, ToolMessage, UserMessage
from threadloom.records import LogRow, Message, SharedFieldsSet, copy_with, trusted


def _tool(content: str = "t") -> ToolMessage:
    return trusted(ToolMessage, {"tool_call_id": "c", "name": "n", "content": content})


def test_records_built_from_the_same_names_share_one_set() -> None:
    a, b = _tool("one"), _tool("two")
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__
    assert type(a.__pydantic_fields_set__) is SharedFieldsSet
    assert a.model_fields_set == {"tool_call_id", "name", "content"}
    # the fields set is the one validation gives: model_dump(exclude_unset) agrees
    validated = ToolMessage(tool_call_id="c", name="n", content="one")
    assert a.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    assert a == validated
    other = trusted(
        ToolMessage, {"tool_call_id": "c", "name": "n", "content": "x", "is_error": True}
    )
    assert other.__pydantic_fields_set__ is not a.__pydantic_fields_set__  # other names
    request = trusted(RequestMessage, {"role": "user", "content": "hi"})
    assert type(request.__pydantic_fields_set__) is SharedFieldsSet
    assert request.__pydantic_fields_set__ is not trusted(UserMessage, {"content": "hi"})


def test_an_assignment_of_a_missing_name_gives_the_record_its_own_set() -> None:
    a, b = _tool(), _tool()
    shared = a.__pydantic_fields_set__
    a.content = "changed"  # a name the set holds: still shared, nothing added
    assert a.__pydantic_fields_set__ is shared and a.content == "changed"
    a.is_error = True  # a name the set lacks: a's own set from here on
    assert a.model_fields_set == {"tool_call_id", "name", "content", "is_error"}
    assert type(a.__pydantic_fields_set__) is set
    assert b.__pydantic_fields_set__ is shared
    assert b.model_fields_set == {"tool_call_id", "name", "content"} and not b.is_error
    assert _tool().__pydantic_fields_set__ is shared  # later records still share it


@pytest.mark.parametrize(
    ("update", "shared"),
    [({"content": "new"}, True), ({"is_error": True}, False), ({}, True)],
)
def test_copies_share_only_while_the_update_adds_no_name(
    update: dict[str, Any], shared: bool
) -> None:
    a = _tool()
    names = set(a.model_fields_set)
    reference = a.model_copy(update=update)
    for copied in (copy_with(a, update), reference):
        assert copied.model_fields_set == names | update.keys()
        assert copied == reference
    assert (copy_with(a, update).__pydantic_fields_set__ is a.__pydantic_fields_set__) is shared
    assert type(reference.__pydantic_fields_set__) is set  # pydantic's copy: its own set
    assert a.model_fields_set == names and _tool().model_fields_set == names


def test_copies_pickles_and_deep_copies_are_independent() -> None:
    a = _tool()
    for other in (copy.copy(a), copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert other == a and other.model_fields_set == a.model_fields_set
        other.is_error = True
        assert "is_error" in other.model_fields_set
    assert a.model_fields_set == {"tool_call_id", "name", "content"} and not a.is_error


def test_a_shared_set_refuses_every_change() -> None:
    shared = _tool().__pydantic_fields_set__
    shared.add("content")  # what pydantic does on assigning a name it holds: a no-op
    for change in (
        lambda: shared.add("is_error"),
        lambda: shared.update({"x"}),
        lambda: shared.discard("content"),
        lambda: shared.remove("content"),
        lambda: shared.pop(),
        lambda: shared.clear(),
        lambda: shared.difference_update({"content"}),
        lambda: shared.intersection_update({"content"}),
        lambda: shared.symmetric_difference_update({"x"}),
    ):
        with pytest.raises(TypeError):
            change()
    assert shared == {"tool_call_id", "name", "content"}
    assert type(shared | {"x"}) is set  # an operator's result is a plain set


def test_other_models_keep_a_set_per_record() -> None:
    values: dict[str, Any] = {"id": "m", "role": "user", "content": "x"}
    one, two = trusted(Message, values), trusted(Message, values)
    assert type(one.__pydantic_fields_set__) is set
    assert one.__pydantic_fields_set__ is not two.__pydantic_fields_set__
    made = trusted(AssistantMessage, {"content": "x"})
    made.tool_calls.append(trusted(ToolMessage, {"tool_call_id": "c", "name": "n", "content": ""}))
    assert trusted(AssistantMessage, {"content": "x"}).tool_calls == []  # defaults not shared


def test_log_rows_share_their_sets_and_a_copy_that_adds_names_shares_the_union() -> None:
    """Issue 40: a log row's set of names is 2.2 KB and each model or tool call builds a
    row and copies it with its result; the rows of one shape share one set, and the copies
    that add the same names share the union's (the row itself keeps its own)."""
    values: dict[str, Any] = {"id": "l", "created_at": 1, "provider": "p", "model": "m"}
    one, two = trusted(LogRow, values), trusted(LogRow, {**values, "id": "l2"})
    assert type(one.__pydantic_fields_set__) is SharedFieldsSet
    assert one.__pydantic_fields_set__ is two.__pydantic_fields_set__
    update = {"response_body": "{}", "finish_reason": "stop"}
    a, b = copy_with(one, update), copy_with(two, update)
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__
    assert a.model_fields_set == set(values) | set(update)
    assert one.model_fields_set == set(values)  # the original is untouched
    assert a == one.model_copy(update=update)
    a.error = "boom"  # a name the union lacks: a's own set, b unchanged
    assert "error" in a.model_fields_set and "error" not in b.model_fields_set
    assert type(a.__pydantic_fields_set__) is set
