"""``ThreadStream`` against the real server (spec 11 §11.5, cases C11-029, C11-030) and the
reducer fed with frames recorded from it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from relay import Relay

from server.conftest import Api
from threadloom.client import AsyncClient, Client, StreamClosed, ThreadDeletedError
from threadloom.client.chat import Delivery, Outcome
from threadloom.client.frames import Frame, MessageDataFrame, ThreadStatusFrame
from threadloom.client.reduce import FrameEvent, Snapshot, empty_view, reduce
from threadloom.client.stream import ThreadStream


def idle_again(frame: Frame) -> bool:
    return (
        isinstance(frame, ThreadStatusFrame)
        and not frame.snapshot
        and frame.status.state != "running"
    )


async def collect(stream: ThreadStream, done: Any, timeout: float = 10.0) -> list[Frame]:
    frames: list[Frame] = []
    async with asyncio.timeout(timeout):
        async for frame in stream:
            frames.append(frame)
            if done(frame):
                return frames
    return frames


async def test_c11_029_a_4008_close_resumes_with_since_and_loses_nothing(
    api: Api, client: AsyncClient
) -> None:
    created = await client.threads.create("echo")
    thread = created.thread_id
    page = await client.messages.list(thread)
    async with Relay(api.base) as relay:
        remote = AsyncClient(relay.base, token=api.keys["alice"])
        states: list[str] = []
        stream = remote.stream(thread, since=page.seq, on_state=states.append)
        async with remote, stream:
            first = await collect(stream, lambda f: True)
            assert isinstance(first[0], ThreadStatusFrame) and first[0].snapshot
            await client.messages.send(thread, "one")
            before = await collect(stream, idle_again)
            seq_before = stream.last_seq
            await relay.close_clients(4008, "Slow consumer")
            # durable frames produced while the client is away
            await client.messages.send(thread, "two")
            await api.settle(thread)
            after = await collect(stream, idle_again)
    assert "reconnecting" in states and stream.connections == 2
    assert relay.paths[1].endswith(f"since={seq_before}")
    durable = [f for f in before + after if f.durable]
    seqs = [f.seq for f in durable]
    assert seqs == sorted(set(seqs))  # every durable frame once, in order
    assert all(f.seq > (seq_before or 0) for f in after if f.durable)
    # and none missing: the frames, reduced onto the first page, give what a fresh read gives
    view = reduce(empty_view(thread), Snapshot(page.messages, None, None, page.seq))
    for frame in before + after:
        view = reduce(view, FrameEvent(frame))
    fresh = await client.messages.list(thread)
    assert [(m.id, m.text) for m in view.messages] == [
        (m.id, m.content or "") for m in fresh.messages
    ]
    contents = [f.data.content for f in durable if isinstance(f, MessageDataFrame)]
    assert "echo: one" in contents and "echo: two" in contents


async def test_c11_030_a_deleted_thread_ends_the_stream_without_reconnecting(
    client: AsyncClient,
) -> None:
    created = await client.threads.create("echo")
    stream = client.stream(created.thread_id)
    async with stream:
        await collect(stream, lambda f: True)
        await client.threads.delete(created.thread_id)
        with pytest.raises(ThreadDeletedError) as caught:
            await collect(stream, lambda f: False)
    assert isinstance(caught.value, StreamClosed)
    assert caught.value.code == 1000 and caught.value.reason == "Thread deleted"
    assert stream.connections == 1


async def test_c11_reducer_on_recorded_frames_matches_the_rest_read(
    api: Api, client: AsyncClient
) -> None:
    """Frames recorded from the real server, reduced onto a REST snapshot, give the messages
    a fresh REST read gives, each completed with SUCCESS in the run's generation."""
    created = await client.threads.create("echo")
    thread = created.thread_id
    await client.messages.send(thread, "first")
    await api.settle(thread)
    page = await client.messages.list(thread, include_silent=True)
    detail = await client.threads.get(thread)
    view = reduce(
        empty_view(thread), Snapshot(page.messages, detail.status, detail.terminated, page.seq)
    )
    async with client.stream(thread, since=page.seq, include_silent=True) as stream:
        await collect(stream, lambda f: True)
        await client.messages.send(thread, "second")
        frames = await collect(stream, idle_again)
    running = next(f for f in frames if isinstance(f, ThreadStatusFrame))
    for n, frame in enumerate(frames):
        view = reduce(view, FrameEvent(frame, received_at_ms=n))
    fresh = await client.messages.list(thread, include_silent=True)
    assert [m.id for m in view.messages] == [m.id for m in fresh.messages]
    assert [m.text for m in view.messages] == [m.content or "" for m in fresh.messages]
    assert view.seq == fresh.seq and view.running is False
    reply = view.messages[-1]
    assert reply.text == "echo: second"
    assert reply.delivery == Delivery.complete(f"run:{running.status.since}", Outcome.SUCCESS)


async def test_sync_stream_reads_a_send_and_ends_on_delete(api: Api, client: AsyncClient) -> None:
    created = await client.threads.create("echo")
    thread = created.thread_id
    page = await client.messages.list(thread)
    opened = asyncio.Event()
    loop = asyncio.get_running_loop()

    def read() -> tuple[list[Frame], BaseException | None]:
        frames: list[Frame] = []
        sync = Client(api.base, token=api.keys["alice"])
        with sync, sync.stream(thread, since=page.seq) as stream:
            try:
                for frame in stream:
                    frames.append(frame)
                    if len(frames) == 1:
                        loop.call_soon_threadsafe(opened.set)
            except ThreadDeletedError as exc:
                return frames, exc
        return frames, None

    reader = asyncio.create_task(asyncio.to_thread(read))
    await asyncio.wait_for(opened.wait(), 5)
    await client.messages.send(thread, "sync")
    await api.settle(thread)
    await asyncio.sleep(0.2)
    await client.threads.delete(thread)
    frames, ended = await asyncio.wait_for(reader, 10)
    assert isinstance(ended, ThreadDeletedError)
    contents = [f.data.content for f in frames if isinstance(f, MessageDataFrame)]
    assert "echo: sync" in contents
    seqs = [f.seq for f in frames if f.durable]
    assert seqs == sorted(set(seqs))
