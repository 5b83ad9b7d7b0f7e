"""Client tools: the tools a client offers with a request and runs itself — AG-UI's
frontend tools (spec 13 §13.7).

A run that carries client tools offers them to the model after the agent's own, at top level
only (``Run._step``). A response that calls one runs its other calls as usual and ends the run
``awaiting_client_tool`` (``step/tools.py`` leaves the call without a result). The client
then answers: :func:`answer` stores each answer as the call's tool result and, once none is
pending, starts the run again — with the answering request's tools — as a continue does.

Nothing is stored about the tools themselves: they are the request's. A run started
otherwise (a REST send or continue, a decided approval, a resumed lost run, another node)
offers none. A call is *pending* while the thread is not running and the call is one of the
thread's newest top-level model message, without a result, naming no tool of the agent's
side a: no other call can be without a result there (an unknown tool gets its error
result at once), so the stored history says which calls wait for the client.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from threadloom.define.registry import Definitions, ResolvedTool
from threadloom.define.tool import ToolDefinition, ToolResult
from threadloom.engine.run.subagents import (
    SUBAGENT_CREATE_TOOL,
    SUBAGENT_MESSAGE_TOOL,
    SUBAGENTS_TOOL,
)
from threadloom.engine.step.tools import result_content
from threadloom.errors import InvalidField
from threadloom.records import Message, ToolCall
from threadloom.thread.hub import ThreadHub
from threadloom.thread.lock import ThreadLock
from threadloom.thread.state import ThreadState

AWAITING: Final = "awaiting_client_tool"
"""The reason code of a run that ended on a call of a client tool (spec 04 §4.22)."""
NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A tool name every provider accepts (OpenAI's rule, the strictest)."""
RUNTIME_TOOLS: Final = frozenset(
    t.name for t in (SUBAGENT_CREATE_TOOL, SUBAGENT_MESSAGE_TOOL, SUBAGENTS_TOOL)
)
HISTORY_WINDOW: Final = 50
"""How many of the thread's newest messages are read to find its pending calls."""


@dataclass(frozen=True, slots=True)
class ClientTool:
    """A tool the client offers and runs: what the model is told of it."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ClientAnswer:
    """The client's result of one call: its text, or the error it reports."""

    tool_call_id: str
    content: str
    error: str | None = None
    metadata: Mapping[str, Any] | None = None


def _runs_on_client(*_: Any, **__: Any) -> Any:
    raise RuntimeError("a client tool runs on the client, never on the server")


def offered(tools: Sequence[ClientTool]) -> list[ResolvedTool]:
    """The client's tools as a step offers them (never dispatched: ``step/tools.py``
    leaves their calls to the client)."""
    out = []
    for tool in tools:
        definition = ToolDefinition(
            name=tool.name,
            description=tool.description,
            parameters=tool.parameters,
            fn=_runs_on_client,
        )
        out.append(ResolvedTool(tool.name, "tool", tool.description, tool.parameters, definition))
    return out


def agent_tool_names(definitions: Definitions, agent_name: str) -> frozenset[str]:
    """The names the agent's side a offers itself (its prompt's tools and the runtime's
    subagent tools): a client tool may not take one of them."""
    agent = definitions.agent(agent_name)
    prompt = agent.side_a.prompt if agent is not None else None
    if not prompt or definitions.prompt(prompt) is None:
        return RUNTIME_TOOLS
    return RUNTIME_TOOLS | {t.name for t in definitions.offered_tools(prompt)}


