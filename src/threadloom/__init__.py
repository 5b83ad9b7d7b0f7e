"""Threadloom: a durable thread runtime for AI agents.

Everything a project's files and an application write comes from here: the definitions
(``Model``, ``Prompt``, ``tool``, ``hook``, ``Agent``, ``Side`` …), the ``Runtime`` that runs
them, the ``ThreadState`` tools and hooks act through, and the errors (every one derives
from ``ThreadloomError``). The scripted test model is in ``threadloom.testing``; the HTTP
client in ``threadloom.client``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from threadloom.version import __version__

if TYPE_CHECKING:
    from threadloom.define import (
        DROP,
        Agent,
        Attachment,
        Budget,
        Definitions,
        HookContext,
        Immediate,
        MCPServer,
        Model,
        ParentHook,
        Prompt,
        Reasoning,
        Schedule,
        SessionBinding,
        Side,
        Subagent,
        Subprompt,
        ToolArgumentsError,
        ToolResult,
        hook,
        tool,
    )
    from threadloom.engine.run.retention import RetentionPolicy, RetentionReport
    from threadloom.engine.run.runtime import Runtime
    from threadloom.errors import (
        AgentNotFound,
        DefinitionError,
        FileError,
        HookBlocked,
        InvalidArgument,
        MemoryConflict,
        MessageNotFound,
        ProviderError,
        StoreError,
        StoreLocked,
        ThreadBusy,
        ThreadloomError,
        ThreadNotFound,
        ThreadTerminated,
    )
    from threadloom.gc_tuning import tune_gc
    from threadloom.records import MemoryItem, Message, StatusError, ThreadStatus
    from threadloom.thread.memory import Memory
    from threadloom.thread.retention import EventRetention
    from threadloom.thread.state import ThreadState
    from threadloom.thread.users import StaticUsers

_WHERE: dict[str, str] = {
    "Agent": "threadloom.define",
    "AgentNotFound": "threadloom.errors",
    "Attachment": "threadloom.define",
    "Budget": "threadloom.define",
    "DROP": "threadloom.define",
    "DefinitionError": "threadloom.errors",
    "Definitions": "threadloom.define",
    "EventRetention": "threadloom.thread.retention",
    "FileError": "threadloom.errors",
    "HookBlocked": "threadloom.errors",
    "HookContext": "threadloom.define",
    "Immediate": "threadloom.define",
    "InvalidArgument": "threadloom.errors",
    "MCPServer": "threadloom.define",
    "Message": "threadloom.records",
    "MessageNotFound": "threadloom.errors",
    "Model": "threadloom.define",
    "ParentHook": "threadloom.define",
    "Prompt": "threadloom.define",
    "ProviderError": "threadloom.errors",
    "Reasoning": "threadloom.define",
    "RetentionPolicy": "threadloom.engine.run.retention",
    "RetentionReport": "threadloom.engine.run.retention",
    "Memory": "threadloom.thread.memory",
    "MemoryConflict": "threadloom.errors",
    "MemoryItem": "threadloom.records",
    "Runtime": "threadloom.engine.run.runtime",
    "Schedule": "threadloom.define",
    "SessionBinding": "threadloom.define",
    "Side": "threadloom.define",
    "StaticUsers": "threadloom.thread.users",
    "StatusError": "threadloom.records",
    "StoreError": "threadloom.errors",
    "StoreLocked": "threadloom.errors",
    "Subagent": "threadloom.define",
    "Subprompt": "threadloom.define",
    "ThreadBusy": "threadloom.errors",
    "ThreadNotFound": "threadloom.errors",
    "ThreadState": "threadloom.thread.state",
    "ThreadStatus": "threadloom.records",
    "ThreadTerminated": "threadloom.errors",
    "ThreadloomError": "threadloom.errors",
    "ToolArgumentsError": "threadloom.define",
    "ToolResult": "threadloom.define",
    "hook": "threadloom.define",
    "tool": "threadloom.define",
    "tune_gc": "threadloom.gc_tuning",
}
"""Where each name of the package face lives; imported on first use (PEP 562), so importing
``threadloom.client`` or ``threadloom.retry_after``, or asking ``threadloom --version``,
does not load the runtime."""


# mypy reads the imports above: a module __getattr__ it could see would make every unknown
# name of the package Any
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        module = _WHERE.get(name)
        if module is None:
            raise AttributeError(f"module 'threadloom' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # the next lookup is a plain module attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


__all__ = [
    "DROP",
    "Agent",
    "AgentNotFound",
    "Attachment",
    "Budget",
    "DefinitionError",
    "Definitions",
    "EventRetention",
    "FileError",
    "HookBlocked",
    "HookContext",
    "Immediate",
    "InvalidArgument",
    "MCPServer",
    "Memory",
    "MemoryConflict",
    "MemoryItem",
    "Message",
    "MessageNotFound",
    "Model",
    "ParentHook",
    "Prompt",
    "ProviderError",
    "Reasoning",
    "RetentionPolicy",
    "RetentionReport",
    "Runtime",
    "Schedule",
    "SessionBinding",
    "Side",
    "StaticUsers",
    "StatusError",
    "StoreError",
    "StoreLocked",
    "Subagent",
    "Subprompt",
    "ThreadBusy",
    "ThreadNotFound",
    "ThreadState",
    "ThreadStatus",
    "ThreadTerminated",
    "ThreadloomError",
    "ToolArgumentsError",
    "ToolResult",
    "__version__",
    "hook",
    "tool",
    "tune_gc",
]
