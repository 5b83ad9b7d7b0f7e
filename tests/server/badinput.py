"""The tables and the mutations of the bad-input suite (``test_bad_input.py``).

``SAMPLES`` holds a valid body for every route that reads one, ``NO_BODY`` the routes that
read none, ``QUERY_INTEGERS`` the integer query parameters of every GET route (spec 08
§8.1.5) and ``STREAM_TWINS`` the WebSocket routes that share their GET twin's handshake.
``test_every_route_is_in_the_tables`` fails when the app serves a route none of them
names, so a new route cannot be left out of the suite.

A family turns a sample into bad requests: each mutation replaces one point of the body
(a key's value or an array item, found by walking the sample) or adds one key to an
object, and says which field the 400 must name.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fastapi.routing import iter_route_contexts
from starlette.routing import WebSocketRoute

from threadloom.server.app import _build
from threadloom.server.settings import ServerSettings

Point = tuple[str | int, ...]
UNKNOWN_WEBHOOK = "00000000-0000-4000-8000-000000000000"
"""No subscription has this id: a webhook route's valid sample answers 404, a bad one 400."""


@dataclass(frozen=True)
class Ids:
    """What the URLs and bodies of the samples refer to."""

    thread: str
    message: str
    user: str
    key: str
    schedule: str = "bad-input-schedule"
    trigger: str = "bad-input-trigger"

    def url(self, template: str, path: str = "a.txt") -> str:
        return (
            template.replace("{id:thread_id}", self.thread)
            .replace("{id}", self.thread)
            .replace("{message_id}", self.message)
            .replace("{user_id}", self.user)
            .replace("{key_id}", self.key)
            .replace("{schedule_id}", self.schedule)
            .replace("{trigger_id}", self.trigger)
            .replace("{grant_id}", "0" * 64)
            .replace("{tool_call_id}", "call_unknown")
            .replace("{path:fspath}", path)
            .replace("{webhook_id}", UNKNOWN_WEBHOOK)
            .replace("{event_id}", "evt_unknown")
            .replace("{name}", "bad_input_tool")
            .replace("{compaction_id}", "0" * 32)
        )


@dataclass(frozen=True)
class Sample:
    """A valid body for ``method path``; sent as ``user`` (None: no credentials).

    ``free``: rendered points whose children take any JSON value (metadata, arguments,
    properties), so type and size mutations are not made below them. ``form``: points whose
    value selects the form of the body (the ``action`` of a file POST): a wrong value there
    is refused as a whole body (field ``body``), not as that point."""

    method: str
    path: str
    body: Callable[[Ids], dict[str, Any]]
    free: tuple[str, ...] = ()
    form: tuple[str, ...] = ()
    user: str | None = "root"
    url_path: str = "a.txt"
    raw: bool = False
    """The route takes a non-JSON body too (a raw upload), so ``text/plain`` is no 415."""


def _attachment(name: str) -> dict[str, Any]:
    return {"name": name, "mimeType": "text/plain", "data": "aGk=", "description": "d"}


