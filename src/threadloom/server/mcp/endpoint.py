"""The project's agents as tools of an MCP server at ``/mcp`` (docs/interop.md, spec 13 §13.5).

Every agent marked ``expose_as_tool`` is a tool: its name, its ``tool_description``, and as
input schema the arguments schema of its side-a prompt, else ``{message, attachments?}`` (as
when a prompt offers the agent as a subagent, spec 06 §6.3.4). A call creates a thread of the
agent owned by the caller, sends the message (the arguments, when the prompt takes
arguments), waits until the run settles and answers with the thread's session result (spec 06
§6.8.1): the answer as text and as the structured result ``{"result": answer}`` (the shape
the MCP SDKs give a tool that returns a string; pydantic-ai and fastmcp unwrap it), or
``isError`` with the failure's text; the thread's ``{threadId, reason, success}`` in the
result's ``_meta``. While it waits it sends ``notifications/progress`` (when the call asked
for them): at each message the run commits and at a steady interval. A cancelled call
(``notifications/cancelled``, or the call's connection closing) stops the thread.

Served with the official ``mcp`` SDK's low-level server over streamable HTTP, stateless, so
any node answers any request; ``initialize`` is answered with an ``Mcp-Session-Id`` that names
no state, only so that a client's ``notifications/cancelled`` (a POST of its own) can be told
from another client's. Credentials are the REST API's (spec 10), OAuth access tokens included:
a request that does not authenticate gets the API's JSON 401 before the SDK sees it, with the
``WWW-Authenticate`` that leads an MCP host to the authorization server (spec 10 §10.15).
Without the ``mcp`` extra the path answers 501.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import anyio
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from threadloom.define.agent import Agent
from threadloom.define.registry import Definitions
from threadloom.define.schema import empty_object_schema
from threadloom.engine.run import results
from threadloom.engine.run.children import argument_issues
from threadloom.engine.run.runtime import Runtime
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import ApiError
from threadloom.server.settings import JSON_BODY_LIMIT
from threadloom.version import __version__

logger = logging.getLogger("threadloom.server")

PATH: Final = "/mcp"
CALL_TIMEOUT_S: Final = 600.0
"""How long a call waits for the agent's run to settle before it answers with an error."""
SERVER_NAME: Final = "threadloom"
SESSION_HEADER: Final = "mcp-session-id"

MESSAGE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "What to ask the agent"}},
    "required": ["message"],
}

OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "result": {"type": "string", "description": "The agent's answer (its session result)"}
    },
    "required": ["result"],
    "x-fastmcp-wrap-result": True,
}
"""Every tool's ``outputSchema``: the answer wrapped in ``result``, as the MCP SDKs wrap a tool
that returns a string; ``x-fastmcp-wrap-result`` (and ``_meta.fastmcp.wrap_result`` on each
result) is how fastmcp's client knows to unwrap it (spec 13 §13.5 rule 4)."""

META_KEY: Final = "threadloom"
"""The result's ``_meta`` entry with the thread: ``{threadId, reason, success}``."""


def exposed(defs: Definitions) -> list[Agent]:
    """The agents served as tools, by name."""
    return sorted((a for a in defs.agents() if a.expose_as_tool), key=lambda a: a.name)


def input_schema(defs: Definitions, agent: Agent) -> dict[str, Any]:
    """The side-a prompt's arguments schema, else ``{message}``."""
    prompt = defs.prompt(agent.side_a.prompt) if agent.side_a.prompt else None
    schema = prompt.safe_arguments_schema() if prompt is not None else None
    return dict(schema) if schema else dict(MESSAGE_SCHEMA)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


