"""Control fixtures (spec 14): a chat agent whose prompt offers tools that need approval,
on a scripted model, with side effects counted in a file the test reads."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, tool
from threadloom.define.hook import hook_definition_of
from threadloom.providers.scripted import ScriptedProvider

EFFECTS: dict[str, Path] = {}
"""Where the effect tools append one line per run: set per test (``effects`` fixture)."""


def _append(kind: str, line: str) -> None:
    path = EFFECTS.get("file")
    if path is not None:
        with path.open("a", encoding="utf-8") as out:
            out.write(f"{kind} {line}\n")


@tool(requires_approval=True)
def pay(amount: int, to: str) -> str:
    """Pay an amount to someone (a side effect a person approves)."""
    _append("pay", f"{amount} {to}")
    return f"paid {amount} to {to}"


@tool(requires_approval=lambda arguments, state: arguments.get("amount", 0) > 100)
def transfer(amount: int) -> str:
    """Transfer an amount; more than 100 needs approval."""
    _append("transfer", str(amount))
    return f"transferred {amount}"


@tool
def lookup(q: str) -> str:
    """Look something up (no approval)."""
    _append("lookup", q)
    return f"found {q}"


@dataclass
class Bench:
    runtime: Runtime
    provider: ScriptedProvider
    effects: Path

    async def thread(self, **options: Any) -> Any:
        return await self.runtime.create_thread("chat", **options)

    def effect_lines(self) -> list[str]:
        if not self.effects.exists():
            return []
        return self.effects.read_text(encoding="utf-8").splitlines()


@pytest.fixture
async def make_bench(db_url: str, tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    opened: list[Runtime] = []
    effects = tmp_path / "effects.txt"
    EFFECTS["file"] = effects

    async def make(
        script: Sequence[Any] | Any = None, *, hooks: Sequence[Any] = (), **prompt: Any
    ) -> Bench:
        """``hooks``: hook definitions the agent lists (by id)."""
        provider = ScriptedProvider(script)
        defs = Definitions().add(
            Model(name="M", provider=provider, model="scripted-1"),
            Prompt(
                **{
                    "name": "P",
                    "model": "M",
                    "system": "You are P.",
                    "tools": ["pay", "transfer", "lookup"],
                    **prompt,
                }
            ),
            Agent(
                name="chat",
                side_a=Side(prompt="P", label="Agent"),
                side_b=Side(label="Customer"),
                hooks=tuple(hook_definition_of(h).id for h in hooks),  # type: ignore[union-attr]
            ),
            *hooks,
            pay,
            transfer,
            lookup,
        )
        runtime = await Runtime.open(db_url, definitions=defs)
        opened.append(runtime)
        return Bench(runtime, provider, effects)

    yield make
    for runtime in opened:
        await runtime.close(drain=0)
    EFFECTS.pop("file", None)
