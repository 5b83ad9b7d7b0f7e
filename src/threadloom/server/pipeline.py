"""The outer request pipeline (spec 08 §8.1.1 rule 7, §8.1.4 steps 1–2, spec 10 §10.7–10.8).

A plain ASGI middleware, outermost: it gives every response its request id and fixed
headers, answers CORS preflights, applies the local-development origin guard, serves
``HEAD`` as the ``GET`` of the same URL without its body, and turns an unhandled exception
into the ``internal_error`` body (never a stack trace).
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from threadloom.server.settings import ServerSettings, is_loopback_host

log = logging.getLogger("threadloom.server")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_NO_STORE_PREFIXES = ("/api/threads", "/api/auth", "/api/api-keys", "/api/users", "/api/oauth")
LOCAL_CROSS_ORIGIN_TEXT = "Cross-origin access is disabled for local development"


def header(scope: Scope, name: str) -> str | None:
    """The first value of a request header (``name`` in lower case)."""
    key = name.encode("latin-1")
    for k, v in scope.get("headers", ()):
        if k == key:
            return str(v.decode("latin-1"))
    return None


def own_origin(scope: Scope) -> str:
    scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
    return f"{scheme}://{header(scope, 'host') or ''}"


def origin_guard_fails(scope: Scope, settings: ServerSettings) -> bool:
    """Spec 10 §10.8.2: a browser request to a loopback host must be same-origin."""
    host = header(scope, "host") or ""
    if not is_loopback_host(host) or scope.get("path") == "/api/health":
        return False
    site = header(scope, "sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return True
    origin = header(scope, "origin")
    if origin is not None:
        if origin == "null":
            return True
        return origin.rstrip("/") != own_origin(scope) and not settings.origin_allowed(origin)
    return False


def _json(status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> list[Message]:
    payload = json.dumps(body).encode()
    return [
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        },
        {"type": "http.response.body", "body": payload},
    ]


def head_as_get(scope: Scope, receive: Receive, send: Send) -> tuple[Scope, Receive, Send]:
    """``HEAD`` answered as ``GET`` without the body (RFC 9110 §9.3.2): the same status and
    headers, ``Content-Length`` included. The first body message ends the answer; later
    ones are dropped and the app's ``receive`` reports a disconnect, so a streaming answer
    (SSE) stops instead of producing a body nobody reads."""
    done = False

    async def head_send(message: Message) -> None:
        nonlocal done
        if message["type"] != "http.response.body":
            await send(message)
        elif not done:
            done = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def head_receive() -> Message:
        if done:
            return {"type": "http.disconnect"}
        return await receive()

    return {**scope, "method": "GET"}, head_receive, head_send


Observe = Callable[[str, object, int, float], None]
"""Told of each HTTP request answered: its method, the route that matched it (None: none),
its status and seconds (``server/metrics.py``'s ``HttpMetrics.observe``)."""


class Pipeline:
    def __init__(
        self, app: ASGIApp, settings: ServerSettings, observe: Observe | None = None
    ) -> None:
        self.app = app
        self.settings = settings
        self.observe = observe

    def _fixed(self, scope: Scope) -> list[tuple[bytes, bytes]]:
        """The headers of every answer (§8.1.1 rule 7); the request id kept in the scope."""
        incoming = header(scope, "x-request-id")
        request_id = incoming if incoming and _REQUEST_ID.match(incoming) else str(uuid.uuid4())
        scope.setdefault("state", {})["request_id"] = request_id
        return [
            (b"x-content-type-options", b"nosniff"),
            (b"x-threadloom-node", self.settings.node_id.encode("latin-1", "replace")),
            (b"x-request-id", request_id.encode("latin-1")),
        ]

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket upgrade's answer — the 101 (``websocket.accept``) or its refusal
        (``websocket.http.response.start``, the denial extension) — carries the fixed
        headers as every HTTP answer does."""
        fixed = self._fixed(scope)

        async def send_with_headers(message: Message) -> None:
            if message["type"] in ("websocket.accept", "websocket.http.response.start"):
                names = {name for name, _ in fixed}
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*headers, *fixed]}
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.observe is None:
            await self._http(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # unless an answer starts

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        routed = [scope]  # the scope the app routed (HEAD's is a copy), with its route
        try:
            await self._http(scope, receive, counted, routed)
        finally:
            method = str(scope.get("method", ""))
            self.observe(method, routed[0].get("route"), status, time.perf_counter() - started)

    async def _http(
        self, scope: Scope, receive: Receive, send: Send, routed: list[Scope] | None = None
    ) -> None:
        fixed = self._fixed(scope)
        request_id = scope["state"]["request_id"]
        path: str = scope.get("path", "")
        no_store = path.startswith(_NO_STORE_PREFIXES)
        origin = header(scope, "origin")
        cors: list[tuple[bytes, bytes]] = []
        if origin is not None and self.settings.origin_allowed(origin):
            allowed = b"*" if "*" in self.settings.cors_origins else origin.encode("latin-1")
            cors = [
                (b"access-control-allow-origin", allowed),
                (b"vary", b"Origin"),
                (b"access-control-expose-headers", b"X-Request-Id, Retry-After"),
            ]
            if self.settings.cors_credentials:
                cors.append((b"access-control-allow-credentials", b"true"))

        async def reply(status: int, body: dict[str, Any], extra: list[Any]) -> None:
            for message in _json(status, body, [*fixed, *extra]):
                await send(message)

        # 1. preflight
        if (
            scope.get("method") == "OPTIONS"
            and origin is not None
            and (header(scope, "access-control-request-method") is not None)
        ):
            if not cors:
                await reply(
                    403,
                    {"error": "Origin not allowed", "code": "cross_origin_forbidden"},
                    [(b"cache-control", b"no-store")],
                )
                return
            await send(
                {
                    "type": "http.response.start",
                    "status": 204,
                    "headers": [
                        *fixed,
                        *cors,
                        (b"access-control-allow-methods", b"GET, POST, PATCH, DELETE, OPTIONS"),
                        (
                            b"access-control-allow-headers",
                            b"Authorization, Content-Type, X-Request-Id",
                        ),
                        (b"access-control-max-age", b"86400"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        # 2. origin guard of local development
        if origin_guard_fails(scope, self.settings):
            await reply(
                403,
                {"error": LOCAL_CROSS_ORIGIN_TEXT, "code": "cross_origin_forbidden"},
                [(b"cache-control", b"no-store")],
            )
            return

        started = False
        if scope.get("method") == "HEAD":
            scope, receive, send = head_as_get(scope, receive, send)
            if routed is not None:
                routed[0] = scope

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in (b"x-request-id", b"x-threadloom-node")
                ]
                headers.extend(fixed)
                headers.extend(cors)
                if no_store and not any(k.lower() == b"cache-control" for k, _ in headers):
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            log.exception("request %s failed", request_id)
            if not started:
                await reply(
                    500,
                    {
                        "error": "Internal server error",
                        "code": "internal_error",
                        "requestId": request_id,
                    },
                    [*cors, (b"cache-control", b"no-store")],
                )
