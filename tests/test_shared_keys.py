"""The records a thread keeps for long — a history's copies, the rows the store reads back
and returns from a write, the records ``trusted`` builds — hold their fields in an instance
dictionary whose keys are shared with their class (CPython's key-sharing dictionary, PEP
412; ``records.trusted.blank``): a Message's 27 fields in 288 bytes instead of 832 (issue
40, memory per active thread). They are the same records: equal, the same fields in the
same order, the same dumps, and independent of one another."""

from __future__ import annotations

import copy
import pickle
import sys

from threadloom import Runtime
from threadloom.records import Message, blank, copy_with, trusted
from threadloom.store.core.codec import message_from_row
from threadloom.thread.history import MessageHistory, copy_message


def _own(d: dict[str, object]) -> int:
    """The size of the same keys and values in a dictionary of its own."""
    return sys.getsizeof(dict(d))


def _validated() -> Message:
    return Message(
        id="m1",
        role="assistant",
        content="hi",
        name="Agent",
        metadata={"k": [1, 2]},
        created_at=5,
    )


def test_a_history_keeps_records_on_shared_keys_equal_to_the_message() -> None:
    message = _validated()
    history = MessageHistory()
    history.upsert(message)
    record = history.raw()[0]
    assert sys.getsizeof(record.__dict__) < _own(record.__dict__)
    assert record == message
    assert list(record.__dict__) == list(Message.model_fields)
    assert record.model_dump() == message.model_dump()
    assert record.model_fields_set == message.model_fields_set
    assert record.metadata is not message.metadata  # containers copied, as before
    # a copy handed out is independent: changing it leaves the record alone
    out = history[0]
    out.content = "changed"
    out.metadata["k"].append(3)  # type: ignore[index]
    assert history.raw()[0].content == "hi"
    assert history.raw()[0].metadata == {"k": [1, 2]}


def test_records_on_shared_keys_stay_independent_when_assigned() -> None:
    a = copy_message(_validated())
    b = copy_message(_validated())
    a.content = "a"
    b.status = "failed"
    assert (a.content, a.status) == ("a", "completed")
    assert (b.content, b.status) == ("hi", "failed")
    assert "status" in b.model_fields_set


def test_a_row_read_back_is_built_on_shared_keys() -> None:
    row = (
        *("m1", "tool", "echo 1", "echo", None, "call_1", "success", "completed", None),
        *(None, None, "P", 7, None, 0, 0, '{"a":1}', None, "log_1"),
    )
    message = message_from_row(row)
    assert sys.getsizeof(message.__dict__) < _own(message.__dict__)
    assert list(message.__dict__) == list(Message.model_fields)
    assert message == Message(
        id="m1",
        role="tool",
        content="echo 1",
        name="echo",
        tool_call_id="call_1",
        tool_status="success",
        prompt="P",
        created_at=7,
        metadata={"a": 1},
        log_id="log_1",
    )
    assert message.subagent_name is None and message.silent is False


async def test_a_message_the_store_writes_is_returned_on_shared_keys(runtime: Runtime) -> None:
    """The stored message a write returns (the engine holds it while its step runs)."""
    state = await runtime.create_thread("a")
    message = _validated()  # validated: a dictionary of its own
    assert sys.getsizeof(message.__dict__) >= _own(message.__dict__)
    stored, _ = await runtime.store.insert_message(state.thread_id, message)
    assert sys.getsizeof(stored.__dict__) < _own(stored.__dict__)
    assert list(stored.__dict__) == list(Message.model_fields)
    assert stored.model_dump() == {**message.model_dump(), "created_at": stored.created_at}
    assert stored.metadata == message.metadata


def test_trusted_and_copy_with_give_the_records_validation_gives() -> None:
    built = trusted(Message, {"id": "x", "role": "user", "content": "q"})
    assert sys.getsizeof(built.__dict__) < _own(built.__dict__)
    assert built == Message(id="x", role="user", content="q")
    assert built.model_fields_set == {"id", "role", "content"}
    # copy_with of a record on shared keys stays on them; shared_keys=True puts a copy of
    # a validated record (a dictionary of its own) on them
    again = copy_with(built, {"content": "r"})
    assert sys.getsizeof(again.__dict__) < _own(again.__dict__)
    assert (again.content, built.content) == ("r", "q")
    moved = copy_with(_validated(), {"status": "failed"}, shared_keys=True)
    assert sys.getsizeof(moved.__dict__) < _own(moved.__dict__)
    assert moved == _validated().model_copy(update={"status": "failed"})
    # copies, pickles and dumps of such records are the ordinary ones
    assert copy.deepcopy(moved) == moved
    assert pickle.loads(pickle.dumps(moved)) == moved
    assert moved.to_wire() == _validated().model_copy(update={"status": "failed"}).to_wire()


def test_blank_is_a_fresh_dictionary_each_time() -> None:
    a, b = blank(Message), blank(Message)
    a["content"] = "x"
    assert b["content"] is None
    assert list(a) == list(Message.model_fields)
