"""Executing calls (spec 11 §11.2.4–§11.2.5): one attempt after another until an answer, typed
errors from 4xx/5xx, and the retries a call allows. ``http.py`` builds the clients on these."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, ParamSpec, TypeVar

import httpx

from threadloom.client.calls import Batch, Call
from threadloom.client.errors import NotFoundError, TransportError, error_from_response
from threadloom.retry_after import seconds as retry_after_seconds

P = ParamSpec("P")
T = TypeVar("T")

BACKOFF = (0.5, 1.0)
RETRY_STATUSES = frozenset({502, 503, 504})


def _never_left(exc: httpx.TransportError) -> bool:
    """True when the request provably never reached the server."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.UnsupportedProtocol)


def _delay(attempt: int, response: httpx.Response | None) -> float:
    waited = retry_after_seconds(response.headers) if response is not None else None
    if waited is not None:
        return waited
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


class AsyncRunner:
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

    async def stream_bytes(
        self, call: Call[Any], chunk_size: int | None = None
    ) -> AsyncIterator[bytes]:
        """The answer's body, piece by piece. Retried like ``one`` until the first byte has
        been handed on; a break after that raises ``TransportError``."""
        state = _Attempt(call, self.max_retries)
        while True:
            started = False
            wait: float | None = None
            try:
                async with self.http.stream(call.method, call.path, params=call.params) as response:
                    self.last_response = response
                    if state.retry_status(response):
                        wait = _delay(state.attempt, response)
                    elif response.status_code >= 400:
                        await response.aread()
                        raise error_from_response(response)
                    else:
                        async for piece in response.aiter_bytes(chunk_size):
                            started = True
                            yield piece
                        return
            except httpx.TransportError as exc:
                if started or not state.retry_transport(exc):
                    raise _transport_error(exc) from exc
                wait = _delay(state.attempt, None)
            await asyncio.sleep(wait or 0)
            state.attempt += 1

    async def run(self, call: Call[T] | Batch[T]) -> T:
        if isinstance(call, Batch):
            return call.merge([await self.one(c) for c in call.calls])
        return await self.one(call)

    def wrap(self, builder: Callable[P, Call[T] | Batch[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        async def method(*args: P.args, **kwargs: P.kwargs) -> T:
            return await self.run(builder(*args, **kwargs))

        method.__name__ = builder.__name__
        method.__doc__ = builder.__doc__
        method.__wrapped__ = builder  # type: ignore[attr-defined]  # inspect.signature / help()
        return method


class SyncRunner:
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

    def stream_bytes(self, call: Call[Any], chunk_size: int | None = None) -> Iterator[bytes]:
        """The blocking twin of ``AsyncRunner.stream_bytes``."""
        state = _Attempt(call, self.max_retries)
        while True:
            started = False
            wait: float | None = None
            try:
                with self.http.stream(call.method, call.path, params=call.params) as response:
                    self.last_response = response
                    if state.retry_status(response):
                        wait = _delay(state.attempt, response)
                    elif response.status_code >= 400:
                        response.read()
                        raise error_from_response(response)
                    else:
                        for piece in response.iter_bytes(chunk_size):
                            started = True
                            yield piece
                        return
            except httpx.TransportError as exc:
                if started or not state.retry_transport(exc):
                    raise _transport_error(exc) from exc
                wait = _delay(state.attempt, None)
            time.sleep(wait or 0)
            state.attempt += 1

    def run(self, call: Call[T] | Batch[T]) -> T:
        if isinstance(call, Batch):
            return call.merge([self.one(c) for c in call.calls])
        return self.one(call)

    def wrap(self, builder: Callable[P, Call[T] | Batch[T]]) -> Callable[P, T]:
        def method(*args: P.args, **kwargs: P.kwargs) -> T:
            return self.run(builder(*args, **kwargs))

        method.__name__ = builder.__name__
        method.__doc__ = builder.__doc__
        method.__wrapped__ = builder  # type: ignore[attr-defined]  # inspect.signature / help()
        return method
