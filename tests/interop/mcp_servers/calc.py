"""A small MCP server for the tests, written with the SDK's own server API (``MCPServer``,
the SDK's high-level server, called ``FastMCP`` before mcp 2).

``python calc.py`` serves over stdio; ``python calc.py http PORT`` serves streamable HTTP at
``http://127.0.0.1:PORT/mcp`` and, when ``CALC_TOKEN`` is set, refuses requests without
``Authorization: Bearer <CALC_TOKEN>``; ``CALC_LEGACY=1`` makes it a server of the 2025
protocol: no ``server/discover``, sessions with ids kept in memory (a restarted server
knows none of them). ``CALC_GREETING`` (its environment) is what the
``greet`` tool answers with.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("calc", instructions="Arithmetic for the tests")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    if b == 0:
        raise ToolError("division by zero")  # a tool error: its text reaches the caller
    return a / b


@server.tool()
def greet(name: str) -> str:
    """Greet someone with the server's greeting."""
    return f"{os.environ.get('CALC_GREETING', 'Hello')}, {name}!"


@server.tool()
async def wait(seconds: float) -> str:
    """Wait for some seconds."""
    await anyio.sleep(seconds)
    return f"waited {seconds:g} s"


@server.tool()
def crash() -> str:
    """End the server's process at once."""
    os._exit(3)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        import uvicorn
        from starlette.requests import Request
        from starlette.responses import JSONResponse

        legacy = os.environ.get("CALC_LEGACY") == "1"
        app = server.streamable_http_app(stateless_http=not legacy)
        token = os.environ.get("CALC_TOKEN")

        async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
            if token and scope["type"] == "http":
                request = Request(scope)
                if request.headers.get("authorization") != f"Bearer {token}":
                    await JSONResponse({"error": "unauthorized"}, status_code=401)(
                        scope, receive, send
                    )
                    return
            if legacy and scope["type"] == "http" and scope["method"] == "POST":
                # a server of the 2025 protocol: it knows no server/discover, so a client
                # falls back to the initialize handshake and a session with an id
                body = await Request(scope, receive).body()
                message = json.loads(body or b"null")
                if isinstance(message, dict) and message.get("method") == "server/discover":
                    error = {"code": -32601, "message": "Method not found"}
                    answer = {"jsonrpc": "2.0", "id": message.get("id"), "error": error}
                    await JSONResponse(answer)(scope, receive, send)
                    return
                sent = False

                async def replay():  # type: ignore[no-untyped-def]
                    nonlocal sent
                    if not sent:
                        sent = True
                        return {"type": "http.request", "body": body, "more_body": False}
                    return await receive()

                await app(scope, replay, send)
                return
            await app(scope, receive, send)

        uvicorn.run(guarded, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        server.run()


if __name__ == "__main__":
    main()
