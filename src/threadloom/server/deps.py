"""What every route needs before it acts: the principal (spec 10), the thread with its
access check (spec 08 §8.1.4 step 6), the JSON body (§8.1.1) and typed query parameters
(§8.1.5) — each failing with the spec's status and text.
"""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from fastapi import Depends, Request
from pydantic import ValidationError
from starlette.requests import HTTPConnection

from threadloom.engine.run.runtime import Runtime
from threadloom.server.agui.drops import Drops
from threadloom.server.auth.principal import (
    LOCAL_PRINCIPAL,
    Credentials,
    Principal,
    Revocations,
    digest,
)
from threadloom.server.auth.ratelimit import AuthLimits
from threadloom.server.errors import ApiError, bad_field, invalid
from threadloom.server.page_cache import PageCache
from threadloom.server.pipeline import origin_guard_fails, own_origin
from threadloom.server.settings import ServerSettings, is_loopback_host
from threadloom.store.base import ThreadRow, system_clock_us
from threadloom.thread.state import ThreadState
from threadloom.wire.model import Body
from threadloom.wire.problems import problems_of

T = TypeVar("T")
B = TypeVar("B", bound=Body)
MAX_INT = 2**63


class ServerContext:
    """What the app holds: the runtime, the settings, the credential resolver, the auth rate
    limits (spec 10 §10.11), the revocation signal of open sockets (§10.9 rule 5) and the
    clock of tickets and sessions (µs, replaceable in tests)."""

    def __init__(
        self, runtime: Runtime, settings: ServerSettings, credentials: Credentials
    ) -> None:
        self.runtime = runtime
        self.settings = settings
        self.credentials = credentials
        self.draining = False
        self.limits = AuthLimits(runtime.store)
        self.revocations = Revocations()
        self.clock: Callable[[], int] = system_clock_us
        self.pages = PageCache(settings.page_cache_bytes)
        runtime.failover_forgets.append(self.pages.clear)
        self._closers: set[Callable[[], object]] = set()
        self.agui_drops = Drops(settings.agui_stop_grace_s, self._stop_running)
        """AG-UI responses dropped by their client, whose runs stop (spec 13 §13.2.8)."""

    async def _stop_running(self, thread_id: str) -> None:
        """Stop the thread's run, if it runs (as ``POST …/stop``: ``aborted_by_user``)."""
        row = await self.runtime.store.get_thread(thread_id)
        if self.runtime.running(thread_id) or (row is not None and row.status.state == "running"):
            await self.runtime.stop(thread_id)

    def on_shutdown(self, close: Callable[[], object]) -> Callable[[], None]:
        """Register what ends an open stream when the server shuts down (at once when it
        already does); returns the function that unregisters it."""
        if self.draining:
            close()
        self._closers.add(close)
        return lambda: self._closers.discard(close)

    def begin_shutdown(self) -> None:
        """The server is going away: health answers 503 ``draining`` from now on and every
        open stream ends with close code 1001 ``Server shutting down``, so clients resume
        elsewhere or after the restart (spec 09 §9.10.1, spec 12 §12.6.4 rule 5)."""
        self.draining = True
        self.agui_drops.close()
        for close in list(self._closers):
            close()

    @property
    def open_streams(self) -> int:
        """Streams (WebSocket or SSE) still registered for shutdown."""
        return len(self._closers)

    @property
    def local_mode(self) -> bool:
        """Spec 10 §10.1 rule 3."""
        mode = self.settings.auth
        if mode == "required":
            return False
        if mode == "local":
            return True
        return is_loopback_host(self.settings.host) and not self.credentials.configured()


def context(request: HTTPConnection) -> ServerContext:
    ctx: ServerContext = request.app.state.ctx
    return ctx


def runtime(request: HTTPConnection) -> Runtime:
    return context(request).runtime


def credentials_revoked(request: HTTPConnection) -> None:
    """A route revoked a credential or changed a user's access: this node's open sockets
    re-check now (spec 10 §10.9 rule 5)."""
    context(request).revocations.notify()


UNAUTHORIZED = ApiError(401, "unauthorized", "Unauthorized")


def bearer(request: HTTPConnection) -> str | None:
    """The bearer token of the ``Authorization`` header; a malformed header is a 401."""
    value = request.headers.get("authorization")
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UNAUTHORIZED
    return token.strip()


def is_local_request(request: HTTPConnection, settings: ServerSettings) -> bool:
    """Spec 10 §10.8.1 rules 3–6 (rule 1 and 2 are checked by the caller)."""
    client = request.client
    try:
        peer_loopback = client is not None and ipaddress.ip_address(client.host).is_loopback
    except ValueError:
        peer_loopback = False
    if not peer_loopback:
        return False
    if not is_loopback_host(request.headers.get("host") or ""):
        return False
    if any(h in request.headers for h in ("forwarded", "x-forwarded-for", "x-real-ip")):
        return False
    return not origin_guard_fails(request.scope, settings)


