"""The SQLite store stamps the records it stores with ``rows.copy_with`` instead of
pydantic's ``model_copy(update=…)``: the copy must be indistinguishable from it (values,
fields set, extra, private state, model_dump), and independent of the original."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, PrivateAttr

from threadloom.records import AttachmentRef, LogRow, Message, QueueEntry, RequestDelta
from threadloom.store.sqlite.rows import copy_with


def _state(model: BaseModel) -> tuple[Any, ...]:
    return (
        type(model),
        model.__dict__,
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


@pytest.mark.parametrize(
    ("model", "update"),
    [
        (Message(id="m", role="user", content="hi"), {"created_at": 7}),
        (
            Message(
                id="m",
                role="assistant",
                metadata={"k": [1]},
                attachments=[
                    AttachmentRef(
                        id="f", type="file", path="/a", name="a", mimeType="text/plain", size=1
                    )
                ],
                tool_calls='[{"id":"c"}]',
            ),
            {"created_at": 9},
        ),
        (Message.model_construct(id="m", role="user"), {"created_at": 1}),
        (
            LogRow(
                id="l",
                provider="p",
                model="m",
                created_at=0,
                request_body="{}",
                request_delta=RequestDelta(None, 0, "{", (), "}"),
            ),
            {"created_at": 5, "request_delta": None},
        ),
        (
            QueueEntry(id="q", role="user", content="x", source="api", created_at=0),
            {"created_at": 3},
        ),
        (_Extra(a=1, b=2), {"a": 5, "c": 6}),
        (_Private(a=1), {"a": 2}),
    ],
)
def test_copy_with_is_model_copy(model: BaseModel, update: dict[str, Any]) -> None:
    expected = model.model_copy(update=update)
    copied = copy_with(model, dict(update))
    assert copied == expected
    assert _state(copied) == _state(expected)
    assert copied.__dict__ is not model.__dict__
    assert copied.__pydantic_fields_set__ is not model.__pydantic_fields_set__
    assert all(getattr(copied, k) == v for k, v in update.items() if k in type(model).model_fields)
