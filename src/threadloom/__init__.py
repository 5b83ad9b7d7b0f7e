"""Threadloom: a durable thread runtime for AI agents."""

from __future__ import annotations

from threadloom.define import DROP, Agent, Definitions, MCPServer, ParentHook, Side, hook
from threadloom.engine.runtime import Runtime
from threadloom.errors import FileError, HookBlocked
from threadloom.gc_tuning import tune_gc
from threadloom.records import Message, ThreadStatus
from threadloom.thread.retention import EventRetention
from threadloom.thread.state import ThreadState
from threadloom.thread.users import StaticUsers

__version__ = "0.1.0"

__all__ = [
    "DROP",
    "Agent",
    "Definitions",
    "EventRetention",
    "FileError",
    "HookBlocked",
    "MCPServer",
    "Message",
    "ParentHook",
    "Runtime",
    "Side",
    "StaticUsers",
    "ThreadState",
    "ThreadStatus",
    "__version__",
    "hook",
    "tune_gc",
]
