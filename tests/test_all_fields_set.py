"""Stored messages share one pydantic fields set (``records.AllFieldsSet``): a 1.2 KB set
and a tracked object less for every message a warm history keeps, with pydantic's
behaviour unchanged."""

from __future__ import annotations

import copy
import pickle

import pytest

from threadloom import Runtime
from threadloom.records import MESSAGE_FIELDS_SET, Message


async def test_stored_messages_share_the_full_fields_set(runtime: Runtime) -> None:
    state = await runtime.create_thread("a")
    injected = await state.inject_message(role="user", content="hello")
    stored = await runtime.store.get_message(state.thread_id, injected.id)
    assert stored is not None
    page = await runtime.store.top_level_history(state.thread_id)
    for message in (stored, *page):
        assert message.__pydantic_fields_set__ is MESSAGE_FIELDS_SET
        assert message.model_fields_set == set(Message.model_fields)
    mine = Message(id="m", role="user", content="x")  # built by hand: its own, partial set
    assert mine.model_fields_set == {"id", "role", "content"}
    assert mine.__pydantic_fields_set__ is not MESSAGE_FIELDS_SET


def test_pydantic_behaves_as_with_a_set_of_its_own() -> None:
    message = Message(id="m", role="user", content="x")
    object.__setattr__(message, "__pydantic_fields_set__", MESSAGE_FIELDS_SET)
    changed = message.model_copy(update={"content": "y"})
    assert (changed.content, message.content) == ("y", "x")
    assert changed.__pydantic_fields_set__ is MESSAGE_FIELDS_SET
    deep = message.model_copy(deep=True)
    assert deep == message and deep.__pydantic_fields_set__ is MESSAGE_FIELDS_SET
    assert copy.copy(message) == message
    message.content = "z"  # an assignment adds a name it already holds: nothing changes
    assert message.content == "z" and len(MESSAGE_FIELDS_SET) == len(Message.model_fields)
    assert set(message.model_dump(exclude_unset=True)) == set(Message.model_fields)
    assert pickle.loads(pickle.dumps(message)) == message


def test_the_shared_set_refuses_every_other_change() -> None:
    before = set(MESSAGE_FIELDS_SET)
    with pytest.raises(TypeError, match="not a field"):
        MESSAGE_FIELDS_SET.add("no_such_field")
    for change in (
        lambda s: s.discard("id"),
        lambda s: s.remove("id"),
        lambda s: s.pop(),
        lambda s: s.clear(),
        lambda s: s.difference_update({"id"}),
        lambda s: s.intersection_update({"id"}),
        lambda s: s.symmetric_difference_update({"id"}),
    ):
        with pytest.raises(TypeError):
            change(MESSAGE_FIELDS_SET)
    assert before == MESSAGE_FIELDS_SET


def test_the_shared_set_takes_names_it_holds_from_any_iterable() -> None:
    before = set(MESSAGE_FIELDS_SET)
    MESSAGE_FIELDS_SET.update({"id": 1}, {"content": 2}.keys(), ["role"], ("id",), iter(["id"]))
    MESSAGE_FIELDS_SET.update(name for name in ("id", "role"))
    shared = MESSAGE_FIELDS_SET
    shared |= {"status"}
    assert shared is MESSAGE_FIELDS_SET
    assert before == MESSAGE_FIELDS_SET
    for other in ({"id": 1, "nope": 2}, iter(["id", "nope"]), (n for n in ["nope"]), ["x"]):
        with pytest.raises(TypeError, match="not a field"):
            MESSAGE_FIELDS_SET.update(other)
    with pytest.raises(TypeError):
        MESSAGE_FIELDS_SET.update([["unhashable"]])
    assert before == MESSAGE_FIELDS_SET
