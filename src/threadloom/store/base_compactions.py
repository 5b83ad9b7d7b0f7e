"""The compactions part of the Store protocol (spec 23): durable records of summaries that
stand for a range of a thread's messages. ``threadloom.store.base.Store`` is a
``CompactionStore``."""

from __future__ import annotations

from typing import Protocol

from threadloom.records import Compaction


class CompactionStore(Protocol):
    """Compaction records (spec 23 §23.1)."""

    async def add_compaction(self, record: Compaction) -> Compaction | None:
        """Store the record, its ``created_at`` the store's time; None when the thread is
        gone."""
        ...

    async def list_compactions(
        self, thread_id: str, *, active_only: bool = False
    ) -> list[Compaction]:
        """The thread's compactions, oldest first."""
        ...

    async def undo_compaction(self, thread_id: str, compaction_id: str) -> Compaction | None:
        """Set ``undone_at`` (once); the record as stored, None when there is none."""
        ...
