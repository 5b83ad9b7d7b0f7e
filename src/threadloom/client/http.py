"""``AsyncClient`` (httpx.AsyncClient) and ``Client`` (httpx.Client): thin executors of the
calls built by ``endpoints.py`` (spec 11 §11.2), with typed errors and the retries of §11.2.5.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from types import TracebackType
from typing import Any, ParamSpec, Self, TypeVar

import httpx

from threadloom.client import endpoints as ep
from threadloom.client.endpoints import ROUTES, Batch, Call
from threadloom.client.errors import APIError, NotFoundError, TransportError, error_from_response
from threadloom.client.session import ThreadSession
from threadloom.client.stream import StreamState, SyncThreadStream, ThreadStream
from threadloom.records import Message

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
BACKOFF = (0.5, 1.0)
RETRY_STATUSES = frozenset({502, 503, 504})


def _never_left(exc: httpx.TransportError) -> bool:
    """True when the request provably never reached the server."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.UnsupportedProtocol)


def _delay(attempt: int, response: httpx.Response | None) -> float:
    if response is not None:
        header = response.headers.get("retry-after")
        if header is not None:
            try:
                return max(0.0, float(header))
            except ValueError:
                pass
    base = BACKOFF[min(attempt, len(BACKOFF) - 1)]
    return base * random.uniform(0.75, 1.25)


