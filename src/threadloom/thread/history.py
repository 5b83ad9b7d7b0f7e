"""A live, chronological view of a thread's stored top-level messages (spec 02 §2.3.5).

The engine attaches one to the hub for each running execution (and keeps it warm between
runs); every change made through the hub is reflected before the writing call returns.

The history also memoises what the engine derives from each stored message (its request
form, its tool call ids): an entry is valid only for the very record object it was
computed from, so a message replaced by an update is recomputed, never served stale.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from threadloom.records import Message, copy_with

T = TypeVar("T")


def copy_message(message: Message, *, kept: bool = False) -> Message:
    """An independent copy: the scalar fields shared, the containers copied (what
    ``model_copy(deep=True)`` gives, at a fraction of its cost on the engine's hot path).
    ``kept``: the copy a history keeps, on a dictionary whose keys are shared with the
    class (``copy_with``'s ``shared_keys``: a history keeps its records as long as the
    thread stays warm); the copies it hands out are copies of those, whose keys are shared
    as their record's are."""
    update: dict[str, Any] = {}
    if message.metadata is not None:
        update["metadata"] = copy.deepcopy(message.metadata)
    if message.attachments is not None:
        update["attachments"] = [copy_with(a, {}) for a in message.attachments]
    return copy_with(message, update, shared_keys=kept)


class MessageHistory(Sequence[Message]):
    """Read-only sequence of copies of the stored top-level messages, in canonical order."""

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        # The messages given are fresh from the store and owned from here on: no copies.
        self._messages: list[Message] = [m for m in messages if self._admits(m)]
        self._by_id: dict[str, Message] = {m.id: m for m in self._messages}
        self._memo: dict[Any, dict[str, tuple[Message, Any]]] = {}  # key → id → (record, value)
        self._edits: list[int] = []
        """Per replacement or removal, the first position it may have changed (appends are
        not edits): what an incremental reader (``engine.request.context_cache``) consumed before
        that position is still exact."""
        self.caches: dict[Any, Any] = {}
        """Incremental readers' state, by their own key (kept as long as the history)."""

    def _admits(self, message: Message) -> bool:
        return message.depth == 0

    def upsert(self, message: Message) -> None:
        """Replace the message with the same id, or append a new one this history admits."""
        if not self._admits(message):
            return
        record = copy_message(message, kept=True)
        old = self._by_id.get(message.id)
        self._by_id[message.id] = record
        if old is None:
            self._messages.append(record)
            return
        for index in range(len(self._messages) - 1, -1, -1):
            if self._messages[index] is old:
                self._messages[index] = record
                self._edits.append(index)
                return

    def remove(self, message_ids: Sequence[str]) -> None:
        doomed = {i for i in message_ids if i in self._by_id}
        if not doomed:
            return
        self._edits.append(next(i for i, m in enumerate(self._messages) if m.id in doomed))
        self._messages = [m for m in self._messages if m.id not in doomed]
        for message_id in doomed:
            del self._by_id[message_id]
        for values in self._memo.values():
            for message_id in doomed:
                values.pop(message_id, None)

    def raw(self) -> list[Message]:
        """The records themselves, for the engine's own reads (callers must not mutate them;
        tools and hooks get copies through iteration and indexing)."""
        return list(self._messages)

    def records_from(self, start: int) -> list[Message]:
        """The records from position ``start`` on (the engine's own reads, as ``raw``)."""
        return self._messages[start:]

    @property
    def edit_mark(self) -> int:
        """A mark to pass to :meth:`first_edit_since` later."""
        return len(self._edits)

    def first_edit_since(self, mark: int) -> int | None:
        """The first position an edit made after ``mark`` may have changed, or ``None``."""
        return min(self._edits[mark:], default=None)

    def owns(self, message: Message) -> bool:
        """True when ``message`` is this history's own current record (not a copy)."""
        return self._by_id.get(message.id) is message

    def memo(self, message: Message, key: Any, compute: Callable[[Message], T]) -> T:
        """``compute(message)``, remembered for this record; copies are not remembered."""
        values = self._memo.get(key)
        if values is None:
            values = self._memo[key] = {}
        hit = values.get(message.id)
        if hit is not None and hit[0] is message:
            value: T = hit[1]
            return value
        if self._by_id.get(message.id) is not message:  # a copy, or not this history's
            return compute(message)
        value = compute(message)
        values[message.id] = (message, value)
        return value

    def forget(self, records: Sequence[Message], keys: Sequence[Any]) -> None:
        """Let go of what :meth:`memo` remembers under ``keys`` for ``records`` (a reader
        that will not ask again, ``engine.request.context_cache``); asked again, it is
        computed again."""
        for key in keys:
            values = self._memo.get(key)
            if values:
                for record in records:
                    values.pop(record.id, None)

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        if isinstance(index, slice):
            return [copy_message(m) for m in self._messages[index]]
        return copy_message(self._messages[index])

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return (copy_message(m) for m in self._messages)


class NestedHistory(MessageHistory):
    """A sub-prompt call's history: the caller's messages, then the persisted messages of
    this call (``parent_id`` = the call's reserved result id), kept live the same way."""

    def __init__(self, caller: Sequence[Message], parent_id: str) -> None:
        self.parent_id = parent_id
        super().__init__(caller)
        # The caller's records are admitted once, here; later upserts are this call's own.
        self._messages = list(caller)
        self._by_id = {m.id: m for m in self._messages}

    def _admits(self, message: Message) -> bool:
        return message.parent_id == self.parent_id

    def nested(self) -> list[Message]:
        """The call's own persisted messages, in order."""
        return [copy_message(m) for m in self._messages if m.parent_id == self.parent_id]
