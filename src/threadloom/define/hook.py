"""Hook definitions: the ``@hook`` decorator, ``DROP`` and hook resolution (spec 03 §3.1–§3.3).

This module only describes hooks and decides which ones run; calling them is the job of
:mod:`threadloom.thread.hooks`. It must not import the thread, store or engine packages.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, NamedTuple, TypeVar

from threadloom.errors import HookIdConflict, UnknownHookError

HookKind = Literal["event", "transform"]

#: The fifteen thread hook names (§3.1) and whether each is an event or a transform.
HOOK_KINDS: Final[Mapping[str, HookKind]] = MappingProxyType(
    {
        "after_thread_created": "event",
        "after_subagent_created": "event",
        "after_system_message": "transform",
        "filter_messages": "transform",
        "prefilter_llm_history": "transform",
        "before_create_message": "transform",
        "after_create_message": "event",
        "before_update_message": "transform",
        "after_update_message": "event",
        "before_store_tool_result": "transform",
        "after_tool_call_success": "transform",
        "after_tool_call_failure": "transform",
        "tool_call_started": "event",
        "tool_call_done": "event",
        "before_decide_approval": "transform",
    }
)
HOOK_NAMES: Final[frozenset[str]] = frozenset(HOOK_KINDS)
EVENT_HOOK_NAMES: Final[frozenset[str]] = frozenset(
    n for n, k in HOOK_KINDS.items() if k == "event"
)
TRANSFORM_HOOK_NAMES: Final[frozenset[str]] = HOOK_NAMES - EVENT_HOOK_NAMES
#: The only hooks that may return ``DROP`` (§3.6.11).
DROP_HOOK_NAMES: Final[frozenset[str]] = frozenset(
    ("after_tool_call_success", "after_tool_call_failure")
)

HOOK_ID_PATTERN: Final = re.compile(r"^[a-z][a-z0-9_]*$")


class _Drop(enum.Enum):
    """Type of :data:`DROP`; an enum so the sentinel survives copy and pickle as itself."""

    DROP = "DROP"

    def __repr__(self) -> str:
        return "threadloom.DROP"


class _Default(enum.Enum):
    """Type of :data:`RUNTIME_DEFAULT`: "use the runtime's ``hook_timeout_s``"."""

    RUNTIME_DEFAULT = "RUNTIME_DEFAULT"

    def __repr__(self) -> str:
        return "threadloom.define.hook.RUNTIME_DEFAULT"


#: Returned by ``after_tool_call_*`` hooks to drop the tool call (§3.6.11, decision C1).
DROP: Final = _Drop.DROP
DropType = Literal[_Drop.DROP]
#: ``timeout_s`` value meaning "use the runtime option ``hook_timeout_s``" (§3.5.4).
RUNTIME_DEFAULT: Final = _Default.RUNTIME_DEFAULT
TimeoutSetting = float | None | Literal[_Default.RUNTIME_DEFAULT]

F = TypeVar("F", bound=Callable[..., Any])


def _check_name(name: object) -> str:
    if not isinstance(name, str) or name not in HOOK_NAMES:
        raise ValueError(
            f"unknown hook name {name!r}; expected one of: {', '.join(sorted(HOOK_NAMES))}"
        )
    return name


def _check_id(hook_id: object) -> str:
    if not isinstance(hook_id, str) or not HOOK_ID_PATTERN.fullmatch(hook_id):
        raise ValueError(f"invalid hook id {hook_id!r}: it must match {HOOK_ID_PATTERN.pattern}")
    return hook_id


def _check_timeout(timeout_s: object) -> None:
    if timeout_s is None or timeout_s is RUNTIME_DEFAULT:
        return
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float):
        raise ValueError(f"hook timeout_s must be a number or None, not {timeout_s!r}")
    if math.isnan(timeout_s) or timeout_s <= 0:
        raise ValueError(f"hook timeout_s must be > 0, not {timeout_s!r}")


@dataclass(frozen=True)
class HookDefinition:
    """One hook: its name (§3.1), its id, the user function and its timeout (§3.2)."""

    name: str
    id: str
    fn: Callable[..., Any]
    timeout_s: TimeoutSetting = RUNTIME_DEFAULT

    def __post_init__(self) -> None:
        _check_name(self.name)
        _check_id(self.id)
        if not callable(self.fn):
            raise TypeError(f"hook {self.id!r}: fn must be callable")
        _check_timeout(self.timeout_s)

    @property
    def kind(self) -> HookKind:
        """``"event"`` or ``"transform"``: decides how several hooks of the name combine."""
        return HOOK_KINDS[self.name]


@dataclass(frozen=True)
class HookContext:
    """What a hook declaring ``hook_context`` receives: which hook and where it came from."""

    hook_name: str
    hook_id: str
    source: Mapping[str, str] = field(hash=False)

    @classmethod
    def for_agent(cls, hook_name: str, hook_id: str, agent_name: str) -> HookContext:
        """Context of a hook taken from an agent's ``hooks`` list."""
        source = {"kind": "agent", "agent_name": agent_name}
        return cls(hook_name, hook_id, MappingProxyType(source))

    @classmethod
    def for_prompt(cls, hook_name: str, hook_id: str, prompt_name: str) -> HookContext:
        """Context of a hook taken from the active prompt's ``hooks`` list."""
        source = {"kind": "prompt", "prompt_name": prompt_name}
        return cls(hook_name, hook_id, MappingProxyType(source))

    @classmethod
    def for_child(
        cls, hook_name: str, hook_id: str, relationship_name: str, agent_name: str
    ) -> HookContext:
        """Context of a hook required by a child agent (``parent_hooks``, §3.3 rule 3)."""
        source = {"kind": "child", "relationship_name": relationship_name, "agent_name": agent_name}
        return cls(hook_name, hook_id, MappingProxyType(source))


