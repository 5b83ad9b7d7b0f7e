"""The crash suite's models (``tests/attack/test_crashes.py``). Each holds where the test
wants the process killed: a message ``hold-model <gate>`` makes the model wait for its gate,
``hold-tool <gate>`` calls the ``hold`` tool, which waits, ``create <gate>`` starts a
blocking ``helper`` subagent whose model waits. A gate is a file in
``THREADLOOM_TEST_GATE_DIR``; whoever waits first writes ``<gate>.entered``, so the test
kills at that point and not after a sleep. Any other message is echoed at once."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from threadloom.define import Model
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.providers.types import ProviderRequest


async def wait_gate(name: str) -> None:
    """Write ``<name>.entered``, then wait (at most 120 s) until the file ``<name>`` exists."""
    folder = Path(os.environ["THREADLOOM_TEST_GATE_DIR"])
    (folder / f"{name}.entered").touch()
    for _ in range(6000):
        if (folder / name).exists():
            return
        await asyncio.sleep(0.02)


def last_user(request: ProviderRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.text
    return ""


async def _chat(request: ProviderRequest) -> Reply:
    last = request.messages[-1]
    if last.role == "tool":
        return Reply.text(f"after the tool: {last.text}")
    text = last_user(request)
    word, _, gate = text.partition(" ")
    if word == "hold-model":
        await wait_gate(gate)
        return Reply.text(f"passed {gate}", chunk_size=4, chunk_delay=0.01)
    if word == "hold-tool":
        return Reply.tool_calls(Call("hold", {"gate": gate}))
    if word == "create":
        create = {"agent": "helper", "name": "w", "message": f"work {gate}", "attachments": []}
        return Reply.tool_calls(Call("subagent_create", create))
    return Reply.text(f"echo: {text}")


async def _worker(request: ProviderRequest) -> Reply:
    """Side a of the ``worker``: wait for the gate named by its task, then ``report``."""
    word, _, gate = last_user(request).partition(" ")
    if word == "work":
        await wait_gate(gate)
    return Reply.tool_calls(Call("report", {"summary": f"worked {gate}"}))


def _echo(request: ProviderRequest) -> Reply:
    return Reply.text(f"echo: {last_user(request)}")


chat_model = Model(name="chat_model", provider=ScriptedProvider(_chat, record=False), model="c-1")
worker_model = Model(
    name="worker_model", provider=ScriptedProvider(_worker, record=False), model="w-1"
)
echo_model = Model(name="echo_model", provider=ScriptedProvider(_echo, record=False), model="e-1")
