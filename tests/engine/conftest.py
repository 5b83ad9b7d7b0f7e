"""Engine fixtures: a chat agent (side a prompt-backed, side b human) on a scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, tool
from threadloom.providers.scripted import ScriptedProvider


@tool
def echo(v: Any = None) -> str:
    """Echo the value back."""
    return f"echo {v}"


@dataclass
class Chat:
    runtime: Runtime
    provider: ScriptedProvider

    async def thread(self, **options: Any) -> Any:
        return await self.runtime.create_thread("chat", **options)


@pytest.fixture
async def make_chat(db_url: str) -> AsyncIterator[Callable[..., Any]]:
    opened: list[Runtime] = []

    async def make(
        script: Sequence[Any] | Any = None,
        *,
        prompt: dict[str, Any] | None = None,
        agent: dict[str, Any] | None = None,
        side_a: dict[str, Any] | None = None,
        extra: Sequence[Any] = (),
        model: dict[str, Any] | None = None,
        options: Any = None,
    ) -> Chat:
        provider = ScriptedProvider(script)
        defs = Definitions().add(
            Model(name="M", provider=provider, model="scripted-1", **(model or {})),
            Prompt(
                **{
                    "name": "P",
                    "model": "M",
                    "system": "You are P.",
                    "tools": ["echo"],
                    **(prompt or {}),
                }
            ),
            Agent(
                name="chat",
                side_a=Side(prompt="P", label="Agent", **(side_a or {})),
                side_b=Side(label="Customer"),
                **(agent or {}),
            ),
            echo,
            *extra,
        )
        runtime = await Runtime.open(db_url, definitions=defs, options=options)
        opened.append(runtime)
        return Chat(runtime, provider)

    yield make
    for runtime in opened:
        await runtime.close(drain=0)
