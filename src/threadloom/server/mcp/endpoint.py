"""The project's agents as tools of an MCP server at ``/mcp`` (docs/interop.md, spec 13 §13.5).

Every agent marked ``expose_as_tool`` is a tool: its name, its ``tool_description``, and as
input schema the arguments schema of its side-a prompt, else ``{message, attachments?}`` (as
when a prompt offers the agent as a subagent, spec 06 §6.3.4). A call creates a thread of the
agent owned by the caller, sends the message (the arguments, when the prompt takes
arguments), waits until the run settles and answers with the thread's session result (spec 06
§6.8.1): its text, ``isError`` when the session failed, and ``{threadId, reason, success}`` as
structured content.

Served with the official ``mcp`` SDK's low-level server over streamable HTTP, stateless, so
any node answers any request. Credentials are the REST API's (spec 10), OAuth access tokens
included: a request that does not authenticate gets the API's JSON 401 before the SDK sees
it, with the ``WWW-Authenticate`` that leads an MCP host to the authorization server (spec 10
§10.15). Without the ``mcp`` extra the path answers 501.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, Final

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from threadloom.define.agent import Agent
from threadloom.define.registry import Definitions
from threadloom.define.schema import empty_object_schema
from threadloom.engine.run import results
from threadloom.engine.run.children import argument_issues
from threadloom.engine.run.runtime import Runtime
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import ApiError

PATH: Final = "/mcp"
CALL_TIMEOUT_S: Final = 600.0
"""How long a call waits for the agent's run to settle before it answers with an error."""
SERVER_NAME: Final = "threadloom"

MESSAGE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "What to ask the agent"}},
    "required": ["message"],
}


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
) -> tuple[str, results.SessionResult]:
    """Create a thread of ``agent`` for ``who``, send the call's message, wait for the run
    to settle: the thread id and its session result. ``ValueError`` for bad arguments."""
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


class McpEndpoint:
    """The ASGI app at ``/mcp``: authenticate, then one stateless SDK exchange. The SDK is
    imported at the first request (importing it takes a good part of a second)."""

    def __init__(self) -> None:
        self._server: Any = None

    @property
    def server(self) -> Any:
        if self._server is None:
            from mcp.server import Server

            self._server = Server(
                SERVER_NAME,
                instructions="The agents of this Threadloom project; each call runs a thread.",
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
            )
        return self._server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            await deps.principal(request)  # kept in scope["state"] for the handlers
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        except ApiError as error:
            response = error.response()
            if error.status == 401:
                response.headers["WWW-Authenticate"] = _challenge(request)
            await response(scope, receive, send)
            return
        except ImportError:
            await _unavailable(request)(scope, receive, send)
            return
        manager = StreamableHTTPSessionManager(self.server, stateless=True)
        async with manager.run():
            await manager.handle_request(scope, receive, send)

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
        try:
            thread_id, result = await run_agent(runtime, who, agent, params.arguments or {})
        except ValueError as exc:
            return _error(f"Tool argument validation failed: {exc}")
        structured = {"threadId": thread_id, "reason": result.reason, "success": result.success}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.text)],
            structured_content=structured,
            is_error=not result.success,
        )


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
