"""MCP tools through the official ``mcp`` SDK: the sessions a runtime holds with the project's
MCP servers (docs/interop.md, spec 13 §13.4).

``MCPSessions.open(definitions)`` opens one session per declared server, all at once, lists
each server's tools (every page) and binds them to the definitions as ``MCPTool`` objects: the
input schema is the server's. A server that cannot be started or reached, or that does not
answer within its ``connect_timeout``, is recorded as a definition error naming it, which
``Definitions.validate`` reports with every other problem of the project.

A session lives in a task of its own: the SDK's transports are anyio task groups, which must
be left by the task that entered them. Tool calls come from any task. A call waits at most the
server's ``timeout``; an error result of the server (``isError``) is a tool result with status
``error``; a session whose connection failed is reopened by the next call (the failed call is
not sent again: the server may have run it), except a call the server answered 404 for
its session (it lost the session and ran nothing), which is made once more on a new one.

The SDK is imported only when a project declares a server (the ``threadloom[mcp]`` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterable
from contextlib import AsyncExitStack
from typing import Any

from threadloom.define.mcp import MCPServer, MCPTool
from threadloom.define.registry import Definitions
from threadloom.define.tool import Attachment, ToolResult
from threadloom.thread.filetypes import extension_for_mime
from threadloom.version import __version__
from threadloom.wire.patterns import decode_base64

logger = logging.getLogger("threadloom.mcp")

SDK_MISSING = "the mcp package is not installed; install it with: pip install 'threadloom[mcp]'"
MAX_PAGES = 100
"""Pages of a server's tool listing read at most (a server whose cursor never ends)."""
CLOSE_TIMEOUT_S = 10.0


class MCPStartError(Exception):
    """A server could not be started or listed; the message says why in one line."""


