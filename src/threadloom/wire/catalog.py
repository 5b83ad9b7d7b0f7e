"""The catalog and the service (spec 08 §8.10, §8.11): agents, prompts, tools, models,
hooks, and health."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, RootModel

from threadloom.errors import FallbackClass
from threadloom.wire.model import Answer
from threadloom.wire.query import boolean, choice

Backing = Literal["human", "prompt", "handler"]
"""What answers on an agent's side."""

TOOLS_QUERY = (
    choice("type", ("tools", "prompts", "agents"), "Only this kind"),
    boolean("schema", "Include each entry's parameter schema"),
)


class AgentVariable(Answer):
    """A variable a thread of the agent must be given in ``arguments`` (spec 04 §4.4.2)."""

    name: str
    description: str
    prompt: str


class AgentEntry(Answer):
    """An agent of ``GET /api/agents``; the keys after ``packed`` are shown to admins."""

    id: str
    name: str
    title: str
    description: str | None
    tool_description: str | None
    icon: str | None
    side_a_backing: Backing
    side_b_backing: Backing
    primary: bool
    parentHooks: list[str]
    created_at: int
    packed: bool
    variables: list[AgentVariable] = Field(default_factory=list)
    default_prompt: str | None = None
    default_model: str | None = None
    tools: list[str] | None = None
    side_a_label: str | None = None
    side_a_agent_prompt: str | None = None
    side_a_handler: None = None
    side_a_subagents: list[str] | None = None
    side_b_label: str | None = None
    side_b_agent_prompt: str | None = None
    side_b_handler: None = None
    side_b_subagents: list[str] | None = None


class AgentList(Answer):
    agents: list[AgentEntry]


class PromptVariable(Answer):
    """A ``{{name}}`` variable the prompt's system text needs (spec 04 §4.4.2)."""

    name: str
    description: str


class PromptSubagent(Answer):
    """A subagent relationship the prompt offers (spec 06 §6.2): its tool-facing name and
    the agent it starts."""

    relationship: str
    agent: str
    description: str | None
    blocking: bool


class McpTool(Answer):
    """A tool an MCP server listed, under the name the model sees."""

    name: str
    description: str
    schema_: dict[str, Any] = Field(alias="schema")


class PromptMcpServer(Answer):
    """An MCP server whose tools the prompt uses (spec 04 §4.4.3): never its command, URL,
    environment or headers (they may hold secrets). ``tools`` is ``null`` while the server
    is not open (``error`` then says why, when it failed)."""

    name: str
    transport: Literal["stdio", "http"]
    description: str | None
    only: str | None
    tools: list[McpTool] | None
    error: str | None


class PromptEntry(Answer):
    id: str
    name: str
    tool_description: str | None
    prompt: str
    required_schema: dict[str, Any] | None
    model_id: str
    model_name: str | None
    model_provider: str
    include_chat: bool
    include_past_tools: bool
    parallel_tool_calls: bool
    tool_choice: str | dict[str, Any]
    tools: list[str]
    reasoning: dict[str, Any] | None
    created_at: int
    variables: list[PromptVariable] = Field(default_factory=list)
    subagents: list[PromptSubagent] = Field(default_factory=list)
    mcp_servers: list[PromptMcpServer] = Field(default_factory=list)


class PromptList(Answer):
    prompts: list[PromptEntry]


class ToolEntry(Answer):
    """A tool, a prompt or an agent callable as a tool (§8.10.3)."""

    description: str | None
    schema_: dict[str, Any] | None = Field(alias="schema")
    variables: list[Any]
    hasError: bool
    type: Literal["tool", "prompt", "agent"]
    model: str | None = None
    error: str | None = None


class ToolCatalog(RootModel[dict[str, ToolEntry]]):
    """Every entry by name."""


class Fallback(Answer):
    id: str
    name: str
    model: str | None
    provider: str | None
    iconId: None
    order: int


class Capabilities(Answer):
    tools: bool
    images: bool


class ModelEntry(Answer):
    id: str
    name: str
    provider: str
    provider_id: str
    model: str
    iconId: None
    input_price: float | None
    output_price: float | None
    cached_price: float | None
    pricing_range: None
    included_providers: None
    fallbacks: list[Fallback]
    fallback_on: list[FallbackClass]
    """The error classes on which the fallbacks are tried (spec 04 §4.12.3; Threadloom)."""
    providerTools: list[Any]
    capabilities: Capabilities
    created_at: int


class ModelList(Answer):
    models: list[ModelEntry]


class HookEntry(Answer):
    id: str
    hook: str


class HookList(Answer):
    hooks: list[HookEntry]


class Health(Answer):
    status: Literal["ok"]
    version: str
    node: str
    store: Literal["sqlite", "postgres"]


class HealthUnavailable(Answer):
    """503: the store cannot be reached, or the node drains or is fenced."""

    status: Literal["unavailable"]
    error: str
    code: Literal["unavailable"]
    node: str
