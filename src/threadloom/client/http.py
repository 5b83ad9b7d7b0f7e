"""``AsyncClient`` (httpx.AsyncClient) and ``Client`` (httpx.Client): thin executors of the
calls built by ``endpoints.py`` (spec 11 §11.2), with typed errors and the retries of §11.2.5.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, Self

import httpx

from threadloom.client import endpoints as ep
from threadloom.client.chat import AttachmentUrl
from threadloom.client.endpoints import ROUTES
from threadloom.client.errors import APIError
from threadloom.client.models import LoginResult
from threadloom.client.runner import AsyncRunner, SyncRunner
from threadloom.client.session import ThreadSession
from threadloom.client.session_sync import SyncThreadSession
from threadloom.client.stream import StreamState, SyncThreadStream, ThreadStream
from threadloom.records import Message

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)


def _settings(
    base_url: str | None, token: str | None, headers: Mapping[str, str] | None
) -> tuple[str, dict[str, str]]:
    url = base_url or os.environ.get("THREADLOOM_URL") or DEFAULT_URL
    credential = token if token is not None else os.environ.get("THREADLOOM_TOKEN")
    all_headers = dict(headers or {})
    if credential:
        all_headers["Authorization"] = f"Bearer {credential}"
    return url, all_headers


class AsyncThreads:
    def __init__(self, run: AsyncRunner) -> None:
        b = ROUTES.threads
        self._run = run
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.get = run.wrap(b.get)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)
        self.export = run.wrap(b.export)
        self.import_ = run.wrap(b.import_)
        self.owners = run.wrap(b.owners)
        self.continue_ = run.wrap(b.continue_)
        self.stop = run.wrap(b.stop)
        self.terminate = run.wrap(b.terminate)
        self.cost = run.wrap(b.cost)
        self.subagents = run.wrap(b.subagents)
        self.state = run.wrap(b.state)
        self.set_state = run.wrap(b.set_state)
        self.approvals = run.wrap(b.approvals)
        self.approve = run.wrap(b.approve)
        self.reject = run.wrap(b.reject)
        self.compact = run.wrap(b.compact)
        self.compactions = run.wrap(b.compactions)
        self.undo_compaction = run.wrap(b.undo_compaction)

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
    def __init__(self, run: AsyncRunner) -> None:
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
    def __init__(self, run: AsyncRunner) -> None:
        self.list = run.wrap(ROUTES.logs.list)
        self.get = run.wrap(ROUTES.logs.get)


class AsyncFiles:
    def __init__(self, run: AsyncRunner) -> None:
        b = ROUTES.files
        self._run = run
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

    def read_stream(
        self, thread_id: str, path: str, *, chunk_size: int | None = None
    ) -> AsyncIterator[bytes]:
        """The file's bytes as they arrive (``async for piece in …``), for large files."""
        return self._run.stream_bytes(ROUTES.files.read(thread_id, path), chunk_size)


class AsyncCatalog:
    def __init__(self, run: AsyncRunner) -> None:
        b = ROUTES.catalog
        self.agents = run.wrap(b.agents)
        self.prompts = run.wrap(b.prompts)
        self.tools = run.wrap(b.tools)
        self.models = run.wrap(b.models)
        self.hooks = run.wrap(b.hooks)


class _Credential:
    """The client's bearer credential, swapped by ``auth.login`` / ``auth.logout``."""

    def __init__(self, http: httpx.Client | httpx.AsyncClient, headers: dict[str, str]) -> None:
        self._http = http
        self._headers = headers  # shared with the streams the client opens
        self.session_token: str | None = None
        """The token of the last ``login`` while it is in use."""

    def use(self, token: str | None) -> None:
        if token is None:
            self._headers.pop("Authorization", None)
            self._http.headers.pop("Authorization", None)
        else:
            self._headers["Authorization"] = f"Bearer {token}"
            self._http.headers["Authorization"] = f"Bearer {token}"

    def logged_in(self, result: LoginResult) -> LoginResult:
        self.session_token = result.token
        self.use(result.token)
        return result

    def logged_out(self) -> None:
        if self.session_token is not None:
            self.session_token = None
            self.use(None)


class AsyncAuth:
    """``/api/auth/*`` (spec 10 §10.5): ``login`` makes the client use the session token it
    returns, and ``logout`` (of that session) drops it again."""

    def __init__(self, run: AsyncRunner, credential: _Credential) -> None:
        self._run = run
        self._credential = credential
        self.me = run.wrap(ROUTES.auth.me)
        self.config = run.wrap(ROUTES.auth.config)
        self.websocket_ticket = run.wrap(ROUTES.auth.websocket_ticket)

    async def login(self, username: str, password: str) -> LoginResult:
        result = await self._run.run(ROUTES.auth.login(username, password))
        return self._credential.logged_in(result)

    async def logout(self) -> None:
        await self._run.run(ROUTES.auth.logout())
        self._credential.logged_out()