class _Attempt:
    """What one attempt of a call gave, and whether another is due (spec 11 §11.2.5)."""

    def __init__(self, call: Call[Any], max_retries: int) -> None:
        self.call = call
        self.max_retries = max_retries
        self.attempt = 0

    def retry_transport(self, exc: httpx.TransportError) -> bool:
        if self.attempt >= self.max_retries:
            return False
        return _never_left(exc) or self.call.retry == "safe"

    def retry_status(self, response: httpx.Response) -> bool:
        if self.attempt >= self.max_retries:
            return False
        return response.status_code in RETRY_STATUSES and self.call.retry == "safe"

    def result(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            error = error_from_response(response)
            if (
                isinstance(error, NotFoundError)
                and self.attempt > 0
                and self.call.missing_ok is not None
                and error.code != "thread_not_found"
            ):
                return self.call.missing_ok()
            raise error
        return self.call.parse(response)


def _transport_error(exc: httpx.TransportError) -> TransportError:
    return TransportError(f"{type(exc).__name__}: {exc}", maybe_sent=not _never_left(exc))


def _settings(
    base_url: str | None, token: str | None, headers: Mapping[str, str] | None
) -> tuple[str, dict[str, str]]:
    url = base_url or os.environ.get("THREADLOOM_URL") or DEFAULT_URL
    credential = token if token is not None else os.environ.get("THREADLOOM_TOKEN")
    all_headers = dict(headers or {})
    if credential:
        all_headers["Authorization"] = f"Bearer {credential}"
    return url, all_headers


class _AsyncRunner:
    def __init__(self, http: httpx.AsyncClient, max_retries: int) -> None:
        self.http = http
        self.max_retries = max_retries
        self.last_response: httpx.Response | None = None

    async def one(self, call: Call[T]) -> T:
        state = _Attempt(call, self.max_retries)
        while True:
            try:
                response = await self.http.request(
                    call.method, call.path, params=call.params, json=call.json
                )
            except httpx.TransportError as exc:
                if not state.retry_transport(exc):
                    raise _transport_error(exc) from exc
                await asyncio.sleep(_delay(state.attempt, None))
                state.attempt += 1
                continue
            self.last_response = response
            if state.retry_status(response):
                await asyncio.sleep(_delay(state.attempt, response))
                state.attempt += 1
                continue
            result: T = state.result(response)
            return result

    async def run(self, call: Call[T] | Batch[T]) -> T:
        if isinstance(call, Batch):
            return call.merge([await self.one(c) for c in call.calls])
        return await self.one(call)

    def wrap(self, builder: Callable[P, Call[T] | Batch[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        async def method(*args: P.args, **kwargs: P.kwargs) -> T:
            return await self.run(builder(*args, **kwargs))

        method.__name__ = builder.__name__
        method.__doc__ = builder.__doc__
        return method


class _SyncRunner:
    def __init__(self, http: httpx.Client, max_retries: int) -> None:
        self.http = http
        self.max_retries = max_retries
        self.last_response: httpx.Response | None = None

    def one(self, call: Call[T]) -> T:
        state = _Attempt(call, self.max_retries)
        while True:
            try:
                response = self.http.request(
                    call.method, call.path, params=call.params, json=call.json
                )
            except httpx.TransportError as exc:
                if not state.retry_transport(exc):
                    raise _transport_error(exc) from exc
                time.sleep(_delay(state.attempt, None))
                state.attempt += 1
                continue
            self.last_response = response
            if state.retry_status(response):
                time.sleep(_delay(state.attempt, response))
                state.attempt += 1
                continue
            result: T = state.result(response)
            return result

    def run(self, call: Call[T] | Batch[T]) -> T:
        if isinstance(call, Batch):
            return call.merge([self.one(c) for c in call.calls])
        return self.one(call)

    def wrap(self, builder: Callable[P, Call[T] | Batch[T]]) -> Callable[P, T]:
        def method(*args: P.args, **kwargs: P.kwargs) -> T:
            return self.run(builder(*args, **kwargs))

        method.__name__ = builder.__name__
        method.__doc__ = builder.__doc__
        return method


class AsyncThreads:
    def __init__(self, run: _AsyncRunner) -> None:
        b = ROUTES.threads
        self._run = run
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.get = run.wrap(b.get)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)
        self.owners = run.wrap(b.owners)
        self.continue_ = run.wrap(b.continue_)
        self.stop = run.wrap(b.stop)
        self.terminate = run.wrap(b.terminate)
        self.cost = run.wrap(b.cost)
        self.subagents = run.wrap(b.subagents)

    async def iterate(self, *, page_size: int = 100, **filters: Any) -> AsyncIterator[Any]:
        """Every thread matching ``filters``, page by page."""
        offset = 0
        while True:
            page = await self.list(limit=page_size, offset=offset, **filters)
            for item in page.threads:
                yield item
            offset += len(page.threads)
            if not page.has_more or not page.threads:
                return


class AsyncMessages:
    def __init__(self, run: _AsyncRunner) -> None:
        b = ROUTES.messages
        self.list = run.wrap(b.list)
        self.get = run.wrap(b.get)
        self.send = run.wrap(b.send)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)

    async def iterate(
        self, thread_id: str, *, page_size: int = 100, include_silent: bool = False, depth: int = 0
    ) -> AsyncIterator[Message]:
        """Every message, oldest first (stable while the thread only grows at the end)."""
        offset = 0
        while True:
            page = await self.list(
                thread_id,
                limit=page_size,
                offset=offset,
                order="asc",
                include_silent=include_silent,
                depth=depth,
            )
            for record in page.messages:
                yield record
            offset += len(page.messages)
            if not page.has_more or not page.messages:
                return


class AsyncLogs:
    def __init__(self, run: _AsyncRunner) -> None:
        self.list = run.wrap(ROUTES.logs.list)
        self.get = run.wrap(ROUTES.logs.get)


class AsyncFiles:
    def __init__(self, run: _AsyncRunner) -> None:
        b = ROUTES.files
        self.list = run.wrap(b.list)
        self.stats = run.wrap(b.stats)
        self.find = run.wrap(b.find)
        self.grep = run.wrap(b.grep)
        self.read = run.wrap(b.read)
        self.info = run.wrap(b.info)
        self.thumbnail = run.wrap(b.thumbnail)
        self.write = run.wrap(b.write)
        self.mkdir = run.wrap(b.mkdir)
        self.move = run.wrap(b.move)
        self.rename = run.wrap(b.rename)
        self.delete = run.wrap(b.delete)


class AsyncCatalog:
    def __init__(self, run: _AsyncRunner) -> None:
        b = ROUTES.catalog
        self.agents = run.wrap(b.agents)
        self.prompts = run.wrap(b.prompts)
        self.tools = run.wrap(b.tools)
        self.models = run.wrap(b.models)
        self.hooks = run.wrap(b.hooks)


class AsyncAuth:
    def __init__(self, run: _AsyncRunner) -> None:
        self.me = run.wrap(ROUTES.auth.me)
        self.config = run.wrap(ROUTES.auth.config)


class AsyncClient:
    """The async HTTP client of spec 11 §11.2."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        stream_url: str | None = None,
    ) -> None:
        url, all_headers = _settings(base_url, token, headers)
        self.base_url = url
        self.stream_url = stream_url or url
        """Where stream sockets connect (default ``base_url``; e.g. a separate WS gateway)."""
        self._headers = all_headers
        self._http = httpx.AsyncClient(
            base_url=url, headers=all_headers, timeout=timeout, transport=transport
        )
        self._run = _AsyncRunner(self._http, max_retries)
        self.threads = AsyncThreads(self._run)
        self.messages = AsyncMessages(self._run)
        self.logs = AsyncLogs(self._run)
        self.files = AsyncFiles(self._run)
        self.catalog = AsyncCatalog(self._run)
        self.auth = AsyncAuth(self._run)
        self.health = self._run.wrap(ep.health)

    @property
    def last_response(self) -> httpx.Response | None:
        """The raw answer of the last call (debugging)."""
        return self._run.last_response

    def stream(
        self,
        thread_id: str,
        *,
        include_silent: bool = False,
        depth: int = 0,
        reasoning: bool = True,
        logs: bool = False,
        since: int | None = None,
        reconnect: bool = True,
        on_state: Callable[[StreamState], None] | None = None,
    ) -> ThreadStream:
        """The thread's stream (spec 09), resuming after ``since``; use with ``async with``."""
        return ThreadStream(
            self.stream_url,
            thread_id,
            headers=self._headers,
            include_silent=include_silent,
            depth=depth,
            reasoning=reasoning,
            logs=logs,
            since=since,
            reconnect=reconnect,
            on_state=on_state,
        )

    def session(
        self,
        thread_id: str,
        *,
        depth: int = 0,
        page_size: int = 100,
        reasoning: bool = True,
        logs: bool = False,
    ) -> ThreadSession:
        """Load + stream + reducer for one thread (spec 11 §11.6); use with ``async with``."""
        return ThreadSession(
            self, thread_id, depth=depth, page_size=page_size, reasoning=reasoning, logs=logs
        )

    def __repr__(self) -> str:  # never the token
        return f"AsyncClient(base_url={self.base_url!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class SyncThreads:
    def __init__(self, run: _SyncRunner) -> None:
        b = ROUTES.threads
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.get = run.wrap(b.get)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)
        self.owners = run.wrap(b.owners)
        self.continue_ = run.wrap(b.continue_)
        self.stop = run.wrap(b.stop)
        self.terminate = run.wrap(b.terminate)
        self.cost = run.wrap(b.cost)
        self.subagents = run.wrap(b.subagents)


class SyncMessages:
    def __init__(self, run: _SyncRunner) -> None:
        b = ROUTES.messages
        self.list = run.wrap(b.list)
        self.get = run.wrap(b.get)
        self.send = run.wrap(b.send)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)