def _leaf(exc: BaseException) -> BaseException:
    """The first real cause inside the exception groups of anyio task groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """One line saying why ``exc`` happened."""
    leaf = _leaf(exc)
    text = " ".join(str(leaf).split())
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


class MCPSession:
    """One server's session: opened by ``open``, reopened by a call after a failure."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.opened = 0
        """How many sessions were opened (1 after ``open``, more after reopenings)."""
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None
        self._lock = asyncio.Lock()
        self._broken = False
        self._closed = False
        self._lost = False
        """The server answered 404 to a request naming this session: it lost the session."""

    @property
    def where(self) -> str:
        return f'MCP server "{self.server.name}"'

    async def open(self) -> list[Any]:
        """Start the session and list the server's tools (the SDK's ``Tool`` objects);
        ``MCPStartError`` when it cannot."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[list[Any]] = loop.create_future()
        closing = asyncio.Event()
        task = loop.create_task(self._own(ready, closing), name=f"mcp-{self.server.name}")
        try:
            async with asyncio.timeout(self.server.connect_timeout):
                tools = await asyncio.shield(ready)
        except TimeoutError:
            await _stop(task, closing)
            limit = self.server.connect_timeout
            raise MCPStartError(f"did not answer within {limit:g} s") from None
        except asyncio.CancelledError:
            await _stop(task, closing)
            raise
        except Exception as exc:
            await _stop(task, closing)
            raise MCPStartError(describe(exc)) from exc
        self._task, self._closing = task, closing
        self._broken = self._lost = False
        self.opened += 1
        return tools

    async def _own(self, ready: asyncio.Future[list[Any]], closing: asyncio.Event) -> None:
        """The session's task: enter the SDK's client, list, then hold it until closed."""
        try:
            from mcp import Client
            from mcp.types import Implementation

            async with AsyncExitStack() as stack:
                target = await self._target(stack)
                info = Implementation(name="threadloom", version=__version__)
                client = await stack.enter_async_context(Client(target, client_info=info))
                tools = await _list_tools(client)
                self._client = client
                if not ready.done():
                    ready.set_result(tools)
                await closing.wait()
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            else:
                logger.warning("%s: the session ended: %s", self.where, describe(exc))
        finally:
            self._client = None
            self._broken = True

    async def _target(self, stack: AsyncExitStack) -> Any:
        """What the SDK's ``Client`` connects to: stdio parameters, or a streamable HTTP
        transport whose HTTP client carries the server's headers."""
        server = self.server
        if server.url is None:
            from mcp import StdioServerParameters

            assert server.command is not None
            return StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=dict(server.env) if server.env is not None else None,
                cwd=server.cwd,
            )
        import httpx2  # the SDK's HTTP client; headers are given through one (its docs)
        from mcp.client.streamable_http import MCP_SESSION_ID, streamable_http_client

        async def watch(response: Any) -> None:
            # 404 to a request naming a session: the server no longer knows the session
            # (restarted, expired) and handled nothing (the MCP transport's rule)
            if response.status_code == 404 and MCP_SESSION_ID in response.request.headers:
                self._lost = True

        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=dict(server.headers or {}),
                timeout=httpx2.Timeout(30.0, read=300.0),
                event_hooks={"response": [watch]},
            )
        )
        return streamable_http_client(server.url, http_client=http)

    async def _client_now(self) -> Any:
        """The open client, reopening the session first when it failed."""
        if self._client is not None and not self._broken:
            return self._client
        async with self._lock:
            if self._closed:
                raise MCPStartError("the runtime is closed")
            if self._client is None or self._broken:
                await self._stop()
                await self.open()
                logger.info("%s: session reopened", self.where)
            return self._client

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Call ``tool`` with ``arguments``: its result, or an error result saying why. A
        call the server refused because it no longer knew the session (404: it ran nothing)
        is made once more, on a new session."""
        from mcp.shared.exceptions import MCPError

        timeout = self.server.timeout
        for attempt in (1, 2):
            try:
                client = await self._client_now()
            except MCPStartError as exc:
                return _error(f"{self.where} could not be reopened: {exc}")
            try:
                async with asyncio.timeout(timeout + 5.0):  # the SDK's own timeout first
                    result = await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
            except MCPError as exc:
                if self._lost and attempt == 1:
                    self._broken = True
                    logger.info("%s: the server lost the session; calling on a new one", self.where)
                    continue
                return self._failed(tool, exc)
            except TimeoutError:
                self._broken = True
                return _error(f"{self.where}: tool {tool} timed out after {timeout:g} s")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._broken = True
                return _error(f"{self.where}: {describe(exc)}; it is reopened for the next call")
            return tool_result(tool, result, self.where)
        raise AssertionError("unreachable")  # pragma: no cover

    def _failed(self, tool: str, exc: Any) -> ToolResult:
        """The error result of a call the SDK answered with an ``MCPError``."""
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        timeout = self.server.timeout
        if exc.code == REQUEST_TIMEOUT:
            return _error(f"{self.where}: tool {tool} timed out after {timeout:g} s")
        if exc.code == CONNECTION_CLOSED or self._lost:
            self._broken = True
            lost = f"the connection was lost ({exc}); it is reopened for the next call"
            return _error(f"{self.where}: {lost}")
        return _error(f"{self.where}: {exc}")

    async def _stop(self) -> None:
        task, closing = self._task, self._closing
        self._task = self._closing = None
        self._client = None
        if task is not None and closing is not None:
            await _stop(task, closing)

    async def aclose(self) -> None:
        async with self._lock:
            self._closed = True
            await self._stop()


async def _stop(task: asyncio.Task[None], closing: asyncio.Event) -> None:
    """End a session's task: let it leave the client (the stdio transport closes the
    server's stdin, then terminates it), cancelling it when that takes too long."""
    closing.set()
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT_S):
            await asyncio.shield(task)
    except (TimeoutError, asyncio.CancelledError):
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
    except BaseException:
        pass


async def _list_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _error(text: str) -> ToolResult:
    return ToolResult(status="error", error=text)


