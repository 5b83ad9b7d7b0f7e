"""The server's routers: FastAPI's ``APIRouter`` that answers "no match" at once for a path
none of its routes can match.

FastAPI (0.16x) keeps each included router as one entry of the app's routes and finds a
request's route by asking every entry in turn; an entry asks each route of its router,
with per-route bookkeeping of its own, and the router that matches is asked again to
handle. With about thirty routers a request paid for most of the server's 108 routes
before its own: ``GET /api/health`` made 825 Python calls, 408 once the routers it does
not reach passed over it (docs/benchmarks.md, "Routing a request"). ``Router`` joins its
routes' path patterns (Starlette's, the ones each route matches with) into one, and
answers ``Match.NONE`` for a path that pattern does not match — exactly when no route of
the router could match the path, so FastAPI's choice of route (its 404, 405 and
redirects too) is unchanged.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter
from starlette.routing import Match
from starlette.types import Scope

_GROUP = re.compile(r"\(\?P<[^>]+>")


def joined_pattern(patterns: list[str]) -> re.Pattern[str]:
    """One pattern matching what any of ``patterns`` (Starlette's path patterns, each
    ``^…$``) matches; their named groups made plain, as two may share a name."""
    return re.compile("|".join(f"(?:{_GROUP.sub('(?:', p)})" for p in patterns))


class Router(APIRouter):
    """An ``APIRouter`` whose ``matches`` first checks the path against its routes' joined
    patterns; every router of the server is one (``tests/server/test_c08_routing.py``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate: re.Pattern[str] | None = None
        self._gate_routes = -1

    def gate(self) -> re.Pattern[str] | None:
        """The joined pattern of this router's routes; None (no check) when it holds
        anything but routes with a path pattern, or nothing."""
        routes = self.routes
        if self._gate_routes != len(routes):
            patterns: list[str] = []
            if not getattr(self, "_low_priority_routes", None):  # those match apart
                for route in routes:
                    regex = getattr(route, "path_regex", None)
                    if not isinstance(regex, re.Pattern):
                        patterns = []
                        break
                    patterns.append(regex.pattern)
            self._gate = joined_pattern(patterns) if patterns else None
            self._gate_routes = len(routes)
        return self._gate

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        gate = self._gate if self._gate_routes == len(self.routes) else self.gate()
        if gate is not None:
            path: str = scope["path"]
            root: str = scope.get("root_path", "")
            if root and path.startswith(root):  # the path the routes see (Starlette's rule)
                if len(path) == len(root):
                    path = ""
                elif path[len(root)] == "/":
                    path = path[len(root) :]
            if gate.match(path) is None:
                return Match.NONE, {}
        return super().matches(scope)
