"""``ThreadSession`` against the real server (spec 11 §11.6, cases C11-031 to C11-033)."""

from __future__ import annotations

import asyncio

import httpx
from relay import Relay

from server.conftest import Api
from threadloom.client import AsyncClient
from threadloom.client.chat import Delivery, Outcome, Phase
from threadloom.client.reduce import ThreadView
from threadloom.thread.retention import EventRetention, prune_events


def settled(text: str):  # type: ignore[no-untyped-def]
    def done(view: ThreadView) -> bool:
        return (
            not view.running
            and any(m.text == text and m.delivery.is_complete for m in view.messages)
            and not view.queue
        )

    return done


async def test_c11_031_an_optimistic_send_goes_sending_queued_complete(
    api: Api, client: AsyncClient
) -> None:
    created = await client.threads.create("echo")
    thread = created.thread_id
    seen: list[ThreadView] = []
    async with client.session(thread) as session:
        session.subscribe(seen.append)
        sent = await session.send("hi")
        assert sent.key.startswith("local:")
        final = await session.wait_for(settled("echo: hi"))
    mine = [m for m in (v.by_key(sent.key) for v in seen) if m is not None]
    phases = [m.delivery.phase for m in mine]
    assert phases[0] is Phase.SENDING
    assert phases[1] in (Phase.QUEUED, Phase.COMPLETE)
    assert phases[-1] is Phase.COMPLETE
    user = final.by_key(sent.key)
    assert user is not None and user.delivery.outcome is Outcome.SUCCESS
    # send() returns the message as it stands after the POST: with its server id
    assert user.id == sent.id and not sent.id.startswith("local:")
    assert mine[0].id == sent.key
    reply = final.messages[-1]
    assert reply.role == "assistant" and reply.text == "echo: hi"
    assert reply.delivery.phase is Phase.COMPLETE and reply.delivery.outcome is Outcome.SUCCESS
    page = await client.messages.list(thread)
    assert [m.id for m in final.messages] == [m.id for m in page.messages]


async def prune_all_but_the_head(api: Api) -> None:
    """The replay-window pruner (spec 09 §9.6.1) with a window of one event: a pass leaves
    every thread only its two newest rows."""
    report = await prune_events(api.runtime.store, EventRetention(events=1), api.runtime.hub.clock)
    assert report.rows > 0


async def test_c11_032_a_resync_reloads_the_session_to_a_fresh_sessions_view(
    api: Api, client: AsyncClient
) -> None:
    created = await client.threads.create("echo")
    thread = created.thread_id
    async with Relay(api.base) as relay:
        remote = AsyncClient(api.base, token=api.keys["alice"], stream_url=relay.base)
        async with remote, remote.session(thread) as session:
            await session.send("one")
            await session.wait_for(settled("echo: one"))
            relay.gate.clear()
            await relay.close_clients(4008, "Slow consumer")
            await client.messages.send(thread, "two")  # while the session is away
            await api.settle(thread)
            await prune_all_but_the_head(api)  # the session's since is older than the window
            relay.gate.set()
            view = await session.wait_for(settled("echo: two"))
            assert session._stream is not None and session._stream.connections == 2
    async with client.session(thread) as fresh:
        expected = fresh.view

    # equal up to what only a live observer can know: keys of its own sends and the generation
    # name of replies it saw streaming
    def shape(v: ThreadView) -> list[tuple[object, ...]]:
        return [(m.id, m.role, m.text, m.delivery.phase, m.delivery.outcome) for m in v.messages]

    assert shape(view) == shape(expected) and len(view.messages) == 4
    assert (view.seq, view.status, view.terminated) == (
        expected.seq,
        expected.status,
        expected.terminated,
    )
    assert all(m.delivery == Delivery.static(m.id) for m in view.messages[2:])


