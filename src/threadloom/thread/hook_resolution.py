"""Which hooks run now (spec 03 §3.3), remembered for one registry state.

A step asks which hooks run for a name a dozen times with the same arguments, and the
answer changes only with the registry (the definitions object, its ``generation``, its
hooks' ``version``): :class:`HookResolution` keeps the answers, and the agents for which
no hook runs at all, until that state moves. ``ThreadHub`` is one (a base class: a hot
question asked of the hub costs no call in between).
"""

from __future__ import annotations

from collections.abc import Sequence

from threadloom.define.hook import HookContext, HookDefinition, HookRegistry
from threadloom.define.registry import Definitions


class HookResolution:
    """The hooks that run for a name, agent and prompt, answered from ``definitions``."""

    definitions: Definitions

    def __init__(self) -> None:
        self._child_hook_cache: dict[
            str, tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]
        ] = {}
        self._hook_answers: dict[
            tuple[str, str, str | None, tuple[str, ...]],
            tuple[tuple[HookDefinition, HookContext], ...],
        ] = {}
        self._hookless: dict[str, bool] = {}
        """Agent id → no hook runs for it without prompt hooks: it names none and its
        subagents require none (``_resolve_hooks``' early answer, for every hook name)."""
        self._hook_definitions: Definitions | None = None
        self._hook_generation = -1
        self._hook_version = -1

    def resolve_hooks(
        self, name: str, agent_id: str, prompt_name: str | None, prompt_hooks: Sequence[str]
    ) -> Sequence[tuple[HookDefinition, HookContext]]:
        """The hooks named ``name`` that run now (spec 03 §3.3): the active prompt's list or
        the agent's, between the parent hooks its subagents require. A step asks this a
        dozen times with the same arguments, and the answer changes only with the
        registry: answers are remembered for one registry state (the definitions object,
        its ``generation`` and its hooks' ``version``) and forgotten when it moves."""
        if self.hookless(agent_id, prompt_hooks):  # most steps: no hook at all, whatever the name
            return ()  # not a new empty list: a step holds some across its awaits (issue 40)
        key = (name, agent_id, prompt_name, tuple(prompt_hooks))
        found = self._hook_answers.get(key)
        if found is None:
            found = self._hook_answers[key] = tuple(
                self._resolve_hooks(name, agent_id, prompt_name, prompt_hooks)
            )
        return found  # a tuple: shared, never changed

    def hookless(self, agent_id: str, prompt_hooks: Sequence[str]) -> bool:
        """True when :meth:`resolve_hooks` answers ``[]`` for every name now (no prompt
        hooks, ``_is_hookless``): one question for a caller about to ask several names.
        It forgets the remembered answers when the registry state moved."""
        definitions = self.definitions
        if (
            definitions is not self._hook_definitions
            or definitions.generation != self._hook_generation
            or definitions.hooks.version != self._hook_version
        ):
            self._hook_answers.clear()
            self._child_hook_cache.clear()
            self._hookless.clear()
            self._hook_definitions = definitions
            self._hook_generation = definitions.generation
            self._hook_version = definitions.hooks.version
        if prompt_hooks:
            return False
        hookless = self._hookless.get(agent_id)
        if hookless is None:
            hookless = self._hookless[agent_id] = self._is_hookless(agent_id)
        return hookless

    def _is_hookless(self, agent_id: str) -> bool:
        """``_resolve_hooks`` answers ``[]`` for every name without prompt hooks: the
        agent names no hooks and its subagents require none (a required hook that is not
        registered is the registry's ``UnknownHookError``, so it is not hookless)."""
        agent = self.definitions.agent(agent_id)
        before, after = self._child_hooks(agent_id)
        return not (agent and agent.hooks) and not before and not after

    def _resolve_hooks(
        self, name: str, agent_id: str, prompt_name: str | None, prompt_hooks: Sequence[str]
    ) -> list[tuple[HookDefinition, HookContext]]:
        agent = self.definitions.agent(agent_id)
        agent_hooks = list(agent.hooks) if agent else []
        before, after = self._child_hooks(agent_id)
        if not agent_hooks and not prompt_hooks and not before and not after:
            return []
        return self.hooks_registry.resolve(
            name,
            prompt_hooks=list(prompt_hooks) or None,
            prompt_name=prompt_name,
            agent_hooks=agent_hooks,
            agent_name=agent_id,
            child_hooks_before=before,
            child_hooks_after=after,
        )

    def _child_hooks(
        self, agent_id: str
    ) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
        """Parent hooks required by the agent's subagents (spec 03 §3.3 rule 3): side a's
        relationships, then side b's, each in declaration order; remembered per agent."""
        cached = self._child_hook_cache.get(agent_id)
        if cached is not None:
            return cached
        before: list[tuple[str, str, str]] = []
        after: list[tuple[str, str, str]] = []
        agent = self.definitions.agent(agent_id)
        for side in (agent.side_a, agent.side_b) if agent else ():
            prompt = self.definitions.prompt(side.prompt) if side and side.prompt else None
            if prompt is None:
                continue
            for entry in self.definitions.resolve_tools(prompt):
                if entry.kind != "subagent":
                    continue
                child = entry.target
                for required in getattr(child, "parent_hooks", ()):
                    ref = (required.hook, entry.name, child.name)
                    (before if required.stage == "before_parent" else after).append(ref)
        self._child_hook_cache[agent_id] = (before, after)
        return before, after

    @property
    def hooks_registry(self) -> HookRegistry:
        return self.definitions.hooks
