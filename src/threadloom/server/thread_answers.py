"""Threads and agents as the API answers them (spec 08 §8.2.2, §8.3.4, §8.10.1): built from
the store's rows and the served definitions as the answer models ``wire.threads`` declares
(``ThreadItem``, ``AgentSummary``, ``AgentDetail``)."""

from __future__ import annotations

from typing import Any

from threadloom.define.agent import Agent, Side
from threadloom.define.registry import Definitions
from threadloom.store.base import ThreadRow
from threadloom.wire.threads import AgentDetail, AgentSummary, ThreadItem


def backing(side: Side | None) -> str:
    """``human``, ``prompt`` or ``handler`` (Threadloom has no handler-backed sides yet)."""
    if side is None or side.is_human:
        return "human"
    return "prompt"


def absolute_icon(icon: str | None, origin: str) -> str | None:
    if icon and icon.startswith("/"):
        return origin.rstrip("/") + icon
    return icon


def agent_summary(defs: Definitions, name: str, origin: str) -> AgentSummary:
    """The ``agent`` object of a thread item; ``{name, title}`` when it no longer loads, no
    ``description`` or ``icon`` when the agent has none."""
    agent = defs.agent(name)
    if agent is None:
        return AgentSummary(name=name, title=name)
    more: dict[str, Any] = {}
    if agent.description:
        more["description"] = agent.description
    icon = absolute_icon(getattr(agent, "icon", None), origin)
    if icon:
        more["icon"] = icon
    return AgentSummary(
        name=agent.name,
        title=agent.title or agent.name,
        side_a_backing=backing(agent.side_a),
        side_b_backing=backing(agent.side_b),
        **more,
    )


def agent_detail(agent: Agent | None, origin: str) -> AgentDetail | None:
    """The ``agent`` object of ``GET /api/threads/{id}``."""
    if agent is None:
        return None
    side_b = agent.side_b
    return AgentDetail(
        id=agent.name,
        title=agent.title or agent.name,
        description=agent.description or None,
        icon=absolute_icon(getattr(agent, "icon", None), origin),
        side_a_backing=backing(agent.side_a),
        side_b_backing=backing(side_b),
        side_a_label=agent.side_a.label,
        side_b_label=side_b.label if side_b is not None else None,
        side_a_agent_prompt=agent.side_a.prompt,
        side_b_agent_prompt=side_b.prompt if side_b is not None else None,
        side_a_handler=None,
        side_b_handler=None,
    )


def status_wire(row: ThreadRow) -> dict[str, Any]:
    return row.status.model_dump()


def thread_answer(row: ThreadRow, defs: Definitions, origin: str) -> ThreadItem:
    """One item of ``GET /api/threads`` (§8.2.2)."""
    activity_us = max(row.created_at_us, row.status.since, row.last_activity_us or 0)
    return ThreadItem(
        id=row.id,
        agent_id=row.agent_id,
        origin_agent_id=row.origin_agent_id,
        user_id=row.user_id,
        tags=list(row.tags),
        parent=row.parent_id,
        terminated=row.terminated,
        created_at=row.created_at_us // 1_000_000,
        last_activity_at=activity_us // 1_000_000,
        executing=row.status.state == "running",
        status=status_wire(row),  # every key set: answered whole
        last_message_preview=row.last_message_preview,
        last_message_at=(
            row.last_message_at_us // 1_000_000 if row.last_message_at_us is not None else None
        ),
        agent=agent_summary(defs, row.agent_id, origin),
        orphaned=defs.agent(row.agent_id) is None,
        forked_from_thread_id=row.forked_from_thread_id,
        forked_from_message_id=row.forked_from_message_id,
    )


def thread_item(row: ThreadRow, defs: Definitions, origin: str) -> dict[str, Any]:
    """``thread_answer`` as its JSON object (the list's stream frames rename two keys)."""
    return thread_answer(row, defs, origin).to_wire()
