"""The Python client's export and import (spec 21 §21.6, spec 11): async and sync, against
the real server of the spec 08 fixtures."""

from __future__ import annotations

import asyncio

import pytest

from server.conftest import Api
from threadloom.client import AsyncClient, BadRequestError, Client, ConflictError
from threadloom.records.portable import VERSION, parse_export


async def test_c21_011_client_exports_and_imports(api: Api, client: AsyncClient) -> None:
    """C21-011: ``threads.export`` gives the file's bytes; ``threads.import_`` stores it
    (the ids of the answer), a second time raises ``ConflictError`` naming the id,
    ``new_ids=True`` stores a copy; a newer version raises ``BadRequestError``; the sync
    client does the same."""
    tid = await api.thread()
    await client.messages.send(tid, "hello")
    await api.settle(tid)
    data = await client.threads.export(tid)
    assert parse_export(data).root == tid
    await client.threads.delete(tid)
    stored = await client.threads.import_(data)
    assert (stored.thread_id, stored.thread_ids) == (tid, [tid])
    assert await client.threads.export(tid) == data
    with pytest.raises(ConflictError) as caught:
        await client.threads.import_(data)
    assert tid in str(caught.value)
    copy = await client.threads.import_(data, new_ids=True)
    assert copy.thread_id != tid
    newer = parse_export(data).model_dump(mode="json")
    newer["version"] = VERSION + 1
    with pytest.raises(BadRequestError, match=f"version {VERSION + 1}"):
        await client.threads.import_(newer)

    def sync() -> bytes:
        with Client(api.base, token=api.keys["alice"]) as made:
            return made.threads.export(tid)

    assert await asyncio.to_thread(sync) == data
