"""Spec 09 §9.10.2 (issue 23 item 2): a subscriber that never reads holds at most its bounds
in bytes, and its bus subscription ends the moment it is cut off — not once a write stuck
on its socket times out. On each store; no timing: every check is made right after the
write that published the event returned."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from test_c09_stream import exchange, open_ws, recv
from websockets.exceptions import ConnectionClosed

from conftest import USERS, Api, stream_settings
from threadloom import Runtime
from threadloom.server.auth.accounts import StoreCredentials
from threadloom.server.deps import ServerContext
from threadloom.server.settings import ServerSettings, StreamSettings
from threadloom.server.stream.auth import StreamAuth
from threadloom.server.stream.frames import Close, Filters, Frame
from threadloom.server.stream.list_events import ListSession
from threadloom.server.stream.session import Grant, Session

BOUND = 256 * 1024
BIG = 60 * 1024  # about four PATCHed messages fit in the bound


def context(runtime: Runtime, **stream: Any) -> ServerContext:
    settings = StreamSettings(**{"buffer_frames": 1000, "buffer_bytes": BOUND, **stream})
    return ServerContext(runtime, ServerSettings(stream=settings), StoreCredentials(runtime.store))


def session_of(runtime: Runtime, thread_id: str) -> Session:
    """A stream session of alice's on ``thread_id``, as a handshake would open it."""
    ctx = context(runtime)
    who = USERS["alice"]
    auth = StreamAuth(who, "api_key", None, "header")
    return Session(ctx, Grant(who, auth, thread_id, Filters(), None), ctx.settings.stream)


def held(session: Session) -> int:
    """Bytes the session holds for its subscriber: the bus buffer and the outbox."""
    return session.subscription.buffered_bytes + session.outbox.size[1]


async def test_a_session_whose_writer_is_stuck_stays_bounded_and_leaves_the_bus(
    runtime: Runtime,
) -> None:
    """Live: the writer took one frame and never comes back (its send cannot proceed).
    Frames pile up in the outbox up to its bound; the one that does not fit cuts the
    subscriber off within the write that published it."""
    state = await runtime.create_thread("a")
    message = await state.inject_message(role="user", content="hello")
    bus = runtime.events
    session = session_of(runtime, state.thread_id)
    frames = session.frames()
    snapshot = await anext(frames)
    assert isinstance(snapshot, Frame) and snapshot.type == "thread_status"
    state.emit("ping", {})
    first = await anext(frames)  # past the catch-up: live; the writer now "sends" it forever
    assert isinstance(first, Frame) and first.type == "event"
    assert bus.subscriber_count == 1
    dropped_at = None
    for i in range(40):
        await state.update_message(message.id, {"content": f"{i} " + "x" * BIG})
        assert held(session) <= BOUND
        if bus.subscriber_count == 0:
            dropped_at = i
            break
    assert dropped_at is not None and 3 <= dropped_at <= 5
    assert session.subscription.closed and session.subscription.buffered_bytes == 0
    assert session.outbox.size == (2, 0)  # the error frame and the close, nothing else
    for i in range(5):  # later writes reach nobody and build nothing for it
        await state.update_message(message.id, {"content": f"after {i} " + "x" * BIG})
        assert bus.subscriber_count == 0 and held(session) == 0
    error = await anext(frames)
    assert isinstance(error, Frame) and json.loads(error.text)["code"] == "slow_consumer"
    assert await anext(frames) == Close(4008, "Slow consumer")
    session.close()


