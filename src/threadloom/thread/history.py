"""A live, chronological view of a thread's stored top-level messages (spec 02 §2.3.5).

The engine attaches one to the hub for each running execution; every insert, update and
delete made through the hub is reflected before the writing call returns.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from threadloom.records import Message


class MessageHistory(Sequence[Message]):
    """Read-only sequence of copies of the stored top-level messages, in canonical order."""

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        # The messages given are fresh from the store and owned from here on: no copies.
        self._messages: list[Message] = [m for m in messages if m.depth == 0]

    def upsert(self, message: Message) -> None:
        """Replace the message with the same id, or append a new top-level one."""
        if message.depth != 0:
            return
        copy = message.model_copy(deep=True)
        for index, existing in enumerate(self._messages):
            if existing.id == message.id:
                self._messages[index] = copy
                return
        self._messages.append(copy)

    def raw(self) -> list[Message]:
        """The records themselves, for the engine's own reads (callers must not mutate them;
        tools and hooks get copies through iteration and indexing)."""
        return list(self._messages)

    def remove(self, message_ids: Sequence[str]) -> None:
        doomed = set(message_ids)
        self._messages = [m for m in self._messages if m.id not in doomed]

    def __getitem__(self, index):  # type: ignore[no-untyped-def]
        if isinstance(index, slice):
            return [m.model_copy(deep=True) for m in self._messages[index]]
        return self._messages[index].model_copy(deep=True)

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return (m.model_copy(deep=True) for m in self._messages)


class NestedHistory(MessageHistory):
    """A sub-prompt call's history: the caller's messages, then the persisted messages of
    this call (``parent_id`` = the call's reserved result id), kept live the same way."""

    def __init__(self, caller: Sequence[Message], parent_id: str) -> None:
        super().__init__(caller)
        self.parent_id = parent_id

    def upsert(self, message: Message) -> None:
        if message.parent_id != self.parent_id:
            return
        copy = message.model_copy(deep=True)
        for index, existing in enumerate(self._messages):
            if existing.id == message.id:
                self._messages[index] = copy
                return
        self._messages.append(copy)

    def nested(self) -> list[Message]:
        """The call's own persisted messages, in order."""
        return [m.model_copy(deep=True) for m in self._messages if m.parent_id == self.parent_id]
