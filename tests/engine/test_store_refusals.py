"""A storage failure inside a step (spec 04 §4.21): whichever write of a turn the database
refuses, the run ends ``failed``/``step_error`` with its runtime log row, nothing is left
``pending`` or ``running``, the records are the same whether the step's pending message
was held back or not (engine/step/pending.py), and the thread's next message runs normally.

The refusal is the database's own: a trigger in the real database raises, as a full disk, a
constraint or a broken file would (no store is mocked).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import pytest
from test_c04_control import _logs, _messages, _status

from store_probe import StoreProbe
from threadloom.engine.options import EngineOptions
from threadloom.providers.scripted import Call, Reply
from threadloom.providers.types import ProviderRequest, ToolMessage

REFUSED = {
    # the write refused → its table and the rows it matches (a pending placeholder stores;
    # its completion, inserted with a held pair or updated, does not)
    "tool call": ("messages", "NEW.role = 'assistant' AND NEW.tool_calls IS NOT NULL"),
    "tool result": ("messages", "NEW.role = 'tool'"),
    "final answer": ("messages", "NEW.role = 'assistant' AND NEW.tool_calls IS NULL"),
    "log row": ("logs", "1 = 1"),
}
_COMPLETED = " AND NEW.status = 'completed'"
REFUSAL = "refused by the database"


def refusing(db_url: str, table: str, when: str) -> AbstractContextManager[None]:
    """The database refuses every insert into and update of ``table`` whose new row
    matches ``when`` (an SQL condition on ``NEW``) until the block ends, with the error
    :data:`REFUSAL`."""
    return StoreProbe(db_url).refusing(table, when, REFUSAL)


def _answer(request: ProviderRequest) -> Reply:
    """A tool call for a user message, ``done`` for a tool result: each turn alike, however
    many requests an earlier one made (a held step's request went out before its pair
    was refused; an unheld step's never did)."""
    if isinstance(request.messages[-1], ToolMessage):
        return Reply.text("done")
    return Reply.tool_calls(Call("echo", {"v": 1}))


async def _refused_turn(make_chat: Any, db_url: str, write: str, hold: float) -> Any:
    chat = await make_chat(_answer, options=EngineOptions(pending_hold_s=hold))
    state = await chat.thread()
    tid = state.thread_id
    table, when = REFUSED[write]
    with refusing(db_url, table, when + _COMPLETED if table == "messages" else when):
        await chat.runtime.send_message(tid, "hi")
        await chat.runtime.wait_idle(tid, timeout=5)
        rows = await _logs(chat, tid)
        seen = (
            [(m.role, m.status, m.content) for m in await _messages(state)],
            [(r.is_complete, (r.error or "").split("\n")[0], r.error_type) for r in rows],
            await _status(state),
        )
    await chat.runtime.send_message(tid, "next")
    await chat.runtime.wait_idle(tid, timeout=5)
    after = [(m.role, m.status, m.content) for m in await _messages(state)]
    after_status = await _status(state)
    await chat.runtime.close()
    return seen, after, after_status


@pytest.mark.parametrize("write", list(REFUSED))
async def test_a_refused_write_fails_the_step_alike_held_or_not(
    make_chat: Any, db_url: str, write: str
) -> None:
    unheld = await _refused_turn(make_chat, db_url, write, 0.0)
    held = await _refused_turn(make_chat, db_url, write, 30.0)
    assert held == unheld
    (messages, rows, status), after, after_status = held
    assert status == ("failed", "step_error")
    assert all(m[1] != "pending" for m in messages)
    if write == "log row":  # nor can the runtime row be stored: the status still settles
        assert rows == []
    else:
        assert rows[-1] == (True, REFUSAL, "step_execution_error")
        assert all(complete for complete, _, _ in rows)  # every request's row closed
    expected = {
        "tool call": [("user", "completed", "hi"), ("assistant", "failed", None)],
        "tool result": [("user", "completed", "hi"), ("assistant", "completed", None)],
        "final answer": [
            ("user", "completed", "hi"),
            ("assistant", "completed", None),
            ("tool", "completed", "echo 1"),
            ("assistant", "failed", "done"),
        ],
        "log row": [("user", "completed", "hi")],
    }[write]
    assert messages == expected
    # the next message runs a normal turn on what is stored (a call left without its
    # result is answered in the request by the pairing repair, §4.11.7)
    assert after[: len(messages)] == messages
    assert after[len(messages)] == ("user", "completed", "next")
    assert after[-1] == ("assistant", "completed", "done")
    assert after_status == ("idle", "stop_on_response")