def tool_result(tool: str, result: Any, where: str = "MCP server") -> ToolResult:
    """An MCP ``CallToolResult`` as a ``ToolResult``: text blocks (and embedded text
    resources) joined by a blank line, the structured content when there is no text,
    images, audio and binary resources as attachments, which the engine writes to the
    thread's files (spec 04 §4.5.4); ``isError`` makes it an error result. A block whose
    data is not base64 makes it an error result naming the block (``where`` names the
    server)."""
    texts: list[str] = []
    files: list[Attachment] = []
    for index, block in enumerate(getattr(result, "content", None) or [], start=1):
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind in ("image", "audio"):
            mime = block.mime_type or "application/octet-stream"
            name = f"{tool}-{index}.{extension_for_mime(mime)}"  # spec 07 §7.4
            data = decode_base64(block.data) if isinstance(block.data, str) else None
            if data is None:
                return _error(f"{where}: tool {tool} returned {kind} {name} not in base64")
            files.append(Attachment(data=data, name=name, mime_type=mime))
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if isinstance(text, str):
                texts.append(text)
            else:
                blob = getattr(resource, "blob", None)
                name = str(resource.uri).rstrip("/").rsplit("/", 1)[-1] or f"{tool}-{index}"
                mime = resource.mime_type or "application/octet-stream"
                data = decode_base64(blob) if isinstance(blob, str) else None
                if data is None:
                    return _error(f"{where}: tool {tool} returned resource {name} not in base64")
                files.append(Attachment(data=data, name=name, mime_type=mime))
        elif kind == "resource_link":
            texts.append(f"{block.name}: {block.uri}")
    structured = getattr(result, "structured_content", None)
    if not texts and structured is not None:
        texts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n\n".join(t for t in texts if t)
    if getattr(result, "is_error", False):
        return ToolResult(status="error", error=text or "the tool reported an error")
    return ToolResult(result=text, attachments=list(files))


class MCPSessions:
    """The sessions of one runtime, by server name."""

    def __init__(self, sessions: dict[str, MCPSession]) -> None:
        self.sessions = sessions

    @classmethod
    async def open(cls, definitions: Definitions) -> MCPSessions | None:
        """Open every declared server whose declaration is valid and bind its tools to
        ``definitions``; failures become definition errors (V22). ``None`` when the
        project declares no server."""
        servers = [s for s in definitions.mcp_servers() if not s.self_problems()]
        if not servers:
            return None
        try:
            import mcp  # noqa: F401
        except ImportError:
            for server in servers:
                definitions.mcp_failed(server.name, f'MCP server "{server.name}": {SDK_MISSING}')
            return None
        sessions = {s.name: MCPSession(s) for s in servers}
        outcomes = await asyncio.gather(
            *(session.open() for session in sessions.values()), return_exceptions=True
        )
        opened: dict[str, MCPSession] = {}
        for (name, session), outcome in zip(sessions.items(), outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome
                where = session.where
                how = "could not start" if session.server.url is None else "could not be reached"
                why = str(outcome) if isinstance(outcome, MCPStartError) else describe(outcome)
                definitions.mcp_failed(name, f"{where} {how}: {why}")
                continue
            definitions.bind_mcp_tools(name, bind(session, outcome))
            opened[name] = session
        return cls(opened)

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in self.sessions.values()))


def bind(session: MCPSession, tools: Iterable[Any]) -> list[MCPTool]:
    """The listed tools as ``MCPTool`` definitions calling ``session``."""
    server = session.server
    bound: list[MCPTool] = []
    for tool in tools:
        schema = getattr(tool, "input_schema", None)
        parameters = dict(schema) if isinstance(schema, dict) else {"type": "object"}
        parameters.setdefault("type", "object")
        bound.append(
            MCPTool(
                name=server.offered_name(tool.name),
                description=(tool.description or getattr(tool, "title", None) or tool.name).strip(),
                parameters=parameters,
                fn=session.call,
                is_async=True,
                server=server.name,
                remote_name=tool.name,
                call=session.call,
                requires_approval=server.needs_approval(tool.name),
                idempotent=getattr(getattr(tool, "annotations", None), "idempotentHint", None)
                is True,
            )
        )
    return bound


async def open_sessions(
    definitions: Definitions, validate: Callable[[], None]
) -> MCPSessions | None:
    """``MCPSessions.open``, then ``validate`` the definitions again, now with the servers'
    tools (or why a server could not be opened); the sessions are closed when that fails.
    ``None`` when the project declares no MCP server (nothing is validated again)."""
    if not any(True for _ in definitions.mcp_servers()):
        return None
    sessions = await MCPSessions.open(definitions)
    try:
        validate()
    except BaseException:
        if sessions is not None:
            await sessions.aclose()
        raise
    return sessions