SAMPLES: dict[tuple[str, str], list[Sample]] = {
    ("POST", "/api/threads"): [
        Sample(
            "POST",
            "/api/threads",
            lambda ids: {
                "agent_id": "echo",
                "tags": ["t"],
                "arguments": {"a": "b"},
                "env": {"K": "v"},
                "properties": {"p": "q"},
                "overlap": "enqueue",
                "initial_messages": [
                    {
                        "role": "user",
                        "content": "hi",
                        "metadata": {"m": "x"},
                        "attachments": [_attachment("a.txt"), _attachment("b.txt")],
                    }
                ],
            },
            free=("arguments", "properties", "initial_messages[0].metadata"),
        )
    ],
    ("PATCH", "/api/threads/{id:thread_id}"): [
        Sample(
            "PATCH",
            "/api/threads/{id:thread_id}",
            lambda ids: {
                "tags": ["t"],
                "agent_id": "echo",
                "env": {"K": "v"},
                "env_patch": {"L": "w"},
                "env_delete": ["K"],
                "overlap": "reject",
            },
        )
    ],
    ("POST", "/api/threads/{id}/messages"): [
        Sample(
            "POST",
            "/api/threads/{id}/messages",
            lambda ids: {
                "content": "hello",
                "role": "user",
                "silent": False,
                "metadata": {"m": "x", "client_message_id": "c1"},
                "attachments": [_attachment("a.txt"), _attachment("b.txt")],
            },
            free=("metadata",),
        )
    ],
    ("PATCH", "/api/threads/{id}/messages/{message_id}"): [
        Sample(
            "PATCH",
            "/api/threads/{id}/messages/{message_id}",
            lambda ids: {"content": "edited", "silent": False, "metadata": {"m": "y"}},
            free=("metadata",),
        )
    ],
    ("POST", "/api/threads/{id:thread_id}/fork"): [
        Sample(
            "POST",
            "/api/threads/{id:thread_id}/fork",
            lambda ids: {"message_id": ids.message, "content": "edited"},
        )
    ],
    ("POST", "/api/threads/{id}/continue"): [
        Sample("POST", "/api/threads/{id}/continue", lambda ids: {"side": "a"})
    ],
    ("POST", "/api/threads/{id}/approvals/{tool_call_id}"): [
        Sample(
            "POST",
            "/api/threads/{id}/approvals/{tool_call_id}",
            lambda ids: {"approve": False, "reason": "not this one"},
        )
    ],
    ("POST", "/api/tools/{name}/call"): [
        Sample(
            "POST",
            "/api/tools/{name}/call",
            lambda ids: {"arguments": {"a": 1}, "thread_id": ids.thread, "agent_id": "echo"},
            free=("arguments",),
        )
    ],
    ("POST", "/api/markdown"): [
        Sample("POST", "/api/markdown", lambda ids: {"texts": ["# Hi", "**bold**"]})
    ],
    ("PUT", "/api/threads/{id}/state"): [
        Sample(
            "PUT",
            "/api/threads/{id}/state",
            lambda ids: {"state": {"todos": ["milk"]}, "version": 0},
            free=("state",),
        )
    ],
    ("POST", "/api/threads/{id}/compact"): [
        Sample("POST", "/api/threads/{id}/compact", lambda ids: {"keep_messages": 4})
    ],
    ("POST", "/api/threads/{id}/stop"): [
        Sample("POST", "/api/threads/{id}/stop", lambda ids: {"cascade": False})
    ],
    ("POST", "/api/threads/{id}/terminate"): [
        Sample("POST", "/api/threads/{id}/terminate", lambda ids: {"cascade": False})
    ],
    ("POST", "/api/threads/{id}/fs/{path:fspath}"): [
        Sample(
            "POST",
            "/api/threads/{id}/fs/{path:fspath}",
            lambda ids: {
                "data": "aGk=",
                "mimeType": "text/plain",
                "metadata": {"m": "x"},
                "width": 2,
                "height": 3,
            },
            free=("metadata",),
            url_path="new.txt",
            raw=True,
        ),
        Sample(
            "POST",
            "/api/threads/{id}/fs/{path:fspath}",
            lambda ids: {"action": "move", "destination": "/b.txt"},
            form=("action",),
            raw=True,
        ),
        Sample(
            "POST",
            "/api/threads/{id}/fs/{path:fspath}",
            lambda ids: {"action": "rename", "newName": "c.txt"},
            form=("action",),
            raw=True,
        ),
        Sample(
            "POST",
            "/api/threads/{id}/fs/{path:fspath}",
            lambda ids: {"type": "directory"},
            form=("type",),
            url_path="dir",
            raw=True,
        ),
    ],
    ("POST", "/api/agui/{agent}"): [
        Sample(
            "POST",
            "/api/agui/echo",  # a thread made on first use: a refused request makes none
            lambda ids: {
                "threadId": "8f1c6a52-0d9e-4b4a-9c1e-5d2f7a3b6c40",
                "runId": "run-1",
                "messages": [{"id": "m-1", "role": "user", "content": "hi"}],
            },
        )
    ],
    ("POST", "/api/auth/login"): [
        Sample(
            "POST",
            "/api/auth/login",
            lambda ids: {"username": "alice", "password": "a password"},
            user=None,
        )
    ],
    ("POST", "/api/auth/websocket-ticket"): [
        Sample(
            "POST",
            "/api/auth/websocket-ticket",
            lambda ids: {"pathname": f"/api/threads/{ids.thread}/stream"},
        )
    ],
    ("POST", "/api/api-keys"): [
        Sample(
            "POST",
            "/api/api-keys",
            lambda ids: {"name": "k", "expires_in_days": 30, "user_id": ids.user},
        )
    ],
    ("POST", "/api/users"): [
        Sample(
            "POST",
            "/api/users",
            lambda ids: {
                "username": "carol",
                "password": "a long password",
                "role": "user",
                "permissions": ["logs"],
                "roles": ["r"],
                "display_name": "Carol",
                "email": "carol@example.com",
                "avatar_url": "https://example.com/c.png",
            },
        )
    ],
    ("PATCH", "/api/users/{user_id}"): [
        Sample(
            "PATCH",
            "/api/users/{user_id}",
            lambda ids: {
                "password": "another long password",
                "role": "user",
                "permissions": ["logs"],
                "roles": ["r"],
                "display_name": "Bob",
                "email": "bob@example.com",
            },
        )
    ],
    ("PUT", "/api/users/{user_id}/quota"): [
        Sample(
            "PUT",
            "/api/users/{user_id}/quota",
            lambda ids: {
                "usd": 5.0,
                "tokens": 100000,
                "requests": 50,
                "window": "day",
                "warn_at": 0.8,
            },
        )
    ],
    ("POST", "/api/webhooks"): [
        Sample(
            "POST",
            "/api/webhooks",
            lambda ids: {
                "url": "https://8.8.8.8/hook",
                "event_types": ["run.settled", "thread.created"],
                "secret": "whsec_" + "A" * 44,
                "enabled": True,
                "description": "d",
            },
        )
    ],
    ("PATCH", "/api/webhooks/{webhook_id}"): [
        Sample(
            "PATCH",
            "/api/webhooks/{webhook_id}",
            lambda ids: {"enabled": False, "description": "d", "event_types": ["run.settled"]},
        )
    ],
    ("POST", "/api/schedules"): [
        Sample(
            "POST",
            "/api/schedules",
            lambda ids: {
                "id": "bad-input-new",
                "message": "report",
                "cron": "30 2 * * *",
                "timezone": "Europe/Berlin",
                "agent": "echo",
                "arguments": {"a": "b"},
                "user_id": "u1",
                "enabled": True,
                "overlap": "skip",
                "catchup": "once",
            },
            free=("arguments",),
        )
    ],
    ("PATCH", "/api/schedules/{schedule_id}"): [
        Sample(
            "PATCH",
            "/api/schedules/{schedule_id}",
            lambda ids: {
                "message": "report",
                "interval_s": 7200,
                "enabled": True,
                "overlap": "queue",
                "catchup": "skip",
            },
        )
    ],
    ("POST", "/api/triggers"): [
        Sample(
            "POST",
            "/api/triggers",
            lambda ids: {
                "id": "bad-input-new-trigger",
                "agent": "echo",
                "arguments": {"a": "b"},
                "user_id": "u1",
                "message": "Event: {body}",
                "enabled": True,
                "secret": "whsec_" + "A" * 44,
            },
            free=("arguments",),
        )
    ],
    ("PATCH", "/api/triggers/{trigger_id}"): [
        Sample(
            "PATCH",
            "/api/triggers/{trigger_id}",
            lambda ids: {"message": "Event: {body}", "enabled": True, "agent": "echo"},
        )
    ],
    ("POST", "/api/threads/import"): [
        Sample(
            "POST",
            "/api/threads/import",
            # the world's own thread: a mutation that stays a valid file is a 409 (its id
            # is stored), so no case stores anything
            lambda ids: {
                "format": "threadloom.thread",
                "version": 1,
                "root": ids.thread,
                "lineage": ["p"],
                "threads": [
                    {
                        "id": ids.thread,
                        "agent_id": "echo",
                        "origin_agent_id": "echo",
                        "tags": ["t"],
                        "created_at_us": 1,
                        "status": {"state": "idle", "since": 1},
                    }
                ],
            },
        )
    ],
    ("PUT", "/api/memory/items"): [
        Sample(
            "PUT",
            "/api/memory/items",
            lambda ids: {
                "namespace": ["notes", "2026"],
                "key": "k1",
                "value": {"text": "hi", "n": 1},
                "ttl_s": 3600,
                "user_id": ids.user,
            },
            free=("value",),
        )
    ],
    ("POST", "/api/memory/search"): [
        Sample(
            "POST",
            "/api/memory/search",
            lambda ids: {
                "namespace_prefix": ["notes"],
                "filter": {"n": {"$gte": 1}},
                "limit": 5,
                "user_id": ids.user,
            },
            free=("filter",),
        )
    ],
    ("POST", "/api/memory/namespaces"): [
        Sample(
            "POST",
            "/api/memory/namespaces",
            lambda ids: {
                "prefix": ["notes"],
                "suffix": ["2026"],
                "max_depth": 2,
                "limit": 5,
                "agent_id": "echo",
            },
        )
    ],
}