class SyncLogs:
    def __init__(self, run: _SyncRunner) -> None:
        self.list = run.wrap(ROUTES.logs.list)
        self.get = run.wrap(ROUTES.logs.get)


class SyncFiles:
    def __init__(self, run: _SyncRunner) -> None:
        b = ROUTES.files
        self.list = run.wrap(b.list)
        self.stats = run.wrap(b.stats)
        self.find = run.wrap(b.find)
        self.grep = run.wrap(b.grep)
        self.read = run.wrap(b.read)
        self.info = run.wrap(b.info)
        self.thumbnail = run.wrap(b.thumbnail)
        self.write = run.wrap(b.write)
        self.mkdir = run.wrap(b.mkdir)
        self.move = run.wrap(b.move)
        self.rename = run.wrap(b.rename)
        self.delete = run.wrap(b.delete)


class SyncCatalog:
    def __init__(self, run: _SyncRunner) -> None:
        b = ROUTES.catalog
        self.agents = run.wrap(b.agents)
        self.prompts = run.wrap(b.prompts)
        self.tools = run.wrap(b.tools)
        self.models = run.wrap(b.models)
        self.hooks = run.wrap(b.hooks)


class SyncAuth:
    def __init__(self, run: _SyncRunner) -> None:
        self.me = run.wrap(ROUTES.auth.me)
        self.config = run.wrap(ROUTES.auth.config)


class Client:
    """The blocking HTTP client: the same methods as ``AsyncClient``, without ``async``."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        url, all_headers = _settings(base_url, token, headers)
        self.base_url = url
        self._headers = all_headers
        self._http = httpx.Client(
            base_url=url, headers=all_headers, timeout=timeout, transport=transport
        )
        self._run = _SyncRunner(self._http, max_retries)
        self.threads = SyncThreads(self._run)
        self.messages = SyncMessages(self._run)
        self.logs = SyncLogs(self._run)
        self.files = SyncFiles(self._run)
        self.catalog = SyncCatalog(self._run)
        self.auth = SyncAuth(self._run)
        self.health = self._run.wrap(ep.health)

    @property
    def last_response(self) -> httpx.Response | None:
        return self._run.last_response

    def stream(
        self,
        thread_id: str,
        *,
        include_silent: bool = False,
        depth: int = 0,
        reasoning: bool = True,
        logs: bool = False,
        since: int | None = None,
        reconnect: bool = True,
    ) -> SyncThreadStream:
        """The thread's stream as a blocking iterator; use with ``with``."""
        return SyncThreadStream(
            self.base_url,
            thread_id,
            headers=self._headers,
            include_silent=include_silent,
            depth=depth,
            reasoning=reasoning,
            logs=logs,
            since=since,
            reconnect=reconnect,
        )

    def __repr__(self) -> str:
        return f"Client(base_url={self.base_url!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = ["APIError", "AsyncClient", "Client"]
