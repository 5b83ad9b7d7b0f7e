"""``Client.session``: the blocking ``SyncThreadSession`` (spec 11 §11.6.5) against the real
server. The server runs on the test's event loop, so each blocking body runs in a thread."""

from __future__ import annotations

import asyncio
import itertools
import threading

import httpx
import pytest
from relay import Relay
from test_c11_session import prune_all_but_the_head
from test_client_files import png_1x1

from server.conftest import Api
from threadloom.client import (
    AsyncClient,
    Client,
    StreamClosed,
    SyncThreadSession,
    ThreadDeletedError,
    Upload,
)
from threadloom.client.chat import Delivery, ImageBlock, Outcome, Phase
from threadloom.client.reduce import ThreadView
from threadloom.records import AttachmentRef


def settled(text: str):  # type: ignore[no-untyped-def]
    def done(view: ThreadView) -> bool:
        return (
            not view.running
            and any(m.text == text and m.delivery.is_complete for m in view.messages)
            and not view.queue
        )

    return done


async def test_a_sync_send_goes_sending_then_complete_with_the_reply(
    api: Api, client: AsyncClient
) -> None:
    thread = (await client.threads.create("echo")).thread_id
    seen: list[ThreadView] = []
    iterated: list[ThreadView] = []

    def chat() -> tuple[str, str, ThreadView, ThreadView]:
        with Client(api.base, token=api.keys["alice"]) as sync:
            with sync.session(thread) as session:
                assert isinstance(session, SyncThreadSession)
                unsubscribe = session.subscribe(seen.append)
                reader = threading.Thread(target=lambda: iterated.extend(session.views()))
                reader.start()
                sent = session.send("hi")
                final = session.wait_for(settled("echo: hi"))
                unsubscribe()
            reader.join(timeout=5)  # views() ends when the session closes
            assert not reader.is_alive()
            with sync.session(thread) as fresh:
                reloaded = fresh.view
        return sent.key, sent.id, final, reloaded

    key, sent_id, final, reloaded = await asyncio.to_thread(chat)
    mine = [m for m in (v.by_key(key) for v in seen) if m is not None]
    assert mine[0].delivery.phase is Phase.SENDING and mine[0].id == key
    assert mine[1].delivery.phase in (Phase.QUEUED, Phase.COMPLETE)
    user = final.by_key(key)
    assert user is not None and user.delivery.outcome is Outcome.SUCCESS and user.id == sent_id
    reply = final.messages[-1]
    assert reply.role == "assistant" and reply.text == "echo: hi"
    assert reply.delivery.outcome is Outcome.SUCCESS
    page = await client.messages.list(thread)
    assert [m.id for m in final.messages] == [m.id for m in page.messages]
    assert [m.id for m in reloaded.messages] == [m.id for m in final.messages]
    # the reader saw views in order, each one distinct, ending with a settled one
    assert iterated and all(a is not b for a, b in itertools.pairwise(iterated))
    assert settled("echo: hi")(iterated[-1])


