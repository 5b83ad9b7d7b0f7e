"""The models of the multinode tests' project: ``echo`` answers at once, ``gate`` waits
for its gate — a file named by the user's message in ``THREADLOOM_TEST_GATE_DIR`` — so a
run stays ``running`` as long as the test needs (spec 12 §12.9 rule 3)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from threadloom.define import Model
from threadloom.providers.script import Reply
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
    then answer with the gate's name; a message that is no gate name is echoed."""
    name = _last_user(request)
    folder = os.environ.get("THREADLOOM_TEST_GATE_DIR")
    if folder and name.startswith("gate-"):
        gate = Path(folder) / name
        for _ in range(2400):
            if gate.exists():
                break
            await asyncio.sleep(0.05)
        return Reply.text(f"passed {name}", chunk_size=4, chunk_delay=0.01)
    return Reply.text(f"echo: {name}")


echo_model = Model(name="echo_model", provider=ScriptedProvider(_echo), model="echo-1")
gate_model = Model(name="gate_model", provider=ScriptedProvider(_gate), model="gate-1")