async def run_agent(
    runtime: Runtime,
    who: Principal,
    agent: Agent,
    arguments: Mapping[str, Any],
    timeout: float = CALL_TIMEOUT_S,
    started: Callable[[str], Awaitable[None]] | None = None,
) -> tuple[str, results.SessionResult]:
    """Create a thread of ``agent`` for ``who``, send the call's message, wait for the run
    to settle: the thread id and its session result. ``ValueError`` for bad arguments.
    ``started`` is awaited with the thread's id before the message is sent."""
    defs = runtime.definitions
    prompt = defs.prompt(agent.side_a.prompt) if agent.side_a.prompt else None
    has_schema = prompt is not None and prompt.safe_arguments_schema() is not None
    if has_schema:
        issues = argument_issues(prompt, arguments)
        if issues:
            raise ValueError("; ".join(f"[{loc}] {msg}" for loc, msg in issues))
        message = _text(dict(arguments))
    else:
        value = arguments.get("message")
        if not isinstance(value, str) or not value.strip():
            raise ValueError("[message] must be a non-empty string")
        message = value
    state = await runtime.create_thread(
        agent.name,
        user_id=who.owner_id,
        tags=("mcp",),
        arguments=dict(arguments) if has_schema else None,
    )
    thread_id = state.thread_id
    if started is not None:
        await started(thread_id)
    sent = await runtime.send_message(thread_id, message)
    reason = await _settled(runtime, thread_id, timeout)
    if reason is None:
        text = f"The agent is still running after {timeout:g} s (thread {thread_id})."
        return thread_id, results.SessionResult(False, text, "timeout")
    page = await state.get_messages(limit=1000, order="desc", include_silent=True)
    messages = list(reversed(page.messages))
    began = next((m.created_at for m in messages if m.id == sent.id), 0)
    ending = next(
        (
            m
            for m in reversed(messages)
            if m.role == "tool" and m.depth == 0 and m.created_at >= began
        ),
        None,
    )
    final = results.final_message(messages, began)
    return thread_id, results.ended_result(reason, agent, ending, final)


