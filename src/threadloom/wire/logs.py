"""A thread's logs, cost and subagent registry (spec 08 §8.6, §8.7, §8.9). The cost answer
is the record ``CostReport`` as it is."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, create_model

from threadloom.records import LOG_LIST_KEYS, LogRow
from threadloom.wire.model import Answer
from threadloom.wire.query import LIMIT, OFFSET, boolean, choice, text

LIST_QUERY = (
    LIMIT,
    OFFSET,
    choice("order", ("asc", "desc"), "Default asc"),
    text("kind", "Comma-separated kinds: llm, app, runtime …"),
    boolean("error", "Only rows with (or without) an error"),
    text("ids", "Comma-separated log ids (at most 200)"),
    text("messageIds", "Comma-separated message ids (at most 200)"),
    boolean("includeWorkblocks", "With messageIds: their work blocks' rows too"),
    boolean("includeDescendants", "With ids: the rows' ancestors and descendants"),
    boolean("timing", "Add latency_ms, time_to_first_token_ms, finish_reason"),
)

_TIMING = ("latency_ms", "time_to_first_token_ms", "finish_reason")
_LOG_FIELDS = LogRow.model_fields

_LIST_FIELDS: dict[str, Any] = {
    k: (_LOG_FIELDS[k].annotation, _LOG_FIELDS[k]) for k in (*LOG_LIST_KEYS, *_TIMING)
}
LogListRow = create_model(
    "LogListRow",
    __base__=Answer,
    __doc__="A row of the log list (§8.2.6); the timing keys only with ``timing=true``.",
    **_LIST_FIELDS,
)


class LogDetail(LogRow):
    """One log row with its detail (§8.6.2): every column, the heavy ones last."""

    model_config = ConfigDict(title="LogDetail")

    source_message_content: str | None = None
    source_message_role: str | None = None
    source_message_created_at: int | None = None
    source_message_metadata: Any = None
    scheduled_effects: Any = None


class LogPage(Answer):
    logs: list[LogListRow]
    total: int
    hasMore: bool


class SubagentEntry(Answer):
    """A child of the thread's registry (§8.2.7)."""

    id: str
    relationship: str
    agent_name: str
    title: str | None
    threadName: str | None
    status: str
    blocking: bool
    resumable: bool
    owner: Literal["a", "b"]
    description: str | None
    createdAt: int
    spawnGroupId: str | None


class SubagentList(Answer):
    subagents: list[SubagentEntry]