class ChildHookRef(NamedTuple):
    """A child-required hook as the engine passes it to :meth:`HookRegistry.resolve`."""

    hook_id: str
    relationship_name: str
    agent_name: str


def hook(
    name: str, *, id: str | None = None, timeout_s: TimeoutSetting = RUNTIME_DEFAULT
) -> Callable[[F], F]:
    """Mark a function as the hook ``name`` (§3.2); the function itself is returned."""
    _check_name(name)
    if id is not None:
        _check_id(id)
    _check_timeout(timeout_s)

    def decorate(fn: F) -> F:
        hook_id = id if id is not None else getattr(fn, "__name__", None)
        definition = HookDefinition(name=name, id=_check_id(hook_id), fn=fn, timeout_s=timeout_s)
        fn.__threadloom_hook__ = definition  # type: ignore[attr-defined]
        return fn

    return decorate


def hook_definition_of(obj: object) -> HookDefinition | None:
    """The definition ``@hook`` attached to ``obj``, or ``None`` (used by discovery)."""
    definition = getattr(obj, "__threadloom_hook__", None)
    return definition if isinstance(definition, HookDefinition) else None


class HookRegistry:
    """Registered hooks by id, and the resolution of which ones run for a name (§3.2, §3.3)."""

    def __init__(self) -> None:
        self._by_id: dict[str, HookDefinition] = {}
        self.version = 0
        """Counts the hooks registered, so a cache of resolutions knows it is stale."""

    def register(self, fn_or_definition: Callable[..., Any] | HookDefinition) -> HookDefinition:
        """Register a ``@hook`` function or a definition; the same one twice is a no-op."""
        if isinstance(fn_or_definition, HookDefinition):
            definition = fn_or_definition
        else:
            found = hook_definition_of(fn_or_definition)
            if found is None:
                raise TypeError(f"{fn_or_definition!r} is not decorated with @hook")
            definition = found
        existing = self._by_id.get(definition.id)
        if existing is None:
            self._by_id[definition.id] = definition
            self.version += 1
            return definition
        if existing == definition:
            return existing
        raise HookIdConflict(
            f'hook id "{definition.id}" is already registered for {_describe(existing.fn)}; '
            f"cannot register {_describe(definition.fn)} under the same id"
        )

    def get(self, hook_id: str) -> HookDefinition | None:
        """The definition registered under ``hook_id``, if any."""
        return self._by_id.get(hook_id)

    def ids_for(self, name: str) -> tuple[str, ...]:
        """Ids registered under the hook name ``name``, in registration order."""
        return tuple(d.id for d in self._by_id.values() if d.name == name)

    def __contains__(self, hook_id: object) -> bool:
        return hook_id in self._by_id

    def __iter__(self) -> Iterator[HookDefinition]:
        return iter(list(self._by_id.values()))

    def __len__(self) -> int:
        return len(self._by_id)

    def unknown_ids(self, ids: Sequence[str]) -> list[str]:
        """The ids of ``ids`` that are not registered, first occurrence order."""
        return list(dict.fromkeys(i for i in ids if i not in self._by_id))

    def check_ids(self, ids: Sequence[str], where: str) -> None:
        """Raise ``UnknownHookError`` naming ``where`` (``Prompt "p"``) and each unknown id."""
        unknown = self.unknown_ids(ids)
        if unknown:
            raise UnknownHookError(
                "\n".join(f'{where}: hook "{hook_id}" is not defined' for hook_id in unknown)
            )

    def resolve(
        self,
        name: str,
        *,
        prompt_hooks: Sequence[str] | None,
        prompt_name: str | None,
        agent_hooks: Sequence[str],
        agent_name: str,
        child_hooks_before: Sequence[tuple[str, str, str]] = (),
        child_hooks_after: Sequence[tuple[str, str, str]] = (),
    ) -> list[tuple[HookDefinition, HookContext]]:
        """The hooks to run for ``name`` now, in order, each with its context (§3.3).

        The active prompt's list replaces the agent's when non-empty; child-required hooks
        (``(hook id, relationship name, agent name)``) go before and after that base list.
        Only ids registered under ``name`` are kept; a repeated id runs at its first place.
        A child-required id that is not registered at all raises ``UnknownHookError``
        (fail-closed, §3.3 rule 3).
        """
        _check_name(name)
        candidates: list[tuple[str, HookContext]] = []
        for ref in child_hooks_before:
            candidates.append(self._child_candidate(name, ChildHookRef(*ref)))
        if prompt_hooks:
            if prompt_name is None:
                raise ValueError("resolve: prompt_hooks given without prompt_name")
            candidates.extend(
                (i, HookContext.for_prompt(name, i, prompt_name)) for i in prompt_hooks
            )
        else:
            candidates.extend((i, HookContext.for_agent(name, i, agent_name)) for i in agent_hooks)
        for ref in child_hooks_after:
            candidates.append(self._child_candidate(name, ChildHookRef(*ref)))

        resolved: list[tuple[HookDefinition, HookContext]] = []
        seen: set[str] = set()
        for hook_id, context in candidates:
            definition = self._by_id.get(hook_id)
            if definition is None or definition.name != name or hook_id in seen:
                continue
            seen.add(hook_id)
            resolved.append((definition, context))
        return resolved

    def _child_candidate(self, name: str, ref: ChildHookRef) -> tuple[str, HookContext]:
        if ref.hook_id not in self._by_id:
            raise UnknownHookError(
                f'Agent "{ref.agent_name}": required parent hook "{ref.hook_id}" '
                f'(relationship "{ref.relationship_name}") is not defined'
            )
        context = HookContext.for_child(name, ref.hook_id, ref.relationship_name, ref.agent_name)
        return ref.hook_id, context


def _describe(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or repr(fn)
    return f"{module}.{qualname}"