NO_BODY = {
    ("DELETE", "/api/triggers/{trigger_id}"),
    ("POST", "/api/triggers/{trigger_id}/fire"),  # its body is any text, the message
    ("DELETE", "/api/memory/items"),
    ("DELETE", "/api/schedules/{schedule_id}"),
    ("POST", "/api/schedules/{schedule_id}/fire"),
    ("DELETE", "/api/threads/{id:thread_id}"),
    ("DELETE", "/api/threads/{id}/messages/{message_id}"),
    ("DELETE", "/api/threads/{id}/compactions/{compaction_id}"),
    ("DELETE", "/api/threads/{id}/fs/{path:fspath}"),
    ("DELETE", "/api/auth/current-key"),
    ("DELETE", "/api/api-keys/{key_id}"),
    ("DELETE", "/api/oauth/grants/{grant_id}"),
    ("DELETE", "/api/users/{user_id}"),
    ("DELETE", "/api/users/{user_id}/quota"),
    ("POST", "/api/auth/logout"),
    ("DELETE", "/api/webhooks/{webhook_id}"),
    ("POST", "/api/webhooks/{webhook_id}/deliveries/{event_id}/redeliver"),
}

# GET route → (query the parameters need to be read, the integer parameters)
QUERY_INTEGERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "/api/threads": ("", ("limit", "offset", "startDate", "endDate")),
    "/api/threads/owners": ("", ()),
    "/api/threads/{id:thread_id}": ("", ()),
    "/api/threads/{id:thread_id}/export": ("", ()),
    "/api/threads/{id:thread_id}/forks": ("", ()),
    "/api/threads/{id}/messages": ("", ("limit", "offset", "depth")),
    "/api/threads/{id}/approvals": ("", ()),
    "/api/approvals": ("", ("limit", "offset")),
    "/api/threads/{id}/state": ("", ()),
    "/api/threads/{id}/compactions": ("", ()),
    "/api/threads/{id}/logs": ("", ("limit", "offset")),
    "/api/threads/{id}/logs/{log_id}": ("", ()),
    "/api/threads/{id}/cost": ("", ()),
    "/api/threads/{id}/subagents": ("", ()),
    "/api/threads/{id}/fs": ("find=*", ("limit",)),
    "/api/threads/{id}/fs/{path:fspath}": ("", ()),
    "/api/threads/{id}/stream": ("", ("since", "depth")),
    "/api/events": ("", ()),
    "/api/agents": ("", ()),
    "/api/prompts": ("", ()),
    "/api/tools": ("", ()),
    "/api/models": ("", ()),
    "/api/hooks": ("", ()),
    "/api/health": ("", ()),
    "/api/auth/me": ("", ()),
    "/api/auth/config": ("", ()),
    "/api/api-keys": ("", ()),
    "/api/oauth/grants": ("", ()),
    "/api/users": ("", ()),
    "/api/users/{user_id}/quota": ("", ()),
    "/api/webhooks": ("", ()),
    "/api/webhooks/{webhook_id}": ("", ()),
    "/api/webhooks/{webhook_id}/deliveries": ("", ()),
    "/api/webhook-deliveries": ("", ("limit",)),
    "/api/schedules": ("", ()),
    "/api/schedules/{schedule_id}": ("", ()),
    "/api/triggers": ("", ()),
    "/api/triggers/{trigger_id}": ("", ()),
    "/api/memory/items": ("namespace=notes&key=k1", ()),
    "/api/search": ("q=x", ("limit", "offset")),
}
STREAMS = ("/api/threads/{id}/stream", "/api/events")
STREAM_TWINS = {
    "/api/threads/{id}/stream": "/api/threads/{id}/stream",
    "/api/threads/{id}/logs": "/api/threads/{id}/logs",
    "/api/events": "/api/events",
}


