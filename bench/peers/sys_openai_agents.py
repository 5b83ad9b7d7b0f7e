"""OpenAI Agents SDK: an ``Agent`` with one ``function_tool`` run by ``Runner.run`` with a
``SQLiteSession`` on a file (one session per thread), tracing off, on a custom offline
``Model`` that answers a user message with one ``echo`` tool call and the tool result
with ``done`` (zero latency, or ``asyncio.sleep(latency)`` in the concurrent scenario)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from _common import (
    FINAL_TEXT,
    SYSTEM_PROMPT,
    TOOL_ARGS,
    USAGE,
    System,
    question,
    tool_result,
)
from agents import (
    Agent,
    Model,
    ModelResponse,
    Runner,
    SQLiteSession,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

_ARGS = json.dumps(TOOL_ARGS, separators=(",", ":"))


@function_tool
def echo(v: int) -> str:
    """Echo the value back."""
    return tool_result(v)


def call_item(call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id="fc_" + call_id, call_id=call_id, name="echo", arguments=_ARGS, type="function_call"
    )


def text_item(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_" + uuid.uuid4().hex[:12],
        role="assistant",
        status="completed",
        type="message",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class FakeModel(Model):
    """Offline model: a tool call for a user message, ``done`` after the tool result."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> ModelResponse:
        if self.latency:
            await asyncio.sleep(self.latency)
        last = input[-1] if isinstance(input, list) and input else None
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            output: list[Any] = [text_item(FINAL_TEXT)]
        else:
            output = [call_item("call_" + uuid.uuid4().hex[:8])]
        usage = Usage(requests=1, total_tokens=sum(USAGE.values()), **USAGE)
        return ModelResponse(output=output, usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kw: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the benchmark does not stream")


def turn_items(i: int) -> list[Any]:
    """The four session items a turn stores, as the Runner stores them."""
    call_id = "call_" + uuid.uuid4().hex[:8]
    return [
        {"content": question(i), "role": "user"},
        call_item(call_id).model_dump(exclude_unset=True),
        {"call_id": call_id, "output": tool_result(1), "type": "function_call_output"},
        text_item(FINAL_TEXT).model_dump(exclude_unset=True),
    ]


class OpenAIAgents(System):
    name = "openai-agents"
    packages: tuple[str, ...] = ("openai-agents", "openai")
    persistence = "SQLiteSession on a file (WAL, sqlite3 default synchronous=FULL)"

    async def open(self, path: str, latency: float, concurrent: bool) -> None:
        set_tracing_disabled(True)
        self.path = path
        self.sessions: list[SQLiteSession] = []
        self.agent = Agent(
            name="Agent", instructions=SYSTEM_PROMPT, model=FakeModel(latency), tools=[echo]
        )

    async def new_thread(self) -> Any:
        session = SQLiteSession(str(uuid.uuid4()), self.path)
        self.sessions.append(session)
        return session

    async def turn(self, thread: Any, i: int) -> None:
        result = await Runner.run(self.agent, question(i), session=thread)
        assert result.final_output == FINAL_TEXT

    async def seed(self, thread: Any, messages: int) -> None:
        items: list[Any] = []
        i = 0
        while len(items) < messages:
            items.extend(turn_items(-1 - i))
            i += 1
        await thread.add_items(items[:messages])

    async def count(self, thread: Any) -> int:
        return len(await thread.get_items())

    async def close(self) -> None:
        for session in self.sessions:
            session.close()


SYSTEM = OpenAIAgents()
