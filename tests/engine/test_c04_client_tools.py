"""Client tools in the engine (spec 13 §13.7, spec 04 §4.22 ``awaiting_client_tool``): the
Runtime API the AG-UI endpoint uses, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from threadloom.engine.run.client_tools import ClientAnswer, ClientTool
from threadloom.errors import InvalidField
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply
from threadloom.providers.types import ProviderRequest, ToolMessage

PICK = ClientTool(
    "pick_date",
    "Let the user pick a date in the page.",
    {"type": "object", "properties": {"month": {"type": "string"}}},
)


def script(requests: list[ProviderRequest]) -> Any:
    def reply(request: ProviderRequest) -> Reply:
        requests.append(request)
        last = request.messages[-1]
        if isinstance(last, ToolMessage) and last.tool_call_id == "c-pick":
            return Reply.text(f"You picked {last.text}.")
        if isinstance(last, ToolMessage):
            return Reply.text("?")
        return Reply.tool_calls(
            Call("echo", {"v": 1}, id="c-echo"), Call("pick_date", {"month": "May"}, id="c-pick")
        )

    return reply


async def test_c04_121_a_client_tool_call_ends_the_run_until_the_client_answers(
    make_chat: Any,
) -> None:
    """A send with client tools: the step offers them after the prompt's; the response's
    server call runs, the client's waits; the run ends ``awaiting_client_tool`` (idle);
    the answer is stored as the call's result and the run goes on with it."""
    requests: list[ProviderRequest] = []
    chat = await make_chat(script(requests))
    runtime = chat.runtime
    state = await chat.thread()
    tid = state.thread_id
    await runtime.send_message(tid, "book it", client_tools=[PICK])
    await runtime.wait_idle(tid)
    assert [t.name for t in requests[0].tools] == ["echo", "pick_date"]
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "awaiting_client_tool")
    assert [c.id for c in await runtime.client_calls(tid)] == ["c-pick"]
    page = await state.get_messages(limit=20)
    assert [m.tool_call_id for m in page.messages if m.role == "tool"] == ["c-echo"]

    ignored = ClientAnswer("c-echo", "not the client's")
    stored, started = await runtime.answer_client_calls(
        tid, [ignored, ClientAnswer("c-pick", "May 4")], [PICK]
    )
    assert (stored, started) == (1, True)
    await runtime.wait_idle(tid)
    last = requests[-1].messages[-1]
    assert isinstance(last, ToolMessage) and (last.tool_call_id, last.text) == ("c-pick", "May 4")
    assert [t.name for t in requests[-1].tools] == ["echo", "pick_date"]
    status = await state.status()
    assert status.reason == "stop_on_response"
    assert await runtime.client_calls(tid) == []
    assert await runtime.answer_client_calls(tid, [ClientAnswer("c-pick", "again")]) == (0, False)


async def test_c04_122_without_client_tools_nothing_is_offered_or_checked(
    make_chat: Any,
) -> None:
    """A send without client tools offers the prompt's tools only; a name of the agent's
    own tools, a name given twice or a bad name is refused naming ``tools[i].name``."""
    requests: list[ProviderRequest] = []
    chat = await make_chat(script(requests))
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "hello")
    await chat.runtime.wait_idle(state.thread_id)
    assert [t.name for t in requests[0].tools] == ["echo"]
    # pick_date is not offered: its call is refused as any unknown tool, and the run goes on
    page = await state.get_messages(limit=20)
    results = {m.tool_call_id: m.tool_status for m in page.messages if m.role == "tool"}
    assert results == {"c-echo": "success", "c-pick": "error"}
    for tools, field in (
        ([ClientTool("echo", "", {})], "tools[0].name"),
        ([PICK, PICK], "tools[1].name"),
        ([ClientTool("a b", "", {})], "tools[0].name"),
    ):
        with pytest.raises(InvalidField) as caught:
            chat.runtime.check_client_tools("chat", tools)
        assert caught.value.field == field
