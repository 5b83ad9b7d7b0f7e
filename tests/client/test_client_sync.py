"""The blocking ``Client`` where it has code of its own (spec 11 §11.2.2): the page-by-page
iterators and the stream's state callback, against the real server."""

from __future__ import annotations

import asyncio

from relay import Relay

from server.conftest import Api
from threadloom.client import AsyncClient, Client
from threadloom.client.frames import ThreadStatusFrame


async def test_sync_iterators_page_through_everything_like_the_async_ones(
    api: Api, client: AsyncClient
) -> None:
    thread = (await client.threads.create("echo")).thread_id
    for text in ("one", "two", "three"):
        await client.messages.send(thread, text)
        await api.settle(thread)
    others = [(await client.threads.create("echo")).thread_id for _ in range(2)]
    async_messages = [m.id async for m in client.messages.iterate(thread, page_size=2)]
    async_threads = [t.id async for t in client.threads.iterate(page_size=1, agent_id="echo")]

    def read_sync() -> tuple[list[str], list[str], list[str]]:
        with Client(api.base, token=api.keys["alice"]) as sync:
            messages = sync.messages.iterate(thread, page_size=2)
            texts = [m.content or "" for m in sync.messages.iterate(thread, page_size=4)]
            ids = [m.id for m in messages]
            threads = [t.id for t in sync.threads.iterate(page_size=1, agent_id="echo")]
        return ids, threads, texts

    ids, threads, texts = await asyncio.to_thread(read_sync)
    assert texts == ["one", "echo: one", "two", "echo: two", "three", "echo: three"]
    oldest_first = await client.messages.list(thread, order="asc")
    assert ids == async_messages == [m.id for m in oldest_first.messages]
    assert threads == async_threads
    assert set(threads) == {thread, *others}


async def test_sync_stream_reports_its_states_across_a_reconnect(
    api: Api, client: AsyncClient
) -> None:
    thread = (await client.threads.create("echo")).thread_id
    states: list[str] = []
    async with Relay(api.base) as relay:
        sync = Client(api.base, token=api.keys["alice"], stream_url=relay.base)
        stream = sync.stream(thread, on_state=states.append)
        await asyncio.to_thread(stream.__enter__)
        first = await asyncio.to_thread(next, stream)
        assert states == ["open"]
        await relay.close_clients(4008, "Slow consumer")
        again = await asyncio.to_thread(next, stream)  # the snapshot of the new connection
        await asyncio.to_thread(stream.close)
        sync.close()
    assert isinstance(first, ThreadStatusFrame) and first.snapshot
    assert isinstance(again, ThreadStatusFrame) and again.snapshot
    assert states == ["open", "reconnecting", "open", "closed"]
    assert stream.connections == 2 and len(relay.paths) == 2
