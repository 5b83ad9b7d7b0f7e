"""The turn benchmark's workload: an agent whose model calls one tool, then answers."""

from __future__ import annotations

import time

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, tool
from threadloom.providers.scripted import Call, Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage
from threadloom.thread.state import ThreadState

ROWS_PER_TURN = 4
_ARGUMENTS = '{"v":1}'


def question(i: int) -> str:
    """The user message of turn ``i``."""
    return f"Turn {i}: could you look up order {1000 + i} and tell me when it ships?"


@tool
def echo(v: int) -> str:
    """Echo the value back."""
    return f"echo {v}"


FIXED_USAGE = {"input_tokens": 10, "output_tokens": 5}


def make_definitions(delay: float = 0.0, fixed_usage: bool = False) -> Definitions:
    """The chat agent: side a runs prompt P on the scripted model M, side b is human.

    ``fixed_usage``: each reply reports :data:`FIXED_USAGE`, as a provider's API does,
    instead of the scripted model's own estimate, which walks the whole request (spec 05
    §5.7.4) — test-double work that grows with the history and no real provider does."""
    usage = dict(FIXED_USAGE) if fixed_usage else None

    def answer(request: ProviderRequest) -> Reply:
        # answers once it sees the tool's result; without it (a lost result), it calls the
        # tool again, as a real model does: a soak counts those as requests per turn
        last = request.messages[-1] if request.messages else None
        if isinstance(last, ToolMessage) and last.content == "echo 1":
            return Reply.text("done", delay=delay, usage=usage)
        return Reply.tool_calls(Call("echo", {"v": 1}), delay=delay, usage=usage)

    return Definitions().add(
        Model(name="M", provider=ScriptedProvider(answer, record=False), model="bench"),
        Prompt(name="P", model="M", system="You are a support agent.", tools=["echo"]),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="Customer")),
        echo,
    )


async def one_turn(runtime: Runtime, thread_id: str, i: int) -> None:
    """One turn: send the user message, wait until the run it starts is over."""
    await runtime.send_message(thread_id, question(i))
    await runtime.wait_idle(thread_id)


async def time_threadloom(
    runtime: Runtime, thread_id: str, start: int, count: int, out: list[int]
) -> None:
    """``count`` sequential turns, each timed on its own."""
    clock = time.perf_counter_ns
    for i in range(start, start + count):
        t0 = clock()
        await one_turn(runtime, thread_id, i)
        out.append(clock() - t0)


async def message_total(state: ThreadState) -> int:
    """Every stored message of the thread (silent ones too)."""
    page = await state.get_messages(limit=1, include_silent=True)
    return page.total