class Flaky(httpx.BaseTransport):
    """The real server behind a switch that fails every POST before it leaves; records calls."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.down = True
        self.calls: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls.append((request.method, request.url.path))
        if self.down and request.method == "POST":
            raise httpx.ConnectError("network down", request=request)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


async def test_a_sync_send_lost_in_transport_is_checked_read_only_then_retried_once(
    api: Api, client: AsyncClient
) -> None:
    thread = (await client.threads.create("echo")).thread_id
    transport = Flaky()

    def chat() -> tuple[str, ThreadView, ThreadView, list[tuple[str, str]]]:
        with (
            Client(api.base, token=api.keys["alice"], transport=transport, max_retries=0) as sync,
            sync.session(thread) as session,
        ):
            failed = session.send("lost")
            assert failed.delivery.outcome is Outcome.ERROR
            assert session.view.error is not None and session.view.error.kind == "connection"
            before = len(transport.calls)
            checked = session.check_status()
            during_check = transport.calls[before:]
            transport.down = False
            session.retry(failed.key)
            final = session.wait_for(settled("echo: lost"))
        return failed.key, checked, final, during_check

    key, checked, final, during_check = await asyncio.to_thread(chat)
    assert during_check and all(method == "GET" for method, _ in during_check)
    assert checked.error is not None  # not found on the server: still in doubt
    message = final.by_key(key)
    assert message is not None and message.delivery.outcome is Outcome.SUCCESS
    page = await client.messages.list(thread)
    assert [m.content for m in page.messages if m.role == "user"] == ["lost"]


async def test_a_sync_session_builds_attachment_urls_and_ends_on_delete(
    api: Api, client: AsyncClient
) -> None:
    thread = (await client.threads.create("echo")).thread_id

    def cdn(thread_id: str, ref: AttachmentRef) -> str:
        return f"https://cdn.example/{thread_id}/{ref.id}"

    stored = threading.Event()

    def chat() -> tuple[ThreadView, BaseException | None]:
        with (
            Client(api.base, token=api.keys["alice"]) as sync,
            sync.session(thread, attachment_url=cdn) as session,
        ):
            sent = session.send("look", attachments=[Upload("d.png", "image/png", png_1x1())])
            final = session.wait_for(settled("echo: look"))
            assert final.by_key(sent.key) is not None
            stored.set()
            with pytest.raises(StreamClosed):  # the delete ends the session's stream
                session.wait_for(lambda v: False, timeout=10)
            return final, session.closed

    task = asyncio.create_task(asyncio.to_thread(chat))
    assert await asyncio.to_thread(stored.wait, 10)
    await client.threads.delete(thread)
    final, closed = await task
    message = next(m for m in final.messages if m.role == "user")
    assert isinstance(message.content, tuple)
    image = message.content[1]
    assert isinstance(image, ImageBlock)
    assert image.url == f"https://cdn.example/{thread}/{message.attachments[0].id}"
    assert isinstance(closed, ThreadDeletedError)


async def test_a_sync_session_resyncs_to_a_fresh_sessions_view(
    api: Api, client: AsyncClient
) -> None:
    """As C11-032, on the blocking session: after a reconnect whose ``since`` is older than the
    replay window, the server sends ``resync`` and the session reloads."""
    thread = (await client.threads.create("echo")).thread_id
    first_done, resumed = threading.Event(), threading.Event()
    async with Relay(api.base) as relay:

        def chat() -> tuple[ThreadView, int]:
            with (
                Client(api.base, token=api.keys["alice"], stream_url=relay.base) as sync,
                sync.session(thread) as session,
            ):
                session.send("one")
                session.wait_for(settled("echo: one"))
                first_done.set()
                assert resumed.wait(10)
                view = session.wait_for(settled("echo: two"))
                assert session._stream is not None
                return view, session._stream.connections

        task = asyncio.create_task(asyncio.to_thread(chat))
        assert await asyncio.to_thread(first_done.wait, 10)
        relay.gate.clear()
        await relay.close_clients(4008, "Slow consumer")
        await client.messages.send(thread, "two")  # while the session is away
        await api.settle(thread)
        await prune_all_but_the_head(api)  # the session's since is older than the window
        relay.gate.set()
        resumed.set()
        view, connections = await task

    def load() -> ThreadView:
        with Client(api.base, token=api.keys["alice"]) as sync, sync.session(thread) as fresh:
            return fresh.view

    expected = await asyncio.to_thread(load)

    def shape(v: ThreadView) -> list[tuple[object, ...]]:
        return [(m.id, m.role, m.text, m.delivery.phase, m.delivery.outcome) for m in v.messages]

    assert connections == 2
    assert shape(view) == shape(expected) and len(view.messages) == 4
    assert (view.seq, view.status) == (expected.seq, expected.status)
    assert all(m.delivery == Delivery.static(m.id) for m in view.messages[2:])