def check_tools(
    definitions: Definitions, agent_name: str, tools: Iterable[ClientTool], where: str = "tools"
) -> list[ClientTool]:
    """``tools`` when a run of the agent may offer them; else ``InvalidField`` naming the
    first bad one (``tools[i].name``, ``tools[i].parameters``)."""
    taken = agent_tool_names(definitions, agent_name)
    seen: set[str] = set()
    out = list(tools)
    for index, tool in enumerate(out):
        at = f"{where}[{index}]"
        if not NAME.fullmatch(tool.name):
            raise InvalidField(f"{at}.name", "must be 1 to 64 letters, digits, '_' or '-'")
        if tool.name in seen:
            raise InvalidField(f"{at}.name", f"names the tool {tool.name!r} a second time")
        if tool.name in taken:
            raise InvalidField(
                f"{at}.name", f"is the name of a tool of agent {agent_name!r} (a server tool)"
            )
        if not isinstance(tool.parameters, dict):
            raise InvalidField(f"{at}.parameters", "must be a JSON Schema object")
        seen.add(tool.name)
    return out


def pending_calls(history: Sequence[Message], own: frozenset[str]) -> list[ToolCall]:
    """The calls waiting for the client in ``history`` (oldest first; module docstring):
    those of the newest top-level model message, without a result, naming no tool in
    ``own``."""
    issued = next(
        (m for m in reversed(history) if m.depth == 0 and m.prompt and m.role != "tool"), None
    )
    if issued is None or not issued.tool_calls or issued.role != "assistant":
        return []
    answered = {m.tool_call_id for m in history if m.role == "tool" and m.tool_call_id}
    return [
        c
        for c in issued.decoded_tool_calls()
        if c.id not in answered and c.function.name not in own
    ]


class Starter(Protocol):
    """What :func:`answer` needs of the run manager (``runs.RunManager``)."""

    hub: ThreadHub

    def running(self, thread_id: str) -> bool: ...
    def gate(self, thread_id: str) -> ThreadLock: ...
    def offer_client_tools(self, thread_id: str, tools: Sequence[ClientTool] | None) -> None: ...
    async def start_continue(self, thread_id: str) -> bool: ...


async def pending(state: ThreadState, own: frozenset[str]) -> list[ToolCall]:
    """The thread's calls waiting for the client now (none while it runs)."""
    status = await state.status()
    if status.state == "running":
        return []
    page = await state.get_messages(limit=HISTORY_WINDOW, include_silent=True)
    return pending_calls(list(reversed(page.messages)), own)


async def answer(
    manager: Starter,
    state: ThreadState,
    own: frozenset[str],
    answers: Sequence[ClientAnswer],
    tools: Sequence[ClientTool] | None,
) -> tuple[int, bool]:
    """Store the answers to pending calls as their tool results (others are left out), in
    the order of the calls; then, when the thread waits ``awaiting_client_tool`` and no
    call is pending any more, start the run (``tools`` offered). Returns how many were
    stored and whether a run started."""
    tid = state.thread_id
    by_id = {a.tool_call_id: a for a in answers}
    stored = 0
    async with manager.gate(tid):  # no run starts here meanwhile; a second request waits
        if manager.running(tid):
            return 0, False
        calls = await pending(state, own)
        for call in calls:
            found = by_id.get(call.id)
            if found is None:
                continue
            result = (
                ToolResult(status="error", error=found.error)
                if found.error is not None
                else ToolResult(status="success", result=found.content)
            )
            await state.inject_message(
                role="tool",
                content=result_content(result),
                name=call.function.name,
                tool_call_id=call.id,
                tool_status=result.status,
                metadata=dict(found.metadata) if found.metadata else None,
            )
            stored += 1
        left = len(calls) - stored
        row = await manager.hub.store.get_thread(tid)
    if stored == 0 or left > 0 or row is None or row.stopped:
        return stored, False  # (a thread stopped while the client ran its tool stays put)
    if row.status.reason != AWAITING or row.status.state == "running":
        return stored, False
    manager.offer_client_tools(tid, tools)
    return stored, await manager.start_continue(tid)


__all__ = [
    "AWAITING",
    "ClientAnswer",
    "ClientTool",
    "Starter",
    "agent_tool_names",
    "answer",
    "check_tools",
    "offered",
    "pending",
    "pending_calls",
]