class Recording(httpx.AsyncBaseTransport):
    """The real transport, with a log of requests; with ``refuse_posts`` a POST never leaves
    (a connection error before sending)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.methods: list[str] = []
        self.refuse_posts = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.methods.append(request.method)
        if self.refuse_posts and request.method == "POST":
            raise httpx.ConnectError("refused", request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_c11_033_check_status_is_read_only(api: Api, client: AsyncClient) -> None:
    created = await client.threads.create("echo")
    thread = created.thread_id
    recording = Recording()
    remote = AsyncClient(api.base, token=api.keys["alice"], transport=recording, max_retries=0)
    try:
        async with remote.session(thread) as session:
            recording.refuse_posts = True
            sent = await session.send("never arrived")
            failed = session.view.by_key(sent.key)
            assert failed is not None and failed.delivery.outcome is Outcome.ERROR
            assert session.view.error is not None and session.view.error.kind == "connection"
            assert session.view.error.recovery == "retry"
            recording.methods.clear()
            view = await session.check_status()
            assert recording.methods and set(recording.methods) == {"GET"}
            still = view.by_key(sent.key)
            assert still is not None and still.delivery.outcome is Outcome.ERROR  # not re-sent
            recording.refuse_posts = False
            retried = await session.retry(sent.key)  # same client_message_id
            assert retried.delivery.phase in (Phase.QUEUED, Phase.COMPLETE)
            await session.wait_for(settled("echo: never arrived"))
    finally:
        await remote.aclose()
    page = await client.messages.list(thread)
    assert [m.content for m in page.messages] == ["never arrived", "echo: never arrived"]
    assert (page.messages[0].metadata or {})["client_message_id"] == sent.key.removeprefix("local:")


async def test_a_socket_dropped_mid_run_reconnects_to_a_fresh_loads_view(
    api: Api, client: AsyncClient
) -> None:
    """The issue's stream check: the socket drops while a run is in flight (the model
    request held open) and a second message is queued meanwhile; after the reconnect the
    session's view equals a fresh load — no message twice, none missing. Closing the
    session at once must be prompt (it hung when the cancel met a frame arriving)."""
    created = await client.threads.create("gate")
    thread = created.thread_id
    loop = asyncio.get_running_loop()
    async with Relay(api.base) as relay, asyncio.timeout(30):
        remote = AsyncClient(api.base, token=api.keys["alice"], stream_url=relay.base)
        async with remote:
            async with remote.session(thread) as session:
                await session.send("one")
                await asyncio.wait_for(api.gate.entered.wait(), 10)  # the run is mid-request
                await relay.close_clients(1011, "dropped")
                await client.messages.send(thread, "two")  # queued while the socket is down
                api.gate.open()
                view = await session.wait_for(settled("echo: two"))
                assert session._stream is not None and session._stream.connections >= 2
                closing = loop.time()  # frames of the run's end may be arriving right now
            closed_in = loop.time() - closing
    assert closed_in < 5
    async with client.session(thread) as fresh:
        expected = fresh.view

    def shape(v: ThreadView) -> list[tuple[object, ...]]:
        return [(m.id, m.role, m.text, m.delivery.phase, m.delivery.outcome) for m in v.messages]

    ids = [m.id for m in view.messages]
    assert len(ids) == len(set(ids)) == 4
    assert [m.text for m in view.messages] == ["one", "echo: one", "two", "echo: two"]
    assert shape(view) == shape(expected)


async def test_views_end_when_the_session_is_closed(api: Api, client: AsyncClient) -> None:
    """A consumer iterating ``views()`` is released by ``aclose()`` (it used to wait
    forever: a cancelled reader leaves ``closed`` unset)."""
    created = await client.threads.create("echo")
    session = client.session(created.thread_id)
    await session.__aenter__()
    seen: list[ThreadView] = []

    async def consume() -> None:
        async for view in session.views():
            seen.append(view)

    consumer = asyncio.create_task(consume())
    await asyncio.sleep(0.05)
    await session.aclose()
    await asyncio.wait_for(consumer, 5)
    assert consumer.done() and seen and seen[0].thread_id == created.thread_id
