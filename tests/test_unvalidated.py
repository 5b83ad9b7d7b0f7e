"""``records.copy_with`` is ``model_copy(update=…)``: the copy is indistinguishable
from pydantic's (values, fields set, extra, private state, model_dump), independent of
the original, and a shared ``AllFieldsSet`` stays shared (the store stamps what it stores
with it too: ``store.sqlite.rows`` re-exports it)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, PrivateAttr

from threadloom.records import (
    MESSAGE_FIELDS_SET,
    AllFieldsSet,
    AttachmentRef,
    LogRow,
    Message,
    QueueEntry,
    RequestDelta,
    copy_with,
)
from threadloom.thread.history import copy_message


def _state(model: BaseModel) -> tuple[Any, ...]:
    return (
        type(model),
        list(model.__dict__.items()),
        type(model.__pydantic_fields_set__),
        model.__pydantic_fields_set__,
        model.__pydantic_extra__,
        model.__pydantic_private__,
        model.model_dump(),
    )


class _Extra(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int = 0


class _Private(BaseModel):
    a: int = 0
    _hidden: int = PrivateAttr(default=3)


class _Ignored(BaseModel):
    model_config = ConfigDict(extra="ignore")
    a: int = 0


def _attachment() -> AttachmentRef:
    return AttachmentRef(id="f", type="file", path="/a", name="a", mimeType="text/plain", size=1)


def _stored() -> Message:
    message = Message(id="s", role="assistant", content="x", tool_calls='[{"id":"c"}]')
    object.__setattr__(message, "__pydantic_fields_set__", MESSAGE_FIELDS_SET)
    return message


CASES: list[tuple[BaseModel, dict[str, Any]]] = [
    (Message(id="m", role="user", content="hi"), {"created_at": 7}),
    (Message(id="m", role="user", content="hi"), {}),
    (
        Message(
            id="m",
            role="assistant",
            metadata={"k": [1]},
            attachments=[_attachment()],
            tool_calls='[{"id":"c"}]',
        ),
        {"created_at": 9, "status": "completed", "content": "done"},
    ),
    (Message.model_construct(id="m", role="user"), {"created_at": 1}),
    (_stored(), {"status": "completed", "content": "y"}),
    (_stored(), {}),
    (
        LogRow(
            id="l",
            provider="p",
            model="m",
            created_at=0,
            request_body="{}",
            request_delta=RequestDelta(None, 0, "{", (), "}"),
        ),
        {"created_at": 5, "request_delta": None, "tool_results": "[]", "is_complete": True},
    ),
    (QueueEntry(id="q", role="user", content="x", source="api", created_at=0), {"created_at": 3}),
    (_attachment(), {}),
    (_Extra(a=1, b=2), {"a": 5, "c": 6}),
    (_Private(a=1), {"a": 2}),
    (_Ignored(a=1), {"a": 4}),
]


@pytest.mark.parametrize(("model", "update"), CASES)
def test_copy_with_is_model_copy(model: BaseModel, update: dict[str, Any]) -> None:
    before = _state(model)
    expected = model.model_copy(update=update)
    copied = copy_with(model, dict(update))
    assert copied == expected
    assert _state(copied) == _state(expected)
    assert copied.__dict__ is not model.__dict__
    shared = type(model.__pydantic_fields_set__) is AllFieldsSet
    assert (copied.__pydantic_fields_set__ is model.__pydantic_fields_set__) == shared
    assert _state(model) == before  # the original is unchanged


def test_copy_with_takes_a_given_fields_set() -> None:
    message = Message(id="m", role="user", content="hi")
    copied = copy_with(message, {"created_at": 2}, MESSAGE_FIELDS_SET)
    assert copied.__pydantic_fields_set__ is MESSAGE_FIELDS_SET
    assert copied.__dict__ == {**message.__dict__, "created_at": 2}
    assert message.created_at != 2  # the original is unchanged


@pytest.mark.parametrize(("model", "update"), [c for c in CASES if isinstance(c[0], Message)])
def test_copy_message_is_a_deep_copy(model: Message, update: dict[str, Any]) -> None:
    copied, expected = copy_message(model), model.model_copy(deep=True)
    assert _state(copied) == _state(expected)
    if model.metadata is not None:
        assert copied.metadata is not model.metadata
    if model.attachments:
        assert copied.attachments is not model.attachments
        assert all(a is not b for a, b in zip(copied.attachments, model.attachments, strict=True))