class AsyncApiKeys:
    def __init__(self, run: AsyncRunner) -> None:
        b = ROUTES.api_keys
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.delete = run.wrap(b.delete)
        self.revoke_current = run.wrap(b.revoke_current)


class AsyncUsers:
    def __init__(self, run: AsyncRunner) -> None:
        b = ROUTES.users
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)
        self.quota = run.wrap(b.quota)
        self.set_quota = run.wrap(b.set_quota)
        self.delete_quota = run.wrap(b.delete_quota)


class AsyncWebhooks:
    """Outbound webhooks (spec 19 §19.7, admin)."""

    def __init__(self, run: AsyncRunner) -> None:
        b = ROUTES.webhooks
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.get = run.wrap(b.get)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)
        self.deliveries = run.wrap(b.deliveries)
        self.redeliver = run.wrap(b.redeliver)


class AsyncMemory:
    """The memory store across threads (spec 20 §20.7)."""

    def __init__(self, run: AsyncRunner) -> None:
        b = ROUTES.memory
        self.put = run.wrap(b.put)
        self.get = run.wrap(b.get)
        self.delete = run.wrap(b.delete)
        self.search = run.wrap(b.search)
        self.list_namespaces = run.wrap(b.list_namespaces)


class AsyncSchedules:
    """Schedules (spec 18 §18.7, admin)."""

    def __init__(self, run: AsyncRunner) -> None:
        b = ROUTES.schedules
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.get = run.wrap(b.get)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)
        self.fire = run.wrap(b.fire)


class AsyncTriggers:
    """Inbound triggers (spec 22 §22.5, admin)."""

    def __init__(self, run: AsyncRunner) -> None:
        b = ROUTES.triggers
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.get = run.wrap(b.get)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)


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
        self._run = AsyncRunner(self._http, max_retries)
        self.threads = AsyncThreads(self._run)
        self.messages = AsyncMessages(self._run)
        self.logs = AsyncLogs(self._run)
        self.files = AsyncFiles(self._run)
        self.catalog = AsyncCatalog(self._run)
        self.auth = AsyncAuth(self._run, _Credential(self._http, self._headers))
        self.api_keys = AsyncApiKeys(self._run)
        self.users = AsyncUsers(self._run)
        self.webhooks = AsyncWebhooks(self._run)
        self.schedules = AsyncSchedules(self._run)
        self.triggers = AsyncTriggers(self._run)
        self.memory = AsyncMemory(self._run)
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
        attachment_url: AttachmentUrl | None = None,
    ) -> ThreadSession:
        """Load + stream + reducer for one thread (spec 11 §11.6); use with ``async with``.
        ``attachment_url(thread_id, ref)`` builds the URLs of stored attachments' blocks
        (default ``<base_url>/api/threads/<thread>/fs<path>``)."""
        return ThreadSession(
            self,
            thread_id,
            depth=depth,
            page_size=page_size,
            reasoning=reasoning,
            logs=logs,
            attachment_url=attachment_url,
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
    def __init__(self, run: SyncRunner) -> None:
        b = ROUTES.threads
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.get = run.wrap(b.get)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)
        self.export = run.wrap(b.export)
        self.import_ = run.wrap(b.import_)
        self.owners = run.wrap(b.owners)
        self.continue_ = run.wrap(b.continue_)
        self.stop = run.wrap(b.stop)
        self.terminate = run.wrap(b.terminate)
        self.cost = run.wrap(b.cost)
        self.subagents = run.wrap(b.subagents)
        self.state = run.wrap(b.state)
        self.set_state = run.wrap(b.set_state)
        self.approvals = run.wrap(b.approvals)
        self.approve = run.wrap(b.approve)
        self.reject = run.wrap(b.reject)
        self.compact = run.wrap(b.compact)
        self.compactions = run.wrap(b.compactions)
        self.undo_compaction = run.wrap(b.undo_compaction)

    def iterate(self, *, page_size: int = 100, **filters: Any) -> Iterator[Any]:
        """Every thread matching ``filters``, page by page."""
        offset = 0
        while True:
            page = self.list(limit=page_size, offset=offset, **filters)
            yield from page.threads
            offset += len(page.threads)
            if not page.has_more or not page.threads:
                return


class SyncMessages:
    def __init__(self, run: SyncRunner) -> None:
        b = ROUTES.messages
        self.list = run.wrap(b.list)
        self.get = run.wrap(b.get)
        self.send = run.wrap(b.send)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)

    def iterate(
        self, thread_id: str, *, page_size: int = 100, include_silent: bool = False, depth: int = 0
    ) -> Iterator[Message]:
        """Every message, oldest first (stable while the thread only grows at the end)."""
        offset = 0
        while True:
            page = self.list(
                thread_id,
                limit=page_size,
                offset=offset,
                order="asc",
                include_silent=include_silent,
                depth=depth,
            )
            yield from page.messages
            offset += len(page.messages)
            if not page.has_more or not page.messages:
                return


class SyncLogs:
    def __init__(self, run: SyncRunner) -> None:
        self.list = run.wrap(ROUTES.logs.list)
        self.get = run.wrap(ROUTES.logs.get)