SESSION_COOKIE = "threadloom_session"
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def client_address(request: HTTPConnection) -> str:
    return request.client.host if request.client is not None else ""


def is_https(request: HTTPConnection, settings: ServerSettings) -> bool:
    """Spec 10 §10.3 rule 4: HTTPS directly, or ``X-Forwarded-Proto: https`` from an address
    of ``THREADLOOM_TRUSTED_PROXIES``."""
    if request.url.scheme in ("https", "wss"):
        return True
    forwarded = (request.headers.get("x-forwarded-proto") or "").split(",")[0].strip().lower()
    return forwarded == "https" and settings.trusts_proxy(client_address(request))


def server_origin(request: HTTPConnection, settings: ServerSettings) -> str:
    """The origin this request was addressed to (scheme as ``is_https`` says, ``Host``)."""
    if is_https(request, settings):
        return f"https://{request.headers.get('host') or ''}"
    return own_origin(request.scope)


def same_or_allowed_origin(
    request: HTTPConnection, settings: ServerSettings, *, required: bool = False
) -> bool:
    """No ``Origin`` (unless ``required``), or the server's own origin, or one of
    ``THREADLOOM_CORS_ORIGINS``."""
    origin = request.headers.get("origin")
    if origin is None:
        return not required
    if origin == "null":
        return False
    origin = origin.rstrip("/")
    if origin in (own_origin(request.scope), server_origin(request, settings)):
        return True
    return settings.origin_allowed(origin)


async def token_principal(
    request: HTTPConnection, token: str, *, counted: bool = True
) -> Principal:
    """The principal of a presented token; 401 when it is unknown, expired or revoked. A
    ``counted`` failure (a bearer string: header or ``?token=``) counts toward the limit of
    failed authentications per client address, past which the answer is 429 (spec 10
    §10.11; valid credentials are never limited)."""
    ctx = context(request)
    found = await ctx.credentials.authenticate(token)
    if found is not None:
        return found
    if counted:
        ctx.limits.bearer_failures.take(client_address(request))
    raise UNAUTHORIZED


async def local_principal(request: HTTPConnection) -> Principal:
    """The local principal for a request without credentials (spec 10 §10.8.1), else 401."""
    ctx = context(request)
    await ctx.credentials.refresh()
    if ctx.local_mode and is_local_request(request, ctx.settings):
        return LOCAL_PRINCIPAL
    raise UNAUTHORIZED


async def principal(request: Request) -> Principal:
    """Authenticate the request (spec 08 §8.1.4 step 4, spec 10 §10.3, §10.8.1).

    The presented credential is remembered in ``request.state``: ``credential_digest`` (its
    SHA-256) and ``credential_source`` (``"bearer"`` or ``"cookie"``), for logout, key
    revocation and tickets."""
    state = request.scope.setdefault("state", {})
    cached = state.get("principal")
    if isinstance(cached, Principal):
        return cached
    ctx = context(request)
    token = bearer(request)
    source = "bearer"
    if token is None:
        token = request.cookies.get(SESSION_COOKIE) or None
        source = "cookie"
    if token is not None:
        found = await token_principal(request, token, counted=source == "bearer")
        if (
            source == "cookie"
            and request.method not in _SAFE_METHODS
            and not same_or_allowed_origin(request, ctx.settings)
        ):
            raise ApiError(403, "forbidden", "Cross-origin request refused")
        state["credential_digest"] = digest(token)
        state["credential_source"] = source
    else:
        found = await local_principal(request)
    state["principal"] = found
    return found


async def admin(who: Principal = Depends(principal)) -> Principal:
    """Admin-only route families (step 5)."""
    if not who.is_admin:
        raise ApiError(403, "admin_required", "Forbidden: Admin access required")
    return who


async def accessible_thread(request: HTTPConnection, thread_id: str, who: Principal) -> ThreadRow:
    """The thread ``thread_id`` when ``who`` may see it: 404 when it does not exist, 403
    when it is not accessible (spec 10 §10.6 rules 3–5). A pending message held back
    from the store (``engine/step/pending.py``) is committed first: the caller is about to look."""
    the_runtime = runtime(request)
    if not storable(thread_id):
        return checked_access(thread_id, None, who)
    await the_runtime.hub.commit_deferred(thread_id)
    return checked_access(thread_id, await the_runtime.store.get_thread(thread_id), who)


