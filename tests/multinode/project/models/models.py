"""The models of the multinode tests' project: ``echo`` answers at once, ``gate`` waits
for its gate — a file named by the user's message in ``THREADLOOM_TEST_GATE_DIR`` — so a
run stays ``running`` as long as the test needs (spec 12 §12.9 rule 3)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from threadloom.define import Model
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.providers.types import ProviderRequest


def _last_user(request: ProviderRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.text
    return ""


def _echo(request: ProviderRequest) -> Reply:
    return Reply.text(f"echo: {_last_user(request)}")


async def _gate(request: ProviderRequest) -> Reply:
    """Wait until the gate file named by the last user message exists (at most 120 s),
    then answer with the gate's name; a message that is no gate name is echoed. A wait that
    is cancelled (the run aborted) leaves a file ``<gate>.cancelled`` behind."""
    name = _last_user(request)
    folder = os.environ.get("THREADLOOM_TEST_GATE_DIR")
    if folder and name.startswith("gate-"):
        gate = Path(folder) / name
        try:
            for _ in range(2400):
                if gate.exists():
                    break
                await asyncio.sleep(0.05)
        except asyncio.CancelledError:  # the run was aborted: the test sees when
            (Path(folder) / f"{name}.cancelled").touch()
            raise
        if name.endswith("-slow"):  # a generation long enough to join midway
            return Reply.text(f"passed {name}", chunk_size=2, chunk_delay=0.2)
        return Reply.text(f"passed {name}", chunk_size=4, chunk_delay=0.01)
    return Reply.text(f"echo: {name}")


async def _worker(request: ProviderRequest) -> Reply:
    """The gate's wait, then ``report`` with ``passed <gate>`` (``echo: <text>`` for a
    message that is no gate name)."""
    waited = await _gate(request)
    return Reply.tool_calls(Call("report", {"summary": waited.content or ""}))


def _boss(request: ProviderRequest) -> Reply:
    """``create <text>``: a blocking ``helper`` with that message; ``ask <reference>
    <text>``: a blocking message to it; a call's result is answered ``got: <result>`` — also
    when messages queued meanwhile (a later result of the child) follow it."""
    for message in reversed(request.messages):
        if message.role == "tool":
            return Reply.text(f"got: {message.text}")
        if message.role == "assistant":
            break
    words = _last_user(request).split(" ", 2)
    if words[0] == "create" and len(words) > 1:
        message = " ".join(words[1:])
        create = {"agent": "helper", "name": "w", "message": message, "attachments": []}
        return Reply.tool_calls(Call("subagent_create", create))
    if words[0] == "ask" and len(words) == 3:
        ask = {"referenceId": words[1], "message": words[2], "attachments": []}
        return Reply.tool_calls(Call("subagent_message", ask))
    return Reply.text(f"echo: {_last_user(request)}")


async def _slow(request: ProviderRequest) -> Reply:
    """A turn of two model calls, each 0.2 s: ``report`` the user's text, then answer
    ``done: <text>`` from the tool's result — a turn long enough to span a fault."""
    last = request.messages[-1] if request.messages else None
    if last is not None and last.role == "tool":
        return Reply.text(f"done: {_last_user(request)}", delay=0.2)
    return Reply.tool_calls(Call("report", {"summary": _last_user(request)}), delay=0.2)


def _pay(request: ProviderRequest) -> Reply:
    """``pay`` once; once its result (or rejection) is there, ``done``."""
    if any(message.role == "tool" for message in request.messages):
        return Reply.text("done")
    return Reply.tool_calls(Call("pay", {"amount": 5, "to": "bo"}))


echo_model = Model(name="echo_model", provider=ScriptedProvider(_echo), model="echo-1")
gate_model = Model(name="gate_model", provider=ScriptedProvider(_gate), model="gate-1")
boss_model = Model(name="boss_model", provider=ScriptedProvider(_boss), model="boss-1")
slow_model = Model(name="slow_model", provider=ScriptedProvider(_slow), model="slow-1")
worker_model = Model(name="worker_model", provider=ScriptedProvider(_worker), model="worker-1")
pay_model = Model(name="pay_model", provider=ScriptedProvider(_pay), model="pay-1")
