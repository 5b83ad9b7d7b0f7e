"""What users write: agents, sides, hooks, and the registry that holds them."""

from __future__ import annotations

from threadloom.define.agent import Agent, ParentHook, Side
from threadloom.define.hook import (
    DROP,
    HOOK_NAMES,
    RUNTIME_DEFAULT,
    HookContext,
    HookDefinition,
    HookRegistry,
    hook,
)
from threadloom.define.registry import Definitions

__all__ = [
    "DROP",
    "HOOK_NAMES",
    "RUNTIME_DEFAULT",
    "Agent",
    "Definitions",
    "HookContext",
    "HookDefinition",
    "HookRegistry",
    "ParentHook",
    "Side",
    "hook",
]