def checked_access(thread_id: str, row: ThreadRow | None, who: Principal) -> ThreadRow:
    """``row``, the thread ``thread_id`` as read, when ``who`` may see it: 404 when it
    does not exist (``None``), 403 when it is not accessible (spec 10 §10.6 rules 3–5)."""
    if row is None:
        raise ApiError(404, "thread_not_found", f"Thread not found: {thread_id}")
    if not who.may_access(row.user_id):
        raise ApiError(403, "forbidden", "Forbidden: You don't have access to this thread")
    return row


async def thread_row(id: str, request: Request, who: Principal = Depends(principal)) -> ThreadRow:
    """The thread named by the path, visible to the caller (step 6)."""
    return await accessible_thread(request, id, who)


def state_of(request: HTTPConnection, row: ThreadRow) -> ThreadState:
    """An at-rest ThreadState over the row the access check read (no second read; its
    ``children`` snapshot is empty — routes read the registry with ``get_children()``)."""
    return ThreadState(runtime(request).hub, row)


async def logs_permission(
    row: ThreadRow = Depends(thread_row), who: Principal = Depends(principal)
) -> ThreadRow:
    """Routes that need the ``logs`` permission (step 7)."""
    if not who.has_permission("logs"):
        raise ApiError(403, "permission_required", "Forbidden: 'logs' access required")
    return row


# -- bodies (spec 08 §8.1.1) --------------------------------------------------------------


def is_json_type(content_type: str | None) -> bool:
    """``application/json``, any ``application/…+json``, or no type at all (§8.1.1 rule 3)."""
    if content_type is None:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "application/json":
        return True
    return media.startswith("application/") and media.endswith("+json")


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused with 413 as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def too_large(limit: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"Request body too large (limit {limit} bytes)")


async def json_object(
    request: Request, limit: int | None = None, *, required: str | None = None
) -> dict[str, Any]:
    """The JSON object body; absent or empty → ``{}`` (415, 413, 400 as the spec says), or a
    400 with the text ``required`` when the route needs a body."""
    if not is_json_type(request.headers.get("content-type")):
        raise ApiError(415, "unsupported_media_type", "Content-Type must be application/json")
    from threadloom.server.settings import JSON_BODY_LIMIT

    raw = await read_body(request, limit or JSON_BODY_LIMIT)
    if not raw.strip():
        if required is not None:
            raise bad_field("body", "is required", required)
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "invalid_json", "Invalid JSON in request body") from None
    except RecursionError:  # deeper than the parser's stack: bad input, never a 500
        raise too_deep() from None
    if not isinstance(value, dict):
        raise ApiError(400, "invalid_json", "Request body must be a JSON object")
    problems = json_problems(value)
    if problems:
        raise invalid(f"{problems[0][0]} {problems[0][1]}", problems)
    return value


def parse(model: type[B], body: dict[str, Any]) -> B:
    """``body`` (a JSON object, ``json_object``) as the request model ``model``, else the
    400 of spec 08 §8.1.3 in the model's words: the first problem's sentence, every
    problem (the first only, for a model that says so) as ``details``."""
    try:
        return model.model_validate(body)
    except ValidationError as error:
        found = problems_of(error)
        if model.one_problem:
            found = found[:1]
        raise invalid(found[0].message, [(p.field, p.problem) for p in found]) from None


async def body_of(request: Request, model: type[B], limit: int | None = None) -> B:
    """The request's JSON object body as ``model`` (415, 413 and 400 as ``json_object``
    and ``parse`` answer)."""
    return parse(model, await json_object(request, limit))


MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects a JSON body may have. Deeper values would blow
the stack of the code that stores or renders them (a 500), so they are refused up front."""
MAX_JSON_PROBLEMS = 20
_LONE_SURROGATE = "must not contain a lone UTF-16 surrogate"
_NUL = "must not contain a NUL character"
_NOT_FINITE = "must be a finite number (not NaN or Infinity)"

_Path = tuple[Any, str | int] | None
"""A point of a JSON value as a chain ``(parent, key)``, rendered only for a problem."""


def json_problems(value: Any) -> list[tuple[str, str]]:
    """The points of a parsed JSON body that no route can take, as ``(field, problem)``
    in document order (at most ``MAX_JSON_PROBLEMS``): strings and keys holding a lone
    UTF-16 surrogate (valid JSON escapes, but not Unicode text: no store can encode them)
    or a NUL character (PostgreSQL text cannot hold one, so neither store takes it), and
    numbers that are not finite (``NaN``, ``Infinity``, or a literal past the double range
    such as ``1e400``). Nesting deeper than ``MAX_JSON_DEPTH`` is a 400 at once. One
    iterative walk, whatever the route: the routes then check types and ranges."""
    problems: list[tuple[str, str]] = []
    stack: list[tuple[Any, int, _Path]] = [(value, 0, None)]
    while stack and len(problems) < MAX_JSON_PROBLEMS:
        item, depth, at = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                problems.append((json_path(at), problem))
        elif isinstance(item, float):
            if not math.isfinite(item):
                problems.append((json_path(at), _NOT_FINITE))
        elif isinstance(item, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise too_deep()
            children: list[tuple[Any, int, _Path]] = []
            if isinstance(item, dict):
                for key, child in item.items():
                    problem = text_problem(key)
                    if problem is not None:
                        problems.append((json_path((at, key)), problem))
                    children.append((child, depth + 1, (at, key)))
            else:
                children = [(child, depth + 1, (at, i)) for i, child in enumerate(item)]
            stack.extend(reversed(children))
    return problems[:MAX_JSON_PROBLEMS]


def storable(text: str) -> bool:
    """Whether ``text`` can be compared with stored text: a path id with a NUL (``%00``)
    is never found, and is answered as such before it reaches a store that cannot take
    it (PostgreSQL refuses NUL in text)."""
    return text_problem(text) is None


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as text (None: it can)."""
    if "\x00" in text:
        return _NUL
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return _LONE_SURROGATE
    return None


