"""MCP servers as tool sources: what a project declares (docs/interop.md, spec 13 §13.4).

``MCPServer(name="calc", command="python", args=["server.py"])`` starts a server over stdio;
``MCPServer(name="docs", url="https://…/mcp", headers={…})`` reaches one over streamable HTTP.
Declared like a tool (``Definitions.add`` or a module-level value in a project file), it is
used by name in a prompt's ``tools``: ``"calc"`` offers every tool the server lists,
``"calc:add"`` only that one.

This module only describes servers and their tools; it imports no MCP code. The runtime
opens the sessions (``engine/mcp_sessions.py``, with the official ``mcp`` SDK) and binds each listed
tool here as an ``MCPTool``, a ``ToolDefinition`` whose call goes to the server.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from threadloom.define.agent import NAME_PATTERN
from threadloom.define.tool import ToolArgumentsError, ToolDefinition, ToolResult

Problem = tuple[str, str]

SEPARATOR: Final = ":"
"""Between a server's name and one of its tools in a prompt entry: ``"calc:add"``."""

DEFAULT_TIMEOUT_S: Final = 60.0
DEFAULT_CONNECT_TIMEOUT_S: Final = 30.0

_NOT_A_NAME_CHAR = re.compile(r"[^A-Za-z0-9_-]")


class MCPServer(BaseModel):
    """An MCP server whose tools a prompt may use.

    Exactly one transport: ``command`` (with ``args``, ``env`` merged over a minimal
    inherited environment, ``cwd``) starts the server as a child process speaking stdio;
    ``url`` (with ``headers``, e.g. an ``Authorization``) reaches a streamable HTTP server.
    ``timeout`` bounds each tool call, ``connect_timeout`` the start and the listing of the
    tools. A listed tool is offered under its own name, prefixed by ``tool_prefix`` and with
    any character a model's tool name cannot hold replaced by ``_``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = None
    timeout: float = Field(default=DEFAULT_TIMEOUT_S)
    connect_timeout: float = Field(default=DEFAULT_CONNECT_TIMEOUT_S)
    tool_prefix: str = ""
    description: str | None = None
    requires_approval: bool | tuple[str, ...] = False
    """A person approves each call before it runs (spec 14 §14.1): ``True`` for every tool
    of the server, or the server's names of the tools that need it."""

    def needs_approval(self, tool: str) -> bool:
        """Whether calls of the server's tool ``tool`` need approval."""
        rule = self.requires_approval
        return rule is True or (not isinstance(rule, bool) and tool in rule)

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url is not None else "stdio"

    def offered_name(self, tool: str) -> str:
        """The name a model sees for the server's tool ``tool``."""
        return _NOT_A_NAME_CHAR.sub("_", self.tool_prefix + tool)[:64]

    def self_problems(self) -> list[Problem]:
        """V1 (name syntax) and V22 (the declaration) of this server."""
        where = f'MCP server "{self.name}"'
        found: list[Problem] = []
        if not NAME_PATTERN.fullmatch(self.name):
            found.append(("V1", f'MCP server name "{self.name}" is invalid'))
        if (self.command is None) == (self.url is None):
            found.append(("V22", f"{where}: give either command (stdio) or url (HTTP)"))
        if self.command is not None and not self.command.strip():
            found.append(("V22", f"{where}: command must not be empty"))
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            found.append(("V22", f"{where}: url must start with http:// or https://"))
        if self.url is not None and (self.args or self.env or self.cwd):
            found.append(("V22", f"{where}: args, env and cwd are for a command (stdio)"))
        if self.command is not None and self.headers:
            found.append(("V22", f"{where}: headers are for a url (HTTP)"))
        for field in ("timeout", "connect_timeout"):
            value = getattr(self, field)
            if not (math.isfinite(value) and value > 0):
                found.append(("V22", f"{where}: {field} must be a number of seconds > 0"))
        if self.tool_prefix and not NAME_PATTERN.fullmatch(self.tool_prefix):
            found.append(("V22", f"{where}: tool_prefix may hold only A-Z a-z 0-9 _ -"))
        return found


MCPCall = Callable[[str, dict[str, Any]], Awaitable[ToolResult]]
"""What calls a tool on a server: ``(the server's tool name, arguments) -> ToolResult``."""


@dataclass(frozen=True, eq=False)
class MCPTool(ToolDefinition):
    """A tool a server listed, as the engine offers and calls it: the input schema is the
    server's, the server checks the arguments, and ``call`` (the runtime's session) runs it
    with the server's timeout."""

    server: str = ""
    remote_name: str = ""
    call: MCPCall | None = None

    async def invoke(
        self, state: Any, arguments: Mapping[str, Any], threads: Any = None
    ) -> ToolResult:
        if not isinstance(arguments, Mapping):
            raise ToolArgumentsError("Tool arguments must be a JSON object")
        if self.call is None:
            return ToolResult(status="error", error=f'MCP server "{self.server}" is not open')
        return await self.call(self.remote_name, dict(arguments))


def split_entry(entry: str) -> tuple[str, str | None]:
    """A prompt entry as (server name, tool name or ``None`` for all of its tools)."""
    server, separator, tool = entry.partition(SEPARATOR)
    return server, (tool if separator else None)
