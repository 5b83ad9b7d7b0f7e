"""The ``Definitions`` registry: user definitions by name (spec 04 §4.2.1).

This floor holds agents and hooks; prompts, models, tools and project discovery join it
with the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from threadloom.define.agent import Agent
from threadloom.define.hook import HookDefinition, HookRegistry, hook_definition_of
from threadloom.errors import DefinitionError


class Definitions:
    """Agents and hooks by name; the same object twice is a no-op, a different one an error."""

    def __init__(self) -> None:
        self.hooks = HookRegistry()
        self._agents: dict[str, Agent] = {}

    def add(self, *definitions: Agent | HookDefinition | Callable[..., Any]) -> Definitions:
        for item in definitions:
            if isinstance(item, Agent):
                existing = self._agents.get(item.name)
                if existing is not None and existing != item:
                    raise DefinitionError(f'Duplicate name "{item.name}": agent defined twice')
                self._agents[item.name] = item
            elif isinstance(item, HookDefinition) or hook_definition_of(item) is not None:
                self.hooks.register(item)
            else:
                raise DefinitionError(f"not a definition: {item!r}")
        return self

    def agent(self, name: str) -> Agent | None:
        return self._agents.get(name)

    def agents(self) -> Iterator[Agent]:
        return iter(list(self._agents.values()))

    @property
    def has_agents(self) -> bool:
        return bool(self._agents)

    def validate(self) -> None:
        """Every hook id an agent lists must be registered (spec 03 §3.2 rule 8)."""
        for agent in self._agents.values():
            self.hooks.check_ids(list(agent.hooks), f'Agent "{agent.name}"')