async def _settled(runtime: Runtime, thread_id: str, timeout: float) -> str | None:
    """The reason the thread's run settled with, ``None`` after ``timeout``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            return None
        try:
            await runtime.wait_idle(thread_id, left)
        except TimeoutError:
            return None
        row = await runtime.store.get_thread(thread_id)
        if row is None:
            return "terminated"
        if row.status.state != "running":
            return row.status.reason or row.status.state
        await asyncio.sleep(0.05)  # run by another node: its status tells


def progress_message(data: Mapping[str, Any]) -> str | None:
    """What a committed message of the run says as progress (§13.5 rule 5), ``None`` for a
    message that is not the run's (the call's own user message, a pending queue view)."""
    message = data.get("message")
    if not isinstance(message, Mapping) or message.get("status") not in (None, "completed"):
        return None
    role = message.get("role")
    if role == "assistant":
        calls = message.get("tool_calls") or []
        if isinstance(calls, str):  # the wire's JSON text (spec 01 §1.4.3)
            calls = _json(calls.encode()) or []
        names = [
            str((call.get("function") or {}).get("name") or call.get("name") or "a tool")
            for call in calls
            if isinstance(call, Mapping)
        ]
        return f"calling {', '.join(names)}" if names else "the agent answered"
    if role == "tool":
        name = message.get("tool_name") or message.get("name") or "a tool"
        return f"{name} returned"
    return None


CallKey = tuple[str, str, str]
"""A call in flight: (the principal's id, the client's ``Mcp-Session-Id`` or ``""``, the
JSON-RPC request id as JSON)."""


class McpEndpoint:
    """The ASGI app at ``/mcp``: authenticate, then one stateless SDK exchange. The SDK is
    imported at the first request (importing it takes a good part of a second)."""

    def __init__(self) -> None:
        self._server: Any = None
        self.calls: dict[CallKey, tuple[str, _Progress | None]] = {}
        """The thread (and progress) of each call this node serves, for
        ``notifications/cancelled``."""

    @property
    def server(self) -> Any:
        if self._server is None:
            from mcp.server import Server

            self._server = Server(
                SERVER_NAME,
                version=__version__,
                title="Threadloom",
                instructions="The agents of this Threadloom project; each call runs a thread.",
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
            )
        return self._server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            who = await deps.principal(request)  # kept in scope["state"] for the handlers
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

            post = scope["method"] == "POST"
            body = await deps.read_body(request, JSON_BODY_LIMIT) if post else b""
        except ApiError as error:
            response = error.response()
            if error.status == 401:
                response.headers["WWW-Authenticate"] = _challenge(request)
            await response(scope, receive, send)
            return
        except ImportError:
            await _unavailable(request)(scope, receive, send)
            return
        decoded = _json(body)
        if _method(decoded) == "notifications/cancelled":
            await self._cancelled(request, who, decoded)
        elif _method(decoded) == "initialize":
            send = _with_session_id(send)
        manager = StreamableHTTPSessionManager(self.server, stateless=True)
        async with manager.run():
            await manager.handle_request(scope, _replay(body, receive), send)

    async def _cancelled(self, request: Request, who: Principal, note: Any) -> None:
        """``notifications/cancelled`` of a call this node serves: stop its thread (and its
        children). The SDK acknowledges the notification as usual (202)."""
        params = note.get("params") if isinstance(note, dict) else None
        if not isinstance(params, dict) or "requestId" not in params:
            return
        key = (who.id, request.headers.get(SESSION_HEADER, ""), _request_key(params["requestId"]))
        call = self.calls.get(key)
        if call is not None:
            thread_id, progress = call
            if progress is not None:
                await progress.close()  # no progress after the cancel
            await _stop(deps.runtime(request), thread_id)

    @staticmethod
    def _context(ctx: Any) -> tuple[Runtime, Principal]:
        request = ctx.request
        state = request.scope.get("state") or {}
        who = state.get("principal")
        if not isinstance(who, Principal):
            raise RuntimeError("the MCP request was not authenticated")
        return deps.runtime(request), who

    async def _list_tools(self, ctx: Any, params: Any) -> Any:
        from mcp import types

        runtime, _ = self._context(ctx)
        defs = runtime.definitions
        tools = [
            types.Tool(
                name=agent.name,
                title=agent.display_title,
                description=agent.tool_description,
                input_schema=input_schema(defs, agent) or empty_object_schema(),
                output_schema=dict(OUTPUT_SCHEMA),
            )
            for agent in exposed(defs)
        ]
        return types.ListToolsResult(tools=tools)

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        from mcp import types

        runtime, who = self._context(ctx)
        agent = runtime.definitions.agent(params.name)
        if agent is None or not agent.expose_as_tool:
            return _error(f"Unknown tool: {params.name}")
        key: CallKey = (
            who.id,
            ctx.request.headers.get(SESSION_HEADER, ""),
            _request_key(ctx.request_id),
        )
        progress = _Progress(runtime, ctx) if _progress_token(ctx) is not None else None
        thread: list[str] = []

        async def started(thread_id: str) -> None:
            thread.append(thread_id)
            self.calls[key] = (thread_id, progress)
            if progress is not None:
                progress.start(thread_id)

        try:
            thread_id, result = await run_agent(
                runtime, who, agent, params.arguments or {}, started=started
            )
        except ValueError as exc:
            return _error(f"Tool argument validation failed: {exc}")
        except BaseException:
            # the call was cancelled (its connection closed, the 2026 wire's cancel): stop
            # the thread, which nobody could answer any more
            if thread:
                with anyio.CancelScope(shield=True):
                    await _stop(runtime, thread[0])
            raise
        finally:
            if thread and self.calls.get(key, ("",))[0] == thread[0]:
                del self.calls[key]
            if progress is not None:
                await progress.close()
        meta = {
            META_KEY: {"threadId": thread_id, "reason": result.reason, "success": result.success}
        }
        content = [types.TextContent(type="text", text=result.text)]
        if not result.success:
            return types.CallToolResult(content=content, is_error=True, meta=meta)
        return types.CallToolResult(
            content=content,
            structured_content={"result": result.text},
            meta={**meta, "fastmcp": {"wrap_result": True}},
        )


class _Progress:
    """``notifications/progress`` of one call (§13.5 rule 5): one for each message the run
    commits (a tool call, a tool's result, the answer) and one every
    ``mcp_progress_s`` seconds without any, numbered 1, 2, …"""

    def __init__(self, runtime: Runtime, ctx: Any) -> None:
        self.runtime = runtime
        self.ctx = ctx
        self.every = deps.context(ctx.request).settings.mcp_progress_s
        self.task: asyncio.Task[None] | None = None

    def start(self, thread_id: str) -> None:
        subscription = self.runtime.events.subscribe(thread_id, kinds=("message",))
        self.task = asyncio.create_task(self._run(subscription))

    async def _run(self, subscription: Any) -> None:
        count = 0
        loop = asyncio.get_running_loop()
        began = loop.time()
        with subscription:
            while True:
                said: str | None
                try:
                    event = await subscription.get(self.every)
                except TimeoutError:
                    said = f"running for {loop.time() - began:.1f} s"
                else:
                    said = progress_message(event.data)
                    if said is None:
                        continue
                count += 1
                try:
                    await self.ctx.session.report_progress(count, None, said)
                except Exception:  # the stream is gone: the call's end tells
                    logger.debug("MCP progress not sent", exc_info=True)
                    return

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


def _progress_token(ctx: Any) -> Any:
    meta = ctx.meta or {}
    return meta.get("progress_token", meta.get("progressToken"))


async def _stop(runtime: Runtime, thread_id: str) -> None:
    """Stop a cancelled call's thread and its children (``aborted_by_user``)."""
    try:
        await runtime.stop(thread_id, cascade=True)
    except Exception:  # already gone: nothing left to stop
        logger.debug("stopping the thread of a cancelled MCP call failed", exc_info=True)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body) if body else None
    except (ValueError, RecursionError):
        return None  # the SDK answers it


