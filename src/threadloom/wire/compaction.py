"""A thread's compactions over HTTP (spec 23 §23.6): compact now
(``POST /api/threads/{id}/compact``), list them (``GET …/compactions``), undo one
(``DELETE …/compactions/{compaction_id}``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from threadloom.records import Compaction
from threadloom.wire.model import Answer, Body, examples
from threadloom.wire.problems import check, integer_from

MAX_KEEP = 1_000_000
"""The largest ``keep_messages`` a body may name."""


class CompactThread(Body):
    """``POST /api/threads/{id}/compact``: how many recent messages stay live (absent: what
    the model's ``compact_keep`` of its context window allows, else one)."""

    model_config = examples({}, {"keep_messages": 4})

    keep_messages: Annotated[
        int | None, Field(ge=1, le=MAX_KEEP), check(integer_from(1, MAX_KEEP))
    ] = None


class CompactionItem(Answer):
    """A compaction record as the API shows it (``records.Compaction``)."""

    id: str
    thread_id: str
    first_message_id: str
    last_message_id: str
    message_count: int
    summary: str
    model: str | None
    trigger: Literal["threshold", "explicit"]
    input_tokens: int
    output_tokens: int
    cost: float | None
    provider_item: Any
    created_at: int
    undone_at: int | None

    @classmethod
    def of(cls, record: Compaction) -> CompactionItem:
        return cls.model_validate(record.to_wire())


class CompactionList(Answer):
    """``GET /api/threads/{id}/compactions``: every compaction of the thread, oldest first,
    undone ones included; ``active`` is the id of the one the next request uses (null:
    none, the originals)."""

    compactions: list[CompactionItem]
    active: str | None
