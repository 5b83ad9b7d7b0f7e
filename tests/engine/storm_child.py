"""Child process of ``test_crash_storm.py``: many threads running turns at once until it is
killed.

Usage: ``python storm_child.py <db path> <ack file> <threads> <seed>``.

It opens a Runtime on the file (defaults: WAL, ``synchronous=FULL``) with the agent ``chat``
whose scripted model answers a user message with one ``echo`` tool call and the tool result
with text, after small random delays. It creates the threads, then each thread sends one
message after another — some while its run is still going, so they queue — and appends a
line ``<thread id>\\t<message id>\\t<content>`` to the ack file as soon as
``send_message`` returned (the message was acknowledged). It prints ``READY`` once every
thread exists and runs until the test kills it (bounded at 60 s); on SIGTERM it closes the
Runtime gracefully (``close(drain=0.05)``: running steps get 50 ms, the rest settle
``aborted``), prints ``CLOSED`` and exits.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, tool
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage


@tool
def echo(v: int) -> str:
    """Echo the value back."""
    return f"echo {v}"


def definitions(rng: random.Random) -> Definitions:
    def answer(request: ProviderRequest) -> Reply:
        delay = rng.choice((0.0, 0.0, 0.002, 0.01, 0.03))
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return Reply.text(f"done with {last.text}", delay=delay, chunk_size=4)
        return Reply.tool_calls(Call("echo", {"v": rng.randrange(1000)}), delay=delay)

    return Definitions().add(
        Model(name="M", provider=ScriptedProvider(answer, record=False), model="storm"),
        Prompt(name="P", model="M", system="You echo.", tools=["echo"]),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="User")),
        echo,
    )


async def sender(runtime: Runtime, thread_id: str, ack: int, rng: random.Random) -> None:
    for i in range(10_000):
        content = f"{thread_id[:8]} message {i}"
        stored = await runtime.send_message(thread_id, content)
        os.write(ack, f"{thread_id}\t{stored.id}\t{content}\n".encode())
        if rng.random() < 0.5:  # else the next one queues behind the running turn
            await runtime.wait_idle(thread_id, timeout=30)
        else:
            await asyncio.sleep(rng.random() * 0.01)


async def main() -> None:
    path, ack_path, threads, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    runtime = await Runtime.open(path, definitions=definitions(rng))
    states = [await runtime.create_thread(agent_id="chat") for _ in range(threads)]
    ack = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    senders = [
        asyncio.ensure_future(sender(runtime, s.thread_id, ack, random.Random(seed * 1000 + n)))
        for n, s in enumerate(states)
    ]
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    print("READY", flush=True)
    done = asyncio.ensure_future(asyncio.wait_for(asyncio.gather(*senders), timeout=60))
    await asyncio.wait(
        [done, asyncio.ensure_future(stopping.wait())], return_when="FIRST_COMPLETED"
    )
    # SIGTERM: a graceful close — running steps get a moment, the rest settle aborted
    for task in senders:
        task.cancel()
    await runtime.close(drain=0.05)
    print("CLOSED", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
