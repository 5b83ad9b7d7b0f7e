"""Threadloom: a durable thread runtime for AI agents.

Everything a project's files and an application write comes from here: the definitions
(``Model``, ``Prompt``, ``tool``, ``hook``, ``Agent``, ``Side`` …), the ``Runtime`` that runs
them, the ``ThreadState`` tools and hooks act through, and the errors (every one derives
from ``ThreadloomError``). The scripted test model is in ``threadloom.testing``; the HTTP
client in ``threadloom.client``.
"""

from __future__ import annotations

from threadloom.define import (
    DROP,
    Agent,
    Attachment,
    Definitions,
    HookContext,
    Immediate,
    MCPServer,
    Model,
    ParentHook,
    Prompt,
    Reasoning,
    SessionBinding,
    Side,
    Subagent,
    Subprompt,
    ToolArgumentsError,
    ToolResult,
    hook,
    tool,
)
from threadloom.engine.run.runtime import Runtime
from threadloom.errors import (
    AgentNotFound,
    DefinitionError,
    FileError,
    HookBlocked,
    InvalidArgument,
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
from threadloom.records import Message, StatusError, ThreadStatus
from threadloom.thread.retention import EventRetention
from threadloom.thread.state import ThreadState
from threadloom.thread.users import StaticUsers
from threadloom.version import __version__

__all__ = [
    "DROP",
    "Agent",
    "AgentNotFound",
    "Attachment",
    "DefinitionError",
    "Definitions",
    "EventRetention",
    "FileError",
    "HookBlocked",
    "HookContext",
    "Immediate",
    "InvalidArgument",
    "MCPServer",
    "Message",
    "MessageNotFound",
    "Model",
    "ParentHook",
    "Prompt",
    "ProviderError",
    "Reasoning",
    "Runtime",
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
