"""An agent whose scripted model calls a tool once a turn, then answers: a turn of it is
the benchmark's chat turn (a user message, a tool call, its result, the answer), for tests
that need real model turns on a real store."""

from __future__ import annotations

from threadloom import Agent, Definitions, Side
from threadloom.define import Model, Prompt, tool
from threadloom.providers.scripted import Call, Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage


@tool
def echo(v: int) -> str:
    """Echo the value back."""
    return f"echo {v}"


def chat_definitions() -> Definitions:
    """The agent ``chat``: its model calls ``echo`` once a turn, then answers ``done: …``."""

    def answer(request: ProviderRequest) -> Reply:
        last = request.messages[-1] if request.messages else None
        if isinstance(last, ToolMessage):
            return Reply.text(f"done: {last.content}")
        return Reply.tool_calls(Call("echo", {"v": len(request.messages)}))

    return Definitions().add(
        Model(name="M", provider=ScriptedProvider(answer, record=False), model="m"),
        Prompt(name="P", model="M", system="You answer.", tools=["echo"]),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="User")),
        echo,
    )