async def test_a_session_that_never_started_holds_its_events_within_the_bound(
    runtime: Runtime,
) -> None:
    """Opening: the subscription holds the events for the opening sequence, bounded in
    bytes as the outbox is; overflowing it cuts the subscriber off at once, and the
    opening sequence then ends with the error and 4008."""
    state = await runtime.create_thread("a")
    message = await state.inject_message(role="user", content="hello")
    bus = runtime.events
    session = session_of(runtime, state.thread_id)
    assert bus.subscriber_count == 1
    dropped_at = None
    for i in range(40):
        await state.update_message(message.id, {"content": f"{i} " + "x" * BIG})
        assert session.subscription.buffered_bytes <= BOUND
        if bus.subscriber_count == 0:
            dropped_at = i
            break
    assert dropped_at is not None and 3 <= dropped_at <= 5
    assert held(session) == 0
    frames = session.frames()
    snapshot = await anext(frames)
    assert isinstance(snapshot, Frame) and snapshot.type == "thread_status"
    error = await anext(frames)
    assert isinstance(error, Frame) and json.loads(error.text)["code"] == "slow_consumer"
    assert await anext(frames) == Close(4008, "Slow consumer")
    session.close()


async def test_a_list_events_subscriber_that_never_reads_leaves_the_bus(
    runtime: Runtime,
) -> None:
    """``/api/events``: the subscription is bounded like the stream's; overflowing it
    ends the subscription at once and queues the error and 4008."""
    ctx = context(runtime, buffer_frames=5)
    session = ListSession(ctx, USERS["root"], True, "http://testserver", ctx.settings.stream)
    bus = runtime.events
    assert bus.subscriber_count == 1
    for _ in range(6):
        await runtime.create_thread("a")
        assert session.subscription.pending() <= 5
    assert bus.subscriber_count == 0 and session.subscription.closed
    assert session.outbox.size[0] == 2
    error = await session.next()
    assert isinstance(error, Frame) and json.loads(error.text)["code"] == "slow_consumer"
    assert await session.next() == Close(4008, "Slow consumer")
    session.close()


async def patch_until_dropped(api: Api, thread: str, message: str) -> int:
    """PATCH large contents until the thread has no subscriber left (more than the kernel
    buffers of both ends hold, so the server's write gets stuck); how many it took."""
    client = api.client()
    bus = api.runtime.events
    for i in range(1200):  # 120 MB at most
        body = {"content": f"{i} " + "x" * 100_000}
        response = await client.patch(f"/api/threads/{thread}/messages/{message}", json=body)
        assert response.status_code == 200, response.text
        for sub in bus.listened.get(thread, ()):
            assert sub.buffered_bytes <= BOUND
        if bus.subscriber_count == 0:
            for j in range(3):  # later writes reach nobody
                body = {"content": f"after {j}"}
                await client.patch(f"/api/threads/{thread}/messages/{message}", json=body)
                assert bus.subscriber_count == 0
            return i + 1
    raise AssertionError("the subscriber was never cut off")


async def test_a_websocket_that_never_reads_is_unsubscribed_when_cut_off(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api(stream_settings(buffer_frames=1000, buffer_bytes=BOUND))
    thread = await api.thread()
    message = await exchange(api, thread, "hello")
    paused = await open_ws(api, thread, max_queue=1, compression=None)
    await recv(paused)  # the snapshot; then it stops reading
    assert api.runtime.events.subscriber_count == 1
    await patch_until_dropped(api, thread, message)
    frames: list[dict[str, Any]] = []
    try:  # reading again: the frames already on their way, then the error and the close
        while True:
            frames.append(await recv(paused, 30))
    except ConnectionClosed:
        pass
    assert frames[-1]["type"] == "error" and frames[-1]["code"] == "slow_consumer"
    assert paused.close_code == 4008


async def test_an_sse_response_that_is_never_read_is_unsubscribed_when_cut_off(
    make_api: Callable[..., Any],
) -> None:
    api: Api = await make_api(stream_settings(buffer_frames=1000, buffer_bytes=BOUND))
    thread = await api.thread()
    message = await exchange(api, thread, "hello")
    client = api.client(Accept="text/event-stream")
    async with client.stream("GET", f"/api/threads/{thread}/stream") as response:
        assert response.status_code == 200
        assert api.runtime.events.subscriber_count == 1
        await patch_until_dropped(api, thread, message)
        events: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                events.append(line.removeprefix("event: "))
    assert events[-1] == "error"