def served_routes() -> tuple[set[tuple[str, str]], set[str]]:
    """The (method, path) pairs of the app's HTTP routes under /api, and its WebSocket
    paths, read from the route table."""
    http: set[tuple[str, str]] = set()
    sockets: set[str] = set()
    for route in iter_route_contexts(_build(ServerSettings()).router.routes):
        path = route.path or ""
        if not path.startswith("/api"):
            continue
        if isinstance(route.original_route, WebSocketRoute) or not route.methods:
            sockets.add(path)
            continue
        http.update((m, path) for m in route.methods if m != "HEAD")
    return http, sockets


# -- points and mutations -------------------------------------------------------------------


class Raw(str):
    """A JSON token sent as written (``NaN``, ``1e400``): ``json.dumps`` cannot make it."""


def render(point: Point) -> str:
    """``("initial_messages", 0, "role")`` → ``initial_messages[0].role`` (spec 08 §8.1.3)."""
    out = ""
    for part in point:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def escaped(key: str) -> str:
    """A key as the server names it in a field path: unprintable characters (NUL, lone
    surrogates) as ``\\uXXXX``."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in key)


def points(value: Any, at: Point = ()) -> Iterator[Point]:
    """Every key and array item below ``value``, parents first."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, child in items:
        here = (*at, key)
        yield here
        yield from points(child, here)


