"""The Python client's compaction methods (spec 11, spec 23 §23.6): async and sync, against
the real server of the spec 08 fixtures."""

from __future__ import annotations

import asyncio

import pytest

from server.conftest import Api
from threadloom.client import AsyncClient, Client, ConflictError, NotFoundError
from threadloom.records import Compaction


async def test_c11_048_client_compacts_lists_and_undoes(api: Api, client: AsyncClient) -> None:
    """C11-048: ``threads.compact`` answers the record (a ``Compaction``); ``threads.
    compactions`` lists it with its id as ``active``; ``threads.undo_compaction`` answers it
    undone, and again the same; nothing left to compact → ``ConflictError``
    (``nothing_to_compact``); an unknown compaction → ``NotFoundError``; the sync client
    lists the same."""
    tid = await api.thread()
    state = await api.runtime.thread(tid)
    for n in range(3):
        await state.inject_message(role="user", content=f"question {n}")
        await state.inject_message(role="assistant", content=f"answer {n}")
    record = await client.threads.compact(tid, keep_messages=2)
    assert isinstance(record, Compaction)
    assert record.thread_id == tid and record.message_count == 4 and record.undone_at is None
    listed = await client.threads.compactions(tid)
    assert listed.compactions == [record] and listed.active == record.id
    with pytest.raises(ConflictError) as caught:
        await client.threads.compact(tid, keep_messages=2)
    assert caught.value.code == "nothing_to_compact"
    undone = await client.threads.undo_compaction(tid, record.id)
    assert undone.id == record.id and undone.undone_at is not None
    assert await client.threads.undo_compaction(tid, record.id) == undone
    with pytest.raises(NotFoundError):
        await client.threads.undo_compaction(tid, "0" * 32)

    def sync() -> tuple[list[Compaction], str | None]:
        with Client(api.base, token=api.keys["alice"]) as made:
            found = made.threads.compactions(tid)
            return found.compactions, found.active

    assert await asyncio.to_thread(sync) == ([undone], None)