class SyncFiles:
    def __init__(self, run: SyncRunner) -> None:
        b = ROUTES.files
        self._run = run
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

    def read_stream(
        self, thread_id: str, path: str, *, chunk_size: int | None = None
    ) -> Iterator[bytes]:
        """The file's bytes as they arrive (``for piece in …``), for large files."""
        return self._run.stream_bytes(ROUTES.files.read(thread_id, path), chunk_size)


class SyncCatalog:
    def __init__(self, run: SyncRunner) -> None:
        b = ROUTES.catalog
        self.agents = run.wrap(b.agents)
        self.prompts = run.wrap(b.prompts)
        self.tools = run.wrap(b.tools)
        self.models = run.wrap(b.models)
        self.hooks = run.wrap(b.hooks)


class SyncAuth:
    def __init__(self, run: SyncRunner, credential: _Credential) -> None:
        self._run = run
        self._credential = credential
        self.me = run.wrap(ROUTES.auth.me)
        self.config = run.wrap(ROUTES.auth.config)
        self.websocket_ticket = run.wrap(ROUTES.auth.websocket_ticket)

    def login(self, username: str, password: str) -> LoginResult:
        result = self._run.run(ROUTES.auth.login(username, password))
        return self._credential.logged_in(result)

    def logout(self) -> None:
        self._run.run(ROUTES.auth.logout())
        self._credential.logged_out()


class SyncApiKeys:
    def __init__(self, run: SyncRunner) -> None:
        b = ROUTES.api_keys
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.delete = run.wrap(b.delete)
        self.revoke_current = run.wrap(b.revoke_current)


class SyncUsers:
    def __init__(self, run: SyncRunner) -> None:
        b = ROUTES.users
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)
        self.quota = run.wrap(b.quota)
        self.set_quota = run.wrap(b.set_quota)
        self.delete_quota = run.wrap(b.delete_quota)


class SyncWebhooks:
    """Outbound webhooks (spec 19 §19.7, admin)."""

    def __init__(self, run: SyncRunner) -> None:
        b = ROUTES.webhooks
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.get = run.wrap(b.get)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)
        self.deliveries = run.wrap(b.deliveries)
        self.redeliver = run.wrap(b.redeliver)


class SyncMemory:
    """The memory store across threads (spec 20 §20.7)."""

    def __init__(self, run: SyncRunner) -> None:
        b = ROUTES.memory
        self.put = run.wrap(b.put)
        self.get = run.wrap(b.get)
        self.delete = run.wrap(b.delete)
        self.search = run.wrap(b.search)
        self.list_namespaces = run.wrap(b.list_namespaces)


class SyncSchedules:
    """Schedules (spec 18 §18.7, admin)."""

    def __init__(self, run: SyncRunner) -> None:
        b = ROUTES.schedules
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.get = run.wrap(b.get)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)
        self.fire = run.wrap(b.fire)


class SyncTriggers:
    """Inbound triggers (spec 22 §22.5, admin)."""

    def __init__(self, run: SyncRunner) -> None:
        b = ROUTES.triggers
        self.list = run.wrap(b.list)
        self.create = run.wrap(b.create)
        self.get = run.wrap(b.get)
        self.update = run.wrap(b.update)
        self.delete = run.wrap(b.delete)


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
        stream_url: str | None = None,
    ) -> None:
        url, all_headers = _settings(base_url, token, headers)
        self.base_url = url
        self.stream_url = stream_url or url
        """Where stream sockets connect (default ``base_url``; e.g. a separate WS gateway)."""
        self._headers = all_headers
        self._http = httpx.Client(
            base_url=url, headers=all_headers, timeout=timeout, transport=transport
        )
        self._run = SyncRunner(self._http, max_retries)
        self.threads = SyncThreads(self._run)
        self.messages = SyncMessages(self._run)
        self.logs = SyncLogs(self._run)
        self.files = SyncFiles(self._run)
        self.catalog = SyncCatalog(self._run)
        self.auth = SyncAuth(self._run, _Credential(self._http, self._headers))
        self.api_keys = SyncApiKeys(self._run)
        self.users = SyncUsers(self._run)
        self.webhooks = SyncWebhooks(self._run)
        self.schedules = SyncSchedules(self._run)
        self.triggers = SyncTriggers(self._run)
        self.memory = SyncMemory(self._run)
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
        on_state: Callable[[StreamState], None] | None = None,
    ) -> SyncThreadStream:
        """The thread's stream as a blocking iterator; use with ``with``."""
        return SyncThreadStream(
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
        attachment_url: AttachmentUrl | None = None,
    ) -> SyncThreadSession:
        """The blocking ``ThreadSession`` (spec 11 §11.6.5): load + stream (read by a background
        thread) + reducer; use with ``with``."""
        return SyncThreadSession(
            self,
            thread_id,
            depth=depth,
            page_size=page_size,
            reasoning=reasoning,
            logs=logs,
            attachment_url=attachment_url,
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