def _method(decoded: Any) -> str | None:
    method = decoded.get("method") if isinstance(decoded, dict) else None
    return method if isinstance(method, str) else None


def _request_key(request_id: Any) -> str:
    return json.dumps(request_id)


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body read already given again, once."""
    pending = [body]

    async def replayed() -> Message:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        return await receive()

    return replayed


def _with_session_id(send: Send) -> Send:
    """``send`` that gives the answer to ``initialize`` an ``Mcp-Session-Id`` of its own."""
    session = uuid.uuid4().hex.encode()

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message.get("status") == 200:
            headers = [h for h in message.get("headers", []) if h[0].lower() != b"mcp-session-id"]
            message = {**message, "headers": [*headers, (b"mcp-session-id", session)]}
        await send(message)

    return sending


def _error(text: str) -> Any:
    from mcp import types

    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _challenge(request: Request) -> str:
    """The 401's ``WWW-Authenticate`` (RFC 6750 §3, RFC 9728 §5.1): where an MCP host finds
    the authorization server (spec 10 §10.15); ``invalid_token`` when a credential was
    presented."""
    from threadloom.server.auth.oauth import SCOPE, available
    from threadloom.server.routes.oauth import urls

    parts = ['Bearer realm="threadloom"']
    where = urls(request) if available() else None
    if where is not None and where.secure:
        parts.append(f'resource_metadata="{where.resource_metadata}"')
        parts.append(f'scope="{SCOPE}"')
    if "authorization" in request.headers:
        parts.append('error="invalid_token"')
    return ", ".join(parts)


def _unavailable(request: Request) -> JSONResponse:
    return ApiError(
        501,
        "not_implemented",
        "The MCP server needs the mcp package: pip install 'threadloom[mcp]'",
    ).response()


def install(app: FastAPI) -> None:
    """Serve ``/mcp`` on ``app`` (501 without the ``mcp`` extra)."""
    route = Route(PATH, McpEndpoint(), methods=["GET", "POST", "DELETE"], include_in_schema=False)
    app.router.routes.append(route)
