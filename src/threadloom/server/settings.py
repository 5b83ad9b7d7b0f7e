"""Server settings: command-line options and the ``THREADLOOM_*`` environment (spec 10).

Everything the HTTP layer needs to know about its deployment lives here, read once at
start-up; nothing below ``server/`` reads the environment.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from threadloom.engine.run.retention import RetentionPolicy
from threadloom.errors import InvalidArgument, ThreadloomError
from threadloom.node.liveness import NodeTimings
from threadloom.store import DEFAULT_STORE

AuthMode = Literal["auto", "required", "local"]

DEFAULT_MAX_UPLOAD_BYTES = 32 * 1024 * 1024
JSON_BODY_LIMIT = 1024 * 1024


class SettingsError(ThreadloomError, ValueError):
    """A setting has a value the server cannot start with (exit code 2)."""


@functools.lru_cache(maxsize=256)
def is_loopback_host(host: str) -> bool:
    """True for ``localhost``, ``*.localhost``, 127.0.0.0/8 and ``::1`` (spec 10 §10.8.1).
    Remembered per ``Host`` value (a few per deployment, bounded): the pipeline asks for
    every request, and parsing an address with ``ipaddress`` is ~10 µs."""
    name = host.strip().lower()
    if name.startswith("[") and "]" in name:
        name = name[1 : name.index("]")]
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _flag(value: str | None, default: bool) -> bool:
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def _public_url(raw: str | None) -> str | None:
    """``THREADLOOM_PUBLIC_URL``: an absolute http(s) URL without query or fragment."""
    value = (raw or "").strip().rstrip("/")
    if not value:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise SettingsError(
            "THREADLOOM_PUBLIC_URL must be an absolute http(s) URL without query or fragment,"
            f" not {raw!r}"
        )
    return value


@dataclass(frozen=True)
class StreamSettings:
    """Bounds and timers of stream, log and event sockets (spec 09 §9.2.4, §9.9.5, §9.10,
    §9.11; spec 10 §10.9 rule 5). ``ServerSettings.from_env`` reads the first three from
    ``THREADLOOM_STREAM_BUFFER_FRAMES``, ``THREADLOOM_STREAM_BUFFER_BYTES`` and
    ``THREADLOOM_MAX_STREAMS_PER_PRINCIPAL``; the timers are for embedding code and tests."""

    buffer_frames: int = 1000
    buffer_bytes: int = 8 * 1024 * 1024
    heartbeat_s: float = 15.0
    write_timeout_s: float = 30.0
    revalidate_s: float = 60.0
    max_per_principal: int = 50
    max_client_message: int = 64 * 1024


_STREAM_ENV = (
    ("buffer_frames", "THREADLOOM_STREAM_BUFFER_FRAMES"),
    ("buffer_bytes", "THREADLOOM_STREAM_BUFFER_BYTES"),
    ("max_per_principal", "THREADLOOM_MAX_STREAMS_PER_PRINCIPAL"),
)


def _stream_from_env(env: Mapping[str, str]) -> StreamSettings:
    values: dict[str, int] = {}
    for name, key in _STREAM_ENV:
        raw = (env.get(key) or "").strip()
        if not raw:
            continue
        if not raw.isdigit() or int(raw) <= 0:
            raise SettingsError(f"{key} must be a positive integer")
        values[name] = int(raw)
    return StreamSettings(**values)


_SECONDS_ENV = (
    ("drain_seconds", "THREADLOOM_DRAIN_SECONDS"),
    ("node_heartbeat_s", "THREADLOOM_NODE_HEARTBEAT_SECONDS"),
    ("node_ttl_s", "THREADLOOM_NODE_TTL_SECONDS"),
    ("sweep_s", "THREADLOOM_SWEEP_SECONDS"),
    ("replay_seconds", "THREADLOOM_STREAM_REPLAY_SECONDS"),
    ("mcp_progress_s", "THREADLOOM_MCP_PROGRESS_SECONDS"),
    ("agui_stop_grace_s", "THREADLOOM_AGUI_STOP_GRACE_S"),
)


def _seconds(key: str, raw: str, *, zero_ok: bool) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (value >= 0 if zero_ok else value > 0) or value == float("inf"):
        kind = "a number of seconds, 0 or more" if zero_ok else "a positive number of seconds"
        raise SettingsError(f"{key} must be {kind}, not {raw!r}")
    return value


@dataclass(frozen=True)
class ServerSettings:
    """How this server is deployed. ``from_env`` reads the ``THREADLOOM_*`` variables."""

    host: str = "127.0.0.1"
    port: int = 8000
    store: str = DEFAULT_STORE
    read_url: str | None = None
    """A PostgreSQL read replica for ``GET`` pages and thread lists
    (``THREADLOOM_DATABASE_READ_URL``, spec 17 §17.5.4); None: the primary reads all."""
    read_wait_ms: float = 100.0
    """How long a replica read waits for the standby to catch up before the primary answers
    (``THREADLOOM_DATABASE_READ_WAIT_MS``)."""
    auth: AuthMode = "auto"
    admin_token: str | None = None
    cors_origins: tuple[str, ...] = ()
    cors_credentials: bool = False
    public_docs: bool = True
    allow_query_token: bool = True
    password_login: bool = True
    trusted_proxies: tuple[str, ...] = ()
    public_url: str | None = None
    """``THREADLOOM_PUBLIC_URL``: the server's own URL as clients reach it (behind a proxy),
    ``https://host[:port][/prefix]`` without a trailing slash; the OAuth issuer and the
    resource of ``/mcp`` are derived from it (spec 10 §10.15). None: from each request."""
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    stream: StreamSettings = field(default_factory=StreamSettings)
    node_id: str = field(default_factory=lambda: f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}")
    warm_messages: int | None = None
    """``Runtime.open(warm_messages=…)``; None: the runtime's default."""
    drain_seconds: float = 30.0
    """SIGTERM's grace period for running steps (spec 12 §12.6.4 rule 3, spec 04 §4.20.5)."""
    node_heartbeat_s: float = 5.0
    node_ttl_s: float = 15.0
    sweep_s: float = 5.0
    chunk_coalesce_ms: float = 50.0
    """Liveness timers of several nodes on PostgreSQL (spec 12 §12.2, §12.6): checked at
    start-up on every store so that a deployment's settings are refused before they
    matter."""
    page_cache_bytes: int = 16 * 1024 * 1024
    """Bodies of ``GET …/messages`` pages kept while their thread is unchanged
    (``server/page_cache.py``), in bytes; 0: none."""
    mcp_progress_s: float = 5.0
    """The steady interval of an MCP call's ``notifications/progress`` (spec 13 §13.5)."""
    replay_seconds: float = 3600.0
    replay_events: int = 10_000
    """The stream's replay window (spec 09 §9.6.1): event rows older than
    ``replay_seconds`` or with more than ``replay_events`` newer rows in their thread are
    pruned (``Runtime.open(event_retention=…)``)."""
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    """What the store keeps (spec 17 §17.2, ``THREADLOOM_RETENTION_*``): every rule off
    unless set (``Runtime.open(retention=…)``)."""
    metrics: bool = True
    """``THREADLOOM_METRICS``: whether ``GET /metrics`` answers (spec 17 §17.1); off: 404."""
    metrics_token: str | None = None
    """``THREADLOOM_METRICS_TOKEN``: a bearer token that may read ``/metrics`` and nothing
    else (a scraper's credential); an admin principal may read it too."""
    agui_stop_grace_s: float | None = 10.0
    """How long the run an AG-UI response followed goes on after the client dropped the
    response, waiting for a resume, before it is stopped (spec 13 §13.2.8); ``None``
    (``THREADLOOM_AGUI_STOP_GRACE_S=off``): a dropped response never stops its run."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> ServerSettings:
        """Settings from ``env`` (default ``os.environ``); keyword overrides win."""
        env = os.environ if env is None else env
        auth = (env.get("THREADLOOM_AUTH") or "auto").strip().lower()
        if auth not in ("auto", "required", "local"):
            raise SettingsError("THREADLOOM_AUTH must be auto, required or local")
        token = env.get("THREADLOOM_ADMIN_TOKEN") or None
        if token is not None and len(token) < 32:
            raise SettingsError("THREADLOOM_ADMIN_TOKEN must be at least 32 characters")
        metrics_token = env.get("THREADLOOM_METRICS_TOKEN") or None
        if metrics_token is not None and len(metrics_token) < 32:
            raise SettingsError("THREADLOOM_METRICS_TOKEN must be at least 32 characters")
        origins = tuple(
            o.strip().rstrip("/") for o in (env.get("THREADLOOM_CORS_ORIGINS") or "").split(",")
        )
        try:
            upload = int(env.get("THREADLOOM_MAX_UPLOAD_BYTES") or DEFAULT_MAX_UPLOAD_BYTES)
        except ValueError:
            raise SettingsError("THREADLOOM_MAX_UPLOAD_BYTES must be an integer") from None
        values: dict[str, object] = {
            "auth": auth,
            "admin_token": token,
            "cors_origins": tuple(o for o in origins if o),
            "cors_credentials": _flag(env.get("THREADLOOM_CORS_CREDENTIALS"), False),
            "public_docs": _flag(env.get("THREADLOOM_PUBLIC_DOCS"), True),
            "allow_query_token": _flag(env.get("THREADLOOM_ALLOW_QUERY_TOKEN"), True),
            "password_login": _flag(env.get("THREADLOOM_PASSWORD_LOGIN"), True),
            "trusted_proxies": tuple(
                p.strip()
                for p in (env.get("THREADLOOM_TRUSTED_PROXIES") or "").split(",")
                if p.strip()
            ),
            "max_upload_bytes": upload,
            "stream": _stream_from_env(env),
            "public_url": _public_url(env.get("THREADLOOM_PUBLIC_URL")),
            "metrics": _flag(env.get("THREADLOOM_METRICS"), True),
            "metrics_token": metrics_token,
        }
        try:
            values["retention"] = RetentionPolicy.from_env(env)
        except InvalidArgument as exc:
            raise SettingsError(str(exc)) from None
        for name, key in _SECONDS_ENV:
            raw = (env.get(key) or "").strip()
            if raw:
                if name == "agui_stop_grace_s" and raw.lower() == "off":
                    values[name] = None
                    continue
                zero_ok = name in ("drain_seconds", "agui_stop_grace_s")
                try:
                    values[name] = _seconds(key, raw, zero_ok=zero_ok)
                except SettingsError as exc:
                    if name != "agui_stop_grace_s":
                        raise
                    raise SettingsError(f"{exc} (or off)") from None
        warm = (env.get("THREADLOOM_WARM_MESSAGES") or "").strip()
        if warm:
            if not warm.isdigit():
                raise SettingsError("THREADLOOM_WARM_MESSAGES must be a whole number, 0 or more")
            values["warm_messages"] = int(warm)
        pages = (env.get("THREADLOOM_PAGE_CACHE_BYTES") or "").strip()
        if pages:
            if not pages.isdigit():
                raise SettingsError("THREADLOOM_PAGE_CACHE_BYTES must be a whole number, 0 or more")
            values["page_cache_bytes"] = int(pages)
        coalesce = (env.get("THREADLOOM_CHUNK_COALESCE_MS") or "").strip()
        if coalesce:
            try:
                values["chunk_coalesce_ms"] = float(coalesce)
            except ValueError:
                raise SettingsError(
                    "THREADLOOM_CHUNK_COALESCE_MS must be a number of milliseconds,"
                    f" not {coalesce!r}"
                ) from None
        events = (env.get("THREADLOOM_STREAM_REPLAY_EVENTS") or "").strip()
        if events:
            if not events.isdigit() or int(events) < 1:
                raise SettingsError("THREADLOOM_STREAM_REPLAY_EVENTS must be a positive integer")
            values["replay_events"] = int(events)
        if env.get("THREADLOOM_NODE_ID"):
            values["node_id"] = env["THREADLOOM_NODE_ID"]
        store = env.get("THREADLOOM_DATABASE_URL") or env.get("THREADLOOM_STORE")
        if store:  # spec 12 §12.8 rule 7 names the first; the second is older
            values["store"] = store
        read_url = (env.get("THREADLOOM_DATABASE_READ_URL") or "").strip()
        if read_url:
            values["read_url"] = read_url
        read_wait = (env.get("THREADLOOM_DATABASE_READ_WAIT_MS") or "").strip()
        if read_wait:
            try:
                values["read_wait_ms"] = float(read_wait)
            except ValueError:
                raise SettingsError(
                    "THREADLOOM_DATABASE_READ_WAIT_MS must be a number of milliseconds,"
                    f" not {read_wait!r}"
                ) from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls(**values)  # type: ignore[arg-type]
        settings.check()
        return settings

    def node_timings(self) -> NodeTimings:
        """The liveness timings of spec 12 §12.6.1."""
        return NodeTimings(
            self.node_heartbeat_s, self.node_ttl_s, self.sweep_s, self.chunk_coalesce_ms
        )

    def check(self) -> None:
        """Refuse combinations spec 10 and spec 12 forbid (exit code 2 at start-up)."""
        try:
            self.node_timings().check(
                "THREADLOOM_NODE_HEARTBEAT_SECONDS",
                "THREADLOOM_NODE_TTL_SECONDS",
                "THREADLOOM_SWEEP_SECONDS",
            )
        except InvalidArgument as exc:
            raise SettingsError(str(exc)) from None
        if self.read_url is not None and not self.store.startswith(("postgresql:", "postgres:")):
            raise SettingsError(
                "THREADLOOM_DATABASE_READ_URL names a PostgreSQL read replica: it needs a"
                " PostgreSQL store (THREADLOOM_DATABASE_URL=postgresql://…)"
            )
        if self.read_url is not None and not self.read_url.startswith(("postgresql:", "postgres:")):
            raise SettingsError(
                "THREADLOOM_DATABASE_READ_URL must be a postgresql:// URL of a read replica"
            )
        if not 0 <= self.read_wait_ms <= 60_000:
            raise SettingsError("THREADLOOM_DATABASE_READ_WAIT_MS must be between 0 and 60000")
        if self.cors_credentials and "*" in self.cors_origins:
            raise SettingsError(
                "THREADLOOM_CORS_CREDENTIALS=1 cannot be combined with THREADLOOM_CORS_ORIGINS=*"
            )
        if self.auth == "local" and not is_loopback_host(self.host):
            raise SettingsError(
                "THREADLOOM_AUTH=local is only allowed when the server listens on a loopback "
                "address (127.0.0.1, ::1 or localhost)"
            )

    def trusts_proxy(self, address: str) -> bool:
        """Whether ``address`` is listed in ``THREADLOOM_TRUSTED_PROXIES`` (addresses or
        networks such as ``10.0.0.0/8``)."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        for entry in self.trusted_proxies:
            try:
                if ip in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
        return False

    def uvicorn_proxy_options(self) -> dict[str, object]:
        """uvicorn's proxy-header handling, on for exactly ``THREADLOOM_TRUSTED_PROXIES`` (its
        default would trust ``X-Forwarded-*`` from 127.0.0.1)."""
        if not self.trusted_proxies:
            return {"proxy_headers": False}
        return {"proxy_headers": True, "forwarded_allow_ips": list(self.trusted_proxies)}

    def origin_allowed(self, origin: str) -> bool:
        return "*" in self.cors_origins or origin.rstrip("/") in self.cors_origins
