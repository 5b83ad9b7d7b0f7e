"""Webhook fixtures (spec 19): local receivers, and a runtime whose delivery worker may
reach them (loopback allowed explicitly) and retries quickly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import pytest

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, tool
from threadloom.providers.scripted import ScriptedProvider
from webhook_receiver import Receiver

FAST = {
    "THREADLOOM_WEBHOOK_ALLOW_PRIVATE": "1",
    "THREADLOOM_WEBHOOK_POLL_S": "0.05",
    "THREADLOOM_WEBHOOK_BACKOFF_S": "0.05",
    "THREADLOOM_WEBHOOK_BACKOFF_MAX_S": "0.2",
    "THREADLOOM_WEBHOOK_TIMEOUT_S": "1",
    "THREADLOOM_WEBHOOK_MAX_ATTEMPTS": "3",
}


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount (a person approves)."""
    return f"paid {amount}"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture
def fast_hooks(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    return FAST


@pytest.fixture
async def make_runtime(
    db_url: str, fast_hooks: dict[str, str]
) -> AsyncIterator[Callable[..., Any]]:
    opened: list[Runtime] = []

    async def make(script: Sequence[Any] | Any = None, **agent: Any) -> Runtime:
        provider = ScriptedProvider(script)
        defs = Definitions().add(
            Model(name="M", provider=provider, model="scripted-1"),
            Prompt(name="P", model="M", system="You are P.", tools=["pay"]),
            Agent(name="chat", side_a=Side(prompt="P"), side_b=Side(label="Customer"), **agent),
            pay,
        )
        runtime = await Runtime.open(db_url, definitions=defs)
        opened.append(runtime)
        return runtime

    yield make
    for runtime in opened:
        await runtime.close(drain=0)
