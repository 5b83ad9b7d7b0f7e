"""Which hooks run for a name (spec 03 §3.3), remembered per runtime.

A step asks ``ThreadHub.resolve_hooks`` a dozen times (after_system_message,
filter_messages, tool_call_started, …) with the same agent, prompt and prompt hooks, and
the answer only changes when the registry does. The memo keeps the answers for one
registry state — the definitions object, its ``generation`` and its hooks' ``version`` —
and starts over when any of them moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from threadloom.define.hook import HookContext, HookDefinition

Resolved = list[tuple[HookDefinition, HookContext]]


class HookMemo:
    """``hub.resolve_hooks`` answers for the hub's current registry state."""

    __slots__ = ("_answers", "_state")

    def __init__(self) -> None:
        self._state: tuple[Any, int, int] | None = None
        self._answers: dict[tuple[str, str, str | None, tuple[str, ...]], Resolved] = {}

    def resolve(
        self,
        hub: Any,
        name: str,
        agent_id: str,
        prompt_name: str | None,
        prompt_hooks: Sequence[str],
    ) -> Resolved:
        definitions = hub.definitions
        state = (definitions, definitions.generation, definitions.hooks.version)
        known = self._state
        if known is None or known[0] is not state[0] or known[1:] != state[1:]:
            self._answers.clear()
            self._state = state
        key = (name, agent_id, prompt_name, tuple(prompt_hooks))
        found = self._answers.get(key)
        if found is None:
            found = self._answers[key] = hub.resolve_hooks(
                name, agent_id, prompt_name, prompt_hooks
            )
        return list(found)  # the caller's own list


__all__ = ["HookMemo"]
