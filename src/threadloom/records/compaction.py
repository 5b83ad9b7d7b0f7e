"""A compaction of a thread's history (spec 23): a durable record that a range of the
thread's top-level messages is summarised for the model — the range, the summary, the
model that wrote it and what it cost, the provider's own compaction item where it gave
one, and when it was undone. The messages it covers are never deleted or edited."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

CompactionTrigger = Literal["threshold", "explicit"]

SUMMARY_PREFIX = "[Summary of the earlier conversation"
"""How the summary message the model sees begins (spec 23 §23.4): marked as history."""


class Compaction(BaseModel):
    """One compaction record (spec 23 §23.1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    thread_id: str
    first_message_id: str
    """The first top-level message the summary stands for (the thread's first)."""
    last_message_id: str
    """The last one: every top-level message stored up to it, inclusive, is covered."""
    message_count: int
    """How many top-level completed messages the range held when it was compacted."""
    summary: str
    model: str | None = None
    """The name of the model definition that wrote the summary."""
    trigger: CompactionTrigger = "explicit"
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    """USD, None when the model's price is unknown (never 0 for unknown)."""
    provider_item: Any = None
    """The provider-native compaction item, opaque JSON, where the provider gave one."""
    created_at: int = 0
    undone_at: int | None = None

    @property
    def active(self) -> bool:
        """True until undone."""
        return self.undone_at is None

    def to_wire(self) -> dict[str, Any]:
        """The API's form of the record (spec 23 §23.6)."""
        return self.model_dump()