def get(value: Any, point: Point) -> Any:
    for part in point:
        value = value[part]
    return value


def replaced(body: dict[str, Any], point: Point, new: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    parent = get(out, point[:-1])
    parent[point[-1]] = new
    return out


def with_key(body: dict[str, Any], point: Point, key: str, new: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    get(out, point)[key] = new
    return out


def encode(body: Any) -> bytes:
    """The JSON text of ``body`` with ``Raw`` tokens as written; lone surrogates and NUL
    are sent as ``\\uXXXX`` escapes (valid JSON text)."""
    raws: list[str] = []

    def swap(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(str(value))
            return f"\x01{len(raws) - 1}\x01"
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    text = json.dumps(swap(body))
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x01{i}\x01"), raw)
    return text.encode()


@dataclass(frozen=True)
class Case:
    """One bad request: its label, body bytes and the field the 400 must name (``exact``:
    that path; else that path, one of its parents or children, or ``body`` for a form
    point). ``status``: the statuses allowed."""

    label: str
    body: bytes
    field: str | None
    exact: bool = True
    status: tuple[int, ...] = (400,)
    code: str | None = "invalid_request"
    content_type: str = "application/json"


@dataclass
class Mutator:
    sample: Sample
    body: dict[str, Any]
    cases: list[Case] = field(default_factory=list)

    def free(self, point: Point) -> bool:
        """Whether ``point`` lies below a free-form value."""
        name = render(point)
        return any(name.startswith(f + ".") or name.startswith(f + "[") for f in self.sample.free)

    def add(self, label: str, body: Any, field: str | None, **kw: Any) -> None:
        self.cases.append(Case(f"{label} at {field}", encode(body), field, **kw))


NONFINITE = (Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e400"), Raw("-1e999"))
INTEGERS: tuple[Any, ...] = (2**63, -(2**63) - 1, 2**64, 10**30, Raw("1e300"), -1, 0)
WRONG: tuple[Any, ...] = (True, 1.5, "s", [], {}, 7)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def surrogates(m: Mutator) -> None:
    for point in points(m.body):
        value = get(m.body, point)
        if isinstance(value, str):
            m.add("lone surrogate", replaced(m.body, point, value + "\ud800"), render(point))
            m.add("lone low surrogate", replaced(m.body, point, "\udfff"), render(point))
    for point in [(), *points(m.body)]:
        if isinstance(get(m.body, point), dict):
            key = "k\udc00"
            where = ".".join(p for p in (render(point), escaped(key)) if p)
            m.add("surrogate key", with_key(m.body, point, key, "v"), where)


def nul(m: Mutator) -> None:
    for point in points(m.body):
        value = get(m.body, point)
        if isinstance(value, str):
            m.add("NUL", replaced(m.body, point, value + "\x00z"), render(point))
    for point in [(), *points(m.body)]:
        if isinstance(get(m.body, point), dict):
            key = "k\x00"
            where = ".".join(p for p in (render(point), escaped(key)) if p)
            m.add("NUL key", with_key(m.body, point, key, "v"), where)


def nonfinite(m: Mutator) -> None:
    all_points = list(points(m.body))
    for i, point in enumerate(all_points):
        token = NONFINITE[i % len(NONFINITE)]
        m.add(f"{token}", replaced(m.body, point, token), render(point))
    for token in NONFINITE:  # every token once at the first point, and inside an array
        m.add(f"{token}", replaced(m.body, all_points[0], token), render(all_points[0]))
        m.add(f"[{token}]", replaced(m.body, all_points[0], [token]), render(all_points[0]) + "[0]")


def integers(m: Mutator) -> None:
    for i, point in enumerate(p for p in points(m.body) if not m.free(p)):
        number = INTEGERS[i % len(INTEGERS)]
        m.add(f"{number}", replaced(m.body, point, number), render(point), exact=False)
    huge_digits = Raw("9" * 5000)  # beyond Python's int-from-text limit: not parseable
    first = next(points(m.body))
    m.add("5000 digits", replaced(m.body, first, huge_digits), None, code="invalid_json")


def wrong_types(m: Mutator) -> None:
    for i, point in enumerate(p for p in points(m.body) if not m.free(p)):
        value = get(m.body, point)
        options = [w for w in WRONG if _json_kind(w) != _json_kind(value)]
        for wrong in (options[i % len(options)], options[(i + 2) % len(options)]):
            m.add(
                f"wrong type {wrong!r}", replaced(m.body, point, wrong), render(point), exact=False
            )
    for text in (b"[]", b'"s"', b"1", b"null", b"true", b"{", b'{"a": "\xff"}', b"{'a': 1}"):
        m.cases.append(Case(f"body {text!r}", text, None, code="invalid_json"))
    if not m.sample.raw:
        m.cases.append(
            Case(
                "text/plain",
                encode(m.body),
                None,
                status=(415,),
                code="unsupported_media_type",
                content_type="text/plain",
            )
        )


DEEP = 150


def deep(m: Mutator) -> None:
    nested: Any = "x"
    for _ in range(DEEP):
        nested = [nested]
    for point in points(m.body):
        m.add("deep array", replaced(m.body, point, nested), "body")
    obj: Any = 1
    for _ in range(DEEP):
        obj = {"a": obj}
    m.add("deep object", {**m.body, "zz": obj}, "body")
    m.cases.append(Case("very deep", b"[" * 100_000 + b"]" * 100_000, "body"))
    m.cases.append(Case("very deep object", b'{"a":' * 50_000 + b"1" + b"}" * 50_000, "body"))


HUGE = 1024 * 1024 + 1
"""Over the JSON limit (1 MiB) and the suite's upload limit (``test_bad_input.UPLOADS``)."""


def huge(m: Mutator) -> None:
    pad = {**m.body, "zz": "x" * HUGE}
    m.cases.append(
        Case("body over the limit", encode(pad), None, status=(413,), code="payload_too_large")
    )


FAMILIES: dict[str, Callable[[Mutator], None]] = {
    "surrogates": surrogates,
    "nul": nul,
    "nonfinite": nonfinite,
    "integers": integers,
    "wrong_types": wrong_types,
    "deep": deep,
    "huge": huge,
}
