"""What users write: models, prompts, tools, agents, hooks, and the registry that holds them."""

from __future__ import annotations

from threadloom.define.agent import Agent, ParentHook, SessionBinding, Side
from threadloom.define.budget import Budget
from threadloom.define.hook import (
    DROP,
    HOOK_NAMES,
    RUNTIME_DEFAULT,
    HookContext,
    HookDefinition,
    HookRegistry,
    hook,
)
from threadloom.define.mcp import MCPServer, MCPTool
from threadloom.define.model import Model
from threadloom.define.prompt import (
    Immediate,
    IncludePart,
    Prompt,
    Reasoning,
    Subagent,
    Subprompt,
    TextPart,
)
from threadloom.define.registry import Definitions, ResolvedTool
from threadloom.define.tool import (
    Attachment,
    ToolArgumentsError,
    ToolDefinition,
    ToolResult,
    error_result,
    normalize_tool_result,
    tool,
    tool_definition_of,
)
from threadloom.define.validation import RESERVED_NAMES
from threadloom.records import Schedule

__all__ = [
    "DROP",
    "HOOK_NAMES",
    "RESERVED_NAMES",
    "RUNTIME_DEFAULT",
    "Agent",
    "Attachment",
    "Budget",
    "Definitions",
    "HookContext",
    "HookDefinition",
    "HookRegistry",
    "Immediate",
    "IncludePart",
    "MCPServer",
    "MCPTool",
    "Model",
    "ParentHook",
    "Prompt",
    "Reasoning",
    "ResolvedTool",
    "Schedule",
    "SessionBinding",
    "Side",
    "Subagent",
    "Subprompt",
    "TextPart",
    "ToolArgumentsError",
    "ToolDefinition",
    "ToolResult",
    "error_result",
    "hook",
    "normalize_tool_result",
    "tool",
    "tool_definition_of",
]
