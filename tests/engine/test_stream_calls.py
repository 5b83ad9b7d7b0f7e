"""How a stream's tool call events become the response's calls (spec 04 §4.12.1): a call
whose arguments arrive without a ``ToolCallStart`` still gets an id of its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.providers.types import (
    Finish,
    ProviderRequest,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolMessage,
    Usage,
)


class DeltaOnly:
    """Answers a user message with a call that has no start event, a tool result with text."""

    name = "delta-only"

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        usage = Usage(input_tokens=1, output_tokens=1, total_tokens=2)
        if isinstance(request.messages[-1], ToolMessage):
            yield TextDelta(text="done")
            yield Finish(finish_reason="stop", usage=usage)
            return
        yield ToolCallDelta(index=0, arguments='{"v":')
        yield ToolCallDelta(index=0, arguments="1}")
        yield ToolCallEnd(index=0)
        yield Finish(finish_reason="tool_calls", usage=usage)

    async def aclose(self) -> None:
        pass


async def test_a_call_without_a_start_event_gets_an_id_and_its_arguments(db_url: str) -> None:
    defs = Definitions().add(
        Model(name="M", provider=DeltaOnly(), model="x"),
        Prompt(name="P", model="M", system="s"),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="C")),
    )
    runtime = await Runtime.open(db_url, definitions=defs)
    try:
        state = await runtime.create_thread("chat")
        await runtime.send_message(state.thread_id, "go")
        await runtime.wait_idle(state.thread_id, timeout=10)
        messages = (await state.get_messages(order="asc", limit=None)).messages
        call_message = next(m for m in messages if m.tool_calls)
        (call,) = call_message.decoded_tool_calls()
        assert call.id.startswith("call_") and len(call.id) > len("call_")
        assert (call.function.name, call.function.arguments) == ("", '{"v":1}')
        results: list[Any] = [m for m in messages if m.role == "tool"]
        assert [(m.tool_call_id, m.tool_status) for m in results] == [(call.id, "error")]
    finally:
        await runtime.close(drain=0)
