"""The HTTP client against the real server (spec 11 §11.2, cases C11-025 to C11-028)."""

from __future__ import annotations

import asyncio
import email.utils
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from server.conftest import Api
from threadloom.client import (
    AsyncClient,
    BadRequestError,
    Client,
    NotFoundError,
    ThreadTerminatedError,
    TransportError,
)
from threadloom.client.errors import AuthenticationError, RateLimitError, error_from_response


async def test_c11_025_send_on_an_idle_echo_thread_then_list_shows_it(
    api: Api, client: AsyncClient
) -> None:
    created = await client.threads.create("echo")
    sent = await client.messages.send(created.thread_id, "hello there")
    assert uuid.UUID(sent.message_id).version == 4
    assert sent.duplicate is False
    assert sent.queue_id == sent.message_id
    await api.settle(created.thread_id)
    page = await client.messages.list(created.thread_id)
    by_id = {m.id: m for m in page.messages}
    assert by_id[sent.message_id].content == "hello there"
    assert by_id[sent.message_id].status == "completed"
    assert (by_id[sent.message_id].metadata or {})["client_message_id"]
    assert [m.content for m in page.messages] == ["hello there", "echo: hello there"]
    assert page.total == 2 and page.has_more is False and page.seq > 0
    assert client.last_response is not None and client.last_response.status_code == 200


async def test_c11_026_terminated_and_bad_request_errors_carry_the_body(
    client: AsyncClient,
) -> None:
    created = await client.threads.create("echo")
    terminated = await client.threads.terminate(created.thread_id)
    with pytest.raises(ThreadTerminatedError) as caught:
        await client.messages.send(created.thread_id, "too late")
    assert caught.value.status == 423
    assert caught.value.code == "thread_terminated"
    assert caught.value.terminated == terminated.terminated
    other = await client.threads.create("echo")
    with pytest.raises(BadRequestError) as bad:
        await client.threads.continue_(other.thread_id, side="c")
    assert bad.value.status == 400
    assert bad.value.code == "invalid_request"
    assert bad.value.message == "Side must be 'a' or 'b'"
    assert bad.value.details and all("field" in d for d in bad.value.details)
    page = await client.messages.list(created.thread_id)
    assert page.messages == []  # nothing stored by the refused send