def json_path(at: _Path) -> str:
    """``initial_messages[0].metadata.key`` (spec 08 §8.1.3 rule 3); ``body`` for the root.
    Unprintable characters of keys (NUL, lone surrogates) are written as ``\\uXXXX``
    and long keys are cut, so the answer can always be encoded and stays short."""
    parts: list[str | int] = []
    while at is not None:
        at, key = at
        parts.append(key)
    out = ""
    for part in reversed(parts):
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in part[:64])
            name += "…" if len(part) > 64 else ""
            out += f".{name}" if out else name
    return out or "body"


def too_deep() -> ApiError:
    return bad_field(
        "body",
        f"is nested deeper than {MAX_JSON_DEPTH} levels",
        f"Request body is nested too deeply (limit {MAX_JSON_DEPTH} levels)",
    )


# -- query parameters (spec 08 §8.1.5) ----------------------------------------------------


class Query:
    """Typed access to the query string: the last occurrence of a parameter wins."""

    def __init__(self, request: Request) -> None:
        """A NUL character in any value is a 400 naming its parameter, whether or not the
        route reads it: no store can compare text with one (lone surrogates cannot occur:
        the query string is decoded with replacement characters)."""
        self._params = request.query_params
        for name, value in self._params.multi_items():
            if "\x00" in value:
                raise bad_field(name, _NUL)

    def raw(self, name: str) -> str | None:
        """The last value of ``name``."""
        values = self._params.getlist(name)
        return values[-1] if values else None

    def has(self, name: str) -> bool:
        return name in self._params

    def int(
        self,
        name: str,
        default: int | None = None,
        *,
        cap: int | None = None,
        maximum: int = MAX_INT - 1,
    ) -> int | None:
        """Decimal digits below 2^63 (§8.1.5 rule 1); values above ``cap`` are read as
        ``cap``, values above ``maximum`` (a bound the store needs) are a 400."""
        value = self.raw(name)
        if value is None or value == "":
            return default
        if not value.isascii() or not value.isdigit() or len(value) > 19 or int(value) >= MAX_INT:
            raise bad_field(name, "must be a non-negative integer")
        number = int(value)
        if number > maximum:
            raise bad_field(name, f"must be a non-negative integer of at most {maximum}")
        return min(number, cap) if cap is not None else number

    def bool(self, name: str, default: bool | None = None) -> bool | None:
        value = self.raw(name)
        if value is None or value == "":
            return default
        lowered = value.lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
        raise bad_field(name, "must be true or false")

    def enum(self, name: str, allowed: Sequence[str], default: str | None = None) -> str | None:
        value = self.raw(name)
        if value is None or value == "":
            return default
        lowered = value.lower()
        if lowered not in allowed:
            raise bad_field(name, f"must be {_choices(allowed)}")
        return lowered

    def items(self, name: str) -> list[str]:
        value = self.raw(name)
        if value is None:
            return []
        out: list[str] = []
        for item in value.split(","):
            item = item.strip()
            if item and item not in out:
                out.append(item)
        return out

    def enum_list(self, name: str, allowed: Sequence[str]) -> list[str]:
        items = [i.lower() for i in self.items(name)]
        for item in items:
            if item not in allowed:
                raise bad_field(name, f"must be a list of {_choices(allowed, 'and')}")
        return items


def _choices(allowed: Sequence[str], last: str = "or") -> str:
    quoted = [f"'{a}'" for a in allowed]
    if len(quoted) == 1:
        return quoted[0]
    return ", ".join(quoted[:-1]) + f" {last} " + quoted[-1]


async def query(request: Request) -> Query:
    """The typed query string. ``async`` on purpose: FastAPI runs a plain ``def``
    dependency in its thread pool, a thread hop per request for a few dict lookups."""
    return Query(request)
