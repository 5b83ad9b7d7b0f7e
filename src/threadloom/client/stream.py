"""``ThreadStream``: the stream subscriber of spec 09 that hides disconnections
(spec 11 §11.5.1–§11.5.2). Frames are typed (``threadloom.client.frames``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import quote, urlencode

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection as SyncConnection
from websockets.sync.client import connect as sync_connect

from threadloom.client.errors import (
    APIError,
    AuthenticationError,
    NotFoundError,
    PermissionDeniedError,
    StreamClosed,
    ThreadDeletedError,
    ThreadloomError,
    TransportError,
)
from threadloom.client.frames import (
    Frame,
    HeartbeatFrame,
    ResyncFrame,
    ThreadStatusFrame,
    parse_frame,
)

__all__ = [
    "Frame",
    "HeartbeatFrame",
    "ResyncFrame",
    "StreamState",
    "SyncThreadStream",
    "ThreadStream",
]

StreamState = Literal["connecting", "open", "reconnecting", "closed"]

SILENCE_S = 45.0
"""A connection that sent nothing (not even a heartbeat) for this long is dropped."""
BACKOFF_START_S = 0.5
BACKOFF_CAP_S = 30.0
STABLE_S = 60.0
RECONNECT_CODES = frozenset({1001, 1006, 1011, 4008})

_HANDSHAKE_ERRORS: dict[int, type[APIError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
}


def ws_url(base_url: str, thread_id: str, params: Mapping[str, Any]) -> str:
    base = base_url.rstrip("/")
    if base.startswith("https://"):
        base = "wss://" + base.removeprefix("https://")
    elif base.startswith("http://"):
        base = "ws://" + base.removeprefix("http://")
    query = urlencode(params)
    return f"{base}/api/threads/{quote(thread_id, safe='')}/stream" + (f"?{query}" if query else "")


def _handshake_error(status: int, body: bytes) -> APIError:
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    cls = _HANDSHAKE_ERRORS.get(status, APIError)
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        code = parsed.get("code") if isinstance(parsed.get("code"), str) else "unknown"
        details = parsed.get("details") if isinstance(parsed.get("details"), list) else []
        return cls(status, str(code), parsed["error"], details, body=parsed)
    return cls(status, "unknown", body.decode("utf-8", "replace"), [])


class ThreadStream:
    """An async iterator of typed frames over reconnections (spec 11 §11.5)."""

    def __init__(
        self,
        base_url: str,
        thread_id: str,
        *,
        headers: Mapping[str, str] | None = None,
        include_silent: bool = False,
        depth: int = 0,
        reasoning: bool = True,
        logs: bool = False,
        since: int | None = None,
        reconnect: bool = True,
        on_state: Callable[[StreamState], None] | None = None,
        silence_s: float = SILENCE_S,
    ) -> None:
        self.base_url = base_url
        self.thread_id = thread_id
        self._headers = dict(headers or {})
        self._params: dict[str, Any] = {
            "includeSilent": "true" if include_silent else "false",
            "depth": depth,
            "reasoning": "true" if reasoning else "false",
            "logs": "true" if logs else "false",
        }
        self.last_seq: int | None = since
        """Highest durable ``seq`` delivered to the consumer (the initial ``since`` before)."""
        self.reconnect = reconnect
        self.on_state = on_state
        self.silence_s = silence_s
        self.state: StreamState = "connecting"
        self.connections = 0
        """How many connections were opened (1 + reconnects)."""
        self._ws: ClientConnection | None = None
        self._opened_at = 0.0
        self._backoff = BACKOFF_START_S
        self._auth_retried = False
        self._final: BaseException | None = None

    def _set_state(self, state: StreamState) -> None:
        if state != self.state:
            self.state = state
            if self.on_state is not None:
                self.on_state(state)

    async def _open(self) -> None:
        params = dict(self._params)
        if self.last_seq is not None:
            params["since"] = self.last_seq
        url = ws_url(self.base_url, self.thread_id, params)
        try:
            self._ws = await connect(url, additional_headers=self._headers, open_timeout=10)
        except InvalidStatus as exc:
            raise _handshake_error(
                exc.response.status_code, bytes(exc.response.body or b"")
            ) from exc
        self.connections += 1
        self._opened_at = time.monotonic()
        self._set_state("open")

    async def _connect_with_retries(self) -> None:
        while True:
            try:
                await self._open()
                return
            except APIError:
                raise
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                if not self.reconnect:
                    raise TransportError(str(exc), maybe_sent=True) from exc
                self._set_state("reconnecting")
                await self._sleep_backoff()

    async def _sleep_backoff(self) -> None:
        await asyncio.sleep(self._backoff * random.uniform(0.75, 1.25))
        self._backoff = min(self._backoff * 2, BACKOFF_CAP_S)

    async def __aenter__(self) -> Self:
        await self._connect_with_retries()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
            self._ws = None
        self._set_state("closed")

    def __aiter__(self) -> Self:
        return self

    async def _lost(self, code: int, reason: str) -> None:
        """A connection ended: decide between reconnecting and stopping for good."""
        self._ws = None
        if time.monotonic() - self._opened_at >= STABLE_S:
            self._backoff = BACKOFF_START_S
        if code == 1000:
            raise ThreadDeletedError(code, reason)
        if code == 4001:
            if self._auth_retried or not self.reconnect:
                raise AuthenticationError(401, "unauthorized", reason or "Credentials expired")
            self._auth_retried = True
        elif 4400 <= code <= 4429:
            error = _HANDSHAKE_ERRORS.get(code - 4000, APIError)
            raise error(code - 4000, "handshake_refused", reason)
        elif code not in RECONNECT_CODES or not self.reconnect:
            raise StreamClosed(code, reason)
        self._set_state("reconnecting")
        if code != 1001:
            await self._sleep_backoff()
        await self._connect_with_retries()

    async def __anext__(self) -> Frame:
        if self._final is not None or self.state == "closed":
            raise StopAsyncIteration
        while True:
            if self._ws is None:
                await self._connect_with_retries()
            ws = self._ws
            assert ws is not None
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that
                # meets a frame arriving, and then waits for its inner task (close hangs)
                async with asyncio.timeout(self.silence_s):
                    raw = await ws.recv()
            except TimeoutError:
                with contextlib.suppress(Exception):
                    await ws.close()
                await self._lost(1006, "no frame received")
                continue
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else 1006
                reason = exc.rcvd.reason if exc.rcvd is not None else ""
                try:
                    await self._lost(code, reason)
                except BaseException as final:
                    self._final = final
                    self._set_state("closed")
                    raise
                continue
            try:
                decoded = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(decoded, dict):
                continue
            frame = parse_frame(decoded)
            if isinstance(frame, ThreadStatusFrame) and frame.snapshot:
                return frame
            if frame.durable:
                if self.last_seq is not None and frame.seq <= self.last_seq:
                    continue  # already delivered (a duplicate after a reconnect)
                self.last_seq = frame.seq
            return frame


class SyncThreadStream:
    """The blocking twin of ``ThreadStream`` (``websockets.sync.client``); same rules."""

    def __init__(
        self,
        base_url: str,
        thread_id: str,
        *,
        headers: Mapping[str, str] | None = None,
        include_silent: bool = False,
        depth: int = 0,
        reasoning: bool = True,
        logs: bool = False,
        since: int | None = None,
        reconnect: bool = True,
        on_state: Callable[[StreamState], None] | None = None,
        silence_s: float = SILENCE_S,
    ) -> None:
        self.base_url = base_url
        self.thread_id = thread_id
        self._headers = dict(headers or {})
        self._params: dict[str, Any] = {
            "includeSilent": "true" if include_silent else "false",
            "depth": depth,
            "reasoning": "true" if reasoning else "false",
            "logs": "true" if logs else "false",
        }
        self.last_seq: int | None = since
        self.reconnect = reconnect
        self.on_state = on_state
        self.silence_s = silence_s
        self.state: StreamState = "connecting"
        self.connections = 0
        self._ws: SyncConnection | None = None
        self._backoff = BACKOFF_START_S
        self._auth_retried = False
        self._closing = False
        """``close()`` was called (maybe from another thread): iteration ends, no reconnect."""

    def _set_state(self, state: StreamState) -> None:
        if state != self.state:
            self.state = state
            if self.on_state is not None:
                self.on_state(state)

    def _open(self) -> None:
        params = dict(self._params)
        if self.last_seq is not None:
            params["since"] = self.last_seq
        url = ws_url(self.base_url, self.thread_id, params)
        while True:
            try:
                connection = sync_connect(url, additional_headers=self._headers, open_timeout=10)
                # entered as a context manager (websockets 17.1 deprecates a bare connect());
                # close() ends it
                self._ws = connection.__enter__()
                break
            except InvalidStatus as exc:
                body = bytes(exc.response.body or b"")
                raise _handshake_error(exc.response.status_code, body) from exc
            except (OSError, InvalidHandshake, TimeoutError) as exc:
                if not self.reconnect or self._closing:
                    raise TransportError(str(exc), maybe_sent=True) from exc
                self._set_state("reconnecting")
                time.sleep(self._backoff * random.uniform(0.75, 1.25))
                self._backoff = min(self._backoff * 2, BACKOFF_CAP_S)
        self.connections += 1
        self._set_state("open")

    def __enter__(self) -> Self:
        self._open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Ends the stream; safe from another thread while one iterates (which then stops)."""
        self._closing = True
        if self._ws is not None:
            with contextlib.suppress(Exception):
                self._ws.close()
            self._ws = None
        self._set_state("closed")

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Frame:
        if self.state == "closed" or self._closing:
            raise StopIteration
        while True:
            if self._ws is None:
                self._open()
            ws = self._ws
            assert ws is not None
            try:
                raw = ws.recv(timeout=self.silence_s)
            except TimeoutError:
                with contextlib.suppress(Exception):
                    ws.close()
                code, reason = 1006, "no frame received"
            except ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd is not None else 1006
                reason = exc.rcvd.reason if exc.rcvd is not None else ""
            else:
                if self._closing:
                    raise StopIteration
                try:
                    decoded = json.loads(raw)
                except ValueError:
                    continue
                if not isinstance(decoded, dict):
                    continue
                frame = parse_frame(decoded)
                if isinstance(frame, ThreadStatusFrame) and frame.snapshot:
                    return frame
                if frame.durable:
                    if self.last_seq is not None and frame.seq <= self.last_seq:
                        continue
                    self.last_seq = frame.seq
                return frame
            self._ws = None
            if self._closing:
                self._set_state("closed")
                raise StopIteration
            final: ThreadloomError | None = None
            if code == 1000:
                final = ThreadDeletedError(code, reason)
            elif code == 4001 and self.reconnect and not self._auth_retried:
                self._auth_retried = True
            elif code == 4001:
                final = AuthenticationError(401, "unauthorized", reason or "Credentials expired")
            elif code not in RECONNECT_CODES or not self.reconnect:
                final = StreamClosed(code, reason)
            if final is not None:
                self._set_state("closed")
                raise final
            self._set_state("reconnecting")
            if code != 1001:
                time.sleep(self._backoff * random.uniform(0.75, 1.25))
                self._backoff = min(self._backoff * 2, BACKOFF_CAP_S)