class DropFirstPost(httpx.AsyncBaseTransport):
    """Forwards every request to the real server; the answer to the first POST of a message is
    thrown away and the connection reported dropped, as if it broke after sending."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.posts: list[bytes] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and request.url.path.endswith("/messages"):
            self.posts.append(request.content)
            if len(self.posts) == 1:
                await response.aread()
                await response.aclose()
                raise httpx.ReadError("connection dropped after sending", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_c11_027_a_dropped_send_is_retried_with_the_same_client_message_id(
    api: Api,
) -> None:
    transport = DropFirstPost()
    async with AsyncClient(api.base, token=api.keys["alice"], transport=transport) as client:
        created = await client.threads.create("echo")
        sent = await client.messages.send(created.thread_id, "once")
        assert len(transport.posts) == 2
        assert transport.posts[0] == transport.posts[1]  # same body, same client_message_id
        assert sent.duplicate is True
        await api.settle(created.thread_id)
        page = await client.messages.list(created.thread_id)
    users = [m for m in page.messages if m.role == "user"]
    assert [m.content for m in users] == ["once"]
    assert users[0].id == sent.message_id


async def test_c11_027_an_unsafe_call_is_not_retried_after_it_may_have_been_sent(
    api: Api,
) -> None:
    transport = DropFirstPost()
    async with AsyncClient(api.base, token=api.keys["alice"], transport=transport) as client:
        created = await client.threads.create("echo")
        with pytest.raises(TransportError) as caught:
            await client.messages.send(created.thread_id, "maybe", client_message_id=None)
        assert caught.value.maybe_sent is True
        assert len(transport.posts) == 1
        await api.settle(created.thread_id)
        page = await client.messages.list(created.thread_id)
    assert [m.content for m in page.messages if m.role == "user"] == ["maybe"]


async def test_c11_028_sync_and_async_clients_read_equal_pages(
    api: Api, client: AsyncClient
) -> None:
    created = await client.threads.create("echo")
    await client.messages.send(created.thread_id, "one")
    await api.settle(created.thread_id)
    await client.messages.send(created.thread_id, "two", silent=True)
    await api.settle(created.thread_id)
    async_page = await client.messages.list(created.thread_id, include_silent=True)

    def read() -> object:
        with Client(api.base, token=api.keys["alice"]) as sync:
            return sync.messages.list(created.thread_id, include_silent=True)

    sync_page = await asyncio.to_thread(read)
    assert sync_page == async_page
    assert len(async_page.messages) == 4


async def test_c11_http_catalog_detail_cost_and_ids_mode(api: Api, client: AsyncClient) -> None:
    agents = await client.catalog.agents()
    assert "echo" in {a.id for a in agents}
    created = await client.threads.create("echo", tags=["name:Demo"])
    sent = await client.messages.send(created.thread_id, "hi")
    await api.settle(created.thread_id)
    detail = await client.threads.get(created.thread_id)
    assert detail.status.state == "idle" and detail.seq > 0 and detail.terminated is None
    page = await client.messages.get(created.thread_id, [sent.message_id, "nope"])
    assert [m.id for m in page.messages] == [sent.message_id]
    cost = await client.threads.cost(created.thread_id)
    assert cost.total_cost >= 0
    listed = await client.threads.list(search="name:demo")
    assert [t.id for t in listed.threads] == [created.thread_id]
    tagged = await client.threads.list(tag="name:Demo")  # exact: case and whole tag
    assert [t.id for t in tagged.threads] == [created.thread_id]
    assert (await client.threads.list(tag="name:demo")).threads == []
    assert (await client.threads.list(tag="name:Dem")).threads == []
    assert await client.threads.subagents(created.thread_id) == []
    deleted = await client.messages.delete(created.thread_id, sent.message_id)
    assert deleted == [sent.message_id]
    with pytest.raises(NotFoundError) as missing:
        await client.threads.get(str(uuid.uuid4()))
    assert missing.value.code == "thread_not_found"
    health = await client.health()
    assert health.status == "ok"


async def test_c11_http_the_token_never_shows(api: Api) -> None:
    async with AsyncClient(api.base, token="tl_secret_value") as client:
        assert "tl_secret_value" not in repr(client)
        with pytest.raises(AuthenticationError) as caught:
            await client.threads.list()
    assert "tl_secret_value" not in str(caught.value)
    assert caught.value.code == "unauthorized"


class BusyFirstGet(httpx.AsyncBaseTransport):
    """Forwards to the real server; the first GET is answered 503 with ``Retry-After`` as
    an HTTP date (a proxy's way), without reaching the server."""

    def __init__(self, retry_after: str) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.retry_after = retry_after
        self.gets = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            self.gets += 1
            if self.gets == 1:
                headers = {"retry-after": self.retry_after}
                return httpx.Response(503, headers=headers, text="busy", request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_c11_047_retry_after_as_an_http_date(api: Api) -> None:
    """C11-047: ``Retry-After`` may be an HTTP date: a 503 GET is retried after it (a date
    just past: at once) and answers; a 429 with a date 30 s ahead gives ``retry_after``
    of about 30 s, one that cannot be read none."""
    past = email.utils.format_datetime(datetime.now(UTC) - timedelta(seconds=5), usegmt=True)
    transport = BusyFirstGet(past)
    async with AsyncClient(api.base, token=api.keys["alice"], transport=transport) as client:
        created = await client.threads.create("echo")
        detail = await client.threads.get(created.thread_id)
    assert detail.thread["id"] == created.thread_id
    assert transport.gets == 2
    ahead = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    request = httpx.Request("GET", "http://x/api/threads")
    for header, expected in ((ahead, (25.0, 30.0)), ("soon", None)):
        answer = httpx.Response(
            429, headers={"retry-after": header}, json={"error": "slow down"}, request=request
        )
        error = error_from_response(answer)
        assert isinstance(error, RateLimitError)
        if expected is None:
            assert error.retry_after is None
        else:
            assert error.retry_after is not None
            assert expected[0] <= error.retry_after <= expected[1]
