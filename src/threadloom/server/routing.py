"""The server's routers: FastAPI's ``APIRouter`` that answers "no match" at once for a path
none of its routes can match.

FastAPI (0.16x) keeps each included router as one entry of the app's routes and finds a
request's route by asking every entry in turn; an entry asks each route of its router,
with per-route bookkeeping of its own, and the router that matches is asked again to
handle. With about thirty routers a request paid for most of the server's routes before
its own: ``GET /api/health`` cost 0.49 ms of CPU in-process, 0.31 ms once the routers it
does not reach answered from their paths' literal start (docs/benchmarks.md, "Routing a
request"). ``Router`` knows the literal start its routes share (the text before a path's
first ``{``: ``/api/threads/`` for the messages routes) and answers ``Match.NONE`` for a
path that does not begin with it — exactly when no route of the router could match the
path, so FastAPI's choice of route (and its 404, 405 and redirects) is unchanged.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter
from starlette.routing import Match
from starlette.types import Scope


def literal_start(path: str) -> str:
    """The text of a route path before its first parameter."""
    brace = path.find("{")
    return path if brace < 0 else path[:brace]


class Router(APIRouter):
    """An ``APIRouter`` whose ``matches`` first checks the literal start its routes
    share; every router of the server is one (``tests/server/test_routing.py``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate: str | None = None
        self._gate_routes = -1

    def gate(self) -> str:
        """The literal start every route path of this router begins with ('' when the
        router holds anything but plain routes, or nothing)."""
        routes = self.routes
        if self._gate is None or self._gate_routes != len(routes):
            starts: list[str] = []
            if getattr(self, "_low_priority_routes", None):  # matched apart: no gate
                routes = []
            for route in routes:
                path = getattr(route, "path", None)
                if not isinstance(path, str) or type(route).__name__ == "_IncludedRouter":
                    starts = []
                    break
                starts.append(literal_start(path))
            # by character: "/api/threads/" is the start of "/api/threads/{id}"
            self._gate = os.path.commonprefix(starts) if starts else ""  # noqa: RUF071
            self._gate_routes = len(routes)
        return self._gate

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        gate = self._gate if self._gate_routes == len(self.routes) else self.gate()
        if gate:
            path: str = scope["path"]
            root: str = scope.get("root_path", "")
            if root and path.startswith(root):  # the path the routes see (Starlette's rule)
                if len(path) == len(root):
                    path = ""
                elif path[len(root)] == "/":
                    path = path[len(root) :]
            if not path.startswith(gate):
                return Match.NONE, {}
        return super().matches(scope)
