"""The OAuth 2 authorization server MCP hosts sign in with (spec 10 §10.15).

Authlib's framework-neutral ``AuthorizationServer`` does the protocol: the authorization
code grant with PKCE (RFC 7636, S256 only), refresh with rotation, dynamic client
registration (RFC 7591), revocation (RFC 7009) and the metadata's validation (RFC 8414).
This module gives it Threadloom's parts: clients, codes and tokens of the store, users as
resource owners, opaque tokens (``tlo_`` / ``tlr_``, kept as SHA-256 digests) and the
resource indicators of RFC 8707. What authlib has no module for — the protected-resource
metadata of RFC 9728 and the resource check — is the few lines below.

Authlib is synchronous and the store asynchronous: ``OAuthServer.call`` runs one authlib
request in a worker thread, whose store calls go back to the event loop.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, TypeVar
from urllib.parse import urlsplit

from threadloom.records import OAuthClient, OAuthCode, OAuthToken
from threadloom.server.auth.principal import digest, new_oauth_tokens
from threadloom.store.base import Store, UserRow

T = TypeVar("T")

SCOPE: Final = "threadloom"
"""The one scope: the signed-in user's own rights (spec 10 §10.4), as their API key has."""
CODE_SECONDS: Final = 300
ACCESS_SECONDS: Final = 3600
REFRESH_SECONDS: Final = 30 * 24 * 3600
AUTH_METHODS: Final = ("none", "client_secret_basic", "client_secret_post")
MAX_REDIRECT_URIS: Final = 20
_REFUSED_SCHEMES: Final = frozenset({"javascript", "data", "file", "vbscript", "blob", "about"})
STORE_CALL_TIMEOUT_S: Final = 30.0


def available() -> bool:
    """Whether authlib (the ``oauth`` extra) is installed."""
    try:
        import authlib.oauth2  # noqa: F401
    except ImportError:
        return False
    return True


def now_us() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True)
class Urls:
    """Where this server is, as clients reach it: the issuer (the base URL) and the rest."""

    base: str

    @property
    def secure(self) -> bool:
        """OAuth's transport rule (authlib's): https, or http on a loopback host."""
        from authlib.common.security import is_secure_transport

        return bool(is_secure_transport(self.base))

    @property
    def issuer(self) -> str:
        return self.base

    @property
    def mcp(self) -> str:
        return self.base + "/mcp"

    @property
    def resource_metadata(self) -> str:
        """The protected-resource metadata of ``/mcp`` (RFC 9728 §3.1: the well-known name
        inserted before the resource's path)."""
        parts = urlsplit(self.base)
        return (
            f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}/mcp"
        )

    def resource_of(self, value: str | None) -> str | None:
        """The resource indicator ``value`` names (RFC 8707) when it is this server — its
        base URL or its ``/mcp`` — normalised; None when it names another."""
        if value is None or value == "":
            return self.mcp
        plain = value.rstrip("/")
        return plain if plain in (self.base, self.mcp) else None

    def authorization_server_metadata(self) -> dict[str, Any]:
        """RFC 8414 metadata, checked with authlib's ``AuthorizationServerMetadata``."""
        from authlib.oauth2.rfc8414 import AuthorizationServerMetadata

        metadata = AuthorizationServerMetadata(
            issuer=self.issuer,
            authorization_endpoint=f"{self.base}/oauth/authorize",
            token_endpoint=f"{self.base}/oauth/token",
            registration_endpoint=f"{self.base}/oauth/register",
            revocation_endpoint=f"{self.base}/oauth/revoke",
            scopes_supported=[SCOPE],
            response_types_supported=["code"],
            response_modes_supported=["query"],
            grant_types_supported=["authorization_code", "refresh_token"],
            token_endpoint_auth_methods_supported=list(AUTH_METHODS),
            revocation_endpoint_auth_methods_supported=list(AUTH_METHODS),
            code_challenge_methods_supported=["S256"],
            service_documentation=f"{self.base}/docs",
        )
        metadata.validate()
        return dict(metadata)

    def protected_resource_metadata(self, resource: str) -> dict[str, Any]:
        """RFC 9728 metadata of ``resource`` (``/mcp``, or the whole API)."""
        return {
            "resource": resource,
            "authorization_servers": [self.issuer],
            "scopes_supported": [SCOPE],
            "bearer_methods_supported": ["header"],
            "resource_name": "Threadloom",
            "resource_documentation": f"{self.base}/docs",
        }


def is_loopback_uri(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redirect_uri_problem(uri: str) -> str | None:
    """Why a client may not register ``uri`` as a redirect URI (None: it may): https; http
    only on a loopback host (RFC 8252 §7.3, as ``mcp-remote`` listens); a native app's own
    scheme (RFC 8252 §7.1); never a fragment or a scheme that runs or reads locally."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return f"{uri!r} is not a URI"
    scheme = parts.scheme.lower()
    if not scheme or parts.fragment:
        return f"{uri!r} must be an absolute URI without a fragment"
    if scheme in _REFUSED_SCHEMES:
        return f"the scheme of {uri!r} is not allowed"
    if scheme == "http" and not is_loopback_uri(parts.hostname):
        return f"{uri!r}: http is allowed only on a loopback host (localhost, 127.0.0.1, [::1])"
    if scheme in ("http", "https") and not parts.hostname:
        return f"{uri!r} has no host"
    return None


def _same_loopback_redirect(registered: str, presented: str) -> bool:
    """RFC 8252 §7.3: a loopback redirect URI matches whatever its port."""
    a, b = urlsplit(registered), urlsplit(presented)
    return (
        a.scheme == b.scheme == "http"
        and is_loopback_uri(a.hostname)
        and a.hostname == b.hostname
        and a.path == b.path
        and a.query == b.query
    )


class OAuthServer:
    """One request's authorization server over ``store`` for the server at ``urls``. Made
    per request (authlib's objects are cheap and hold the request's URLs)."""

    def __init__(
        self,
        store: Store,
        urls: Urls,
        loop: asyncio.AbstractEventLoop,
        clock: Callable[[], int] = now_us,
    ) -> None:
        self.store = store
        self.urls = urls
        self.loop = loop
        self.clock = clock
        self.server = _authlib_server(self)

    def wait(self, call: Awaitable[T]) -> T:
        """Run a store call on the event loop from authlib's worker thread."""
        future = asyncio.run_coroutine_threadsafe(_awaited(call), self.loop)
        return future.result(timeout=STORE_CALL_TIMEOUT_S)

    async def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` — one authlib request — in a worker thread."""
        return await asyncio.to_thread(fn)


async def _awaited(call: Awaitable[T]) -> T:
    return await call


# -- authlib's side: models, grants, endpoints -------------------------------------------------


def _authlib_server(owner: OAuthServer) -> Any:
    """The authlib ``AuthorizationServer`` of ``owner`` (authlib imported here: an extra)."""
    from authlib.oauth2 import rfc6749, rfc7009, rfc7591, rfc7636
    from authlib.oauth2.rfc6749 import grants
    from authlib.oauth2.rfc6749.errors import (
        InvalidClientError,
        InvalidGrantError,
        OAuth2Error,
    )
    from authlib.oauth2.rfc7591.errors import (
        InvalidClientMetadataError,
        InvalidRedirectURIError,
    )

    class InvalidTargetError(OAuth2Error):  # type: ignore[misc]
        """RFC 8707 §2: the resource indicator names another server."""

        error = "invalid_target"

    class Client(rfc6749.ClientMixin):  # type: ignore[misc]
        def __init__(self, record: OAuthClient) -> None:
            self.record = record
            self.metadata: dict[str, Any] = json.loads(record.metadata)

        @property
        def auth_method(self) -> str:
            method = self.metadata.get("token_endpoint_auth_method")
            return method if isinstance(method, str) else "client_secret_basic"

        def get_client_id(self) -> str:
            return self.record.client_id

        def get_default_redirect_uri(self) -> str | None:
            uris = self.metadata.get("redirect_uris") or []
            return uris[0] if len(uris) == 1 else None

        def get_allowed_scope(self, scope: str | None) -> str:
            return SCOPE  # the user's rights, whatever a host asks for (RFC 6749 §3.3)

        def check_redirect_uri(self, redirect_uri: str) -> bool:
            uris = self.metadata.get("redirect_uris") or []
            return redirect_uri in uris or any(
                _same_loopback_redirect(u, redirect_uri) for u in uris
            )

        def check_client_secret(self, client_secret: str) -> bool:
            stored = self.record.secret_digest
            return stored is not None and hmac.compare_digest(stored, digest(client_secret))

        def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
            return method == self.auth_method

        def check_response_type(self, response_type: str) -> bool:
            return response_type == "code"

        def check_grant_type(self, grant_type: str) -> bool:
            types = self.metadata.get("grant_types") or ["authorization_code"]
            return grant_type in types

    class Code(rfc6749.AuthorizationCodeMixin):  # type: ignore[misc]
        def __init__(self, record: OAuthCode) -> None:
            self.record = record
            self.code_challenge = record.code_challenge
            self.code_challenge_method = record.code_challenge_method

        def get_redirect_uri(self) -> str:
            return self.record.redirect_uri

        def get_scope(self) -> str:
            return self.record.scope

    class Grant(rfc6749.TokenMixin):  # type: ignore[misc]
        """A stored token row as authlib's token (refresh and revocation)."""

        def __init__(self, record: OAuthToken) -> None:
            self.record = record

        def check_client(self, client: Client) -> bool:
            return bool(self.record.client_id == client.get_client_id())

        def get_scope(self) -> str:
            return self.record.scope

        def get_expires_in(self) -> int:
            return ACCESS_SECONDS

        def is_expired(self) -> bool:
            return owner.clock() >= self.record.refresh_expires_at_us

        def is_revoked(self) -> bool:
            return False

    def user(user_id: str) -> UserRow | None:
        return owner.wait(owner.store.get_user(user_id))

    def check_resource(request: Any, granted: str) -> None:
        """RFC 8707 at the token endpoint: a resource given must be the one granted."""
        asked = request.payload.data.get("resource")
        if asked and owner.urls.resource_of(asked) != granted:
            raise InvalidTargetError("The resource is not the one this grant is for.")

    class CodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
        TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = list(AUTH_METHODS)

        def save_authorization_code(self, code: str, request: Any) -> None:
            data = request.payload.data
            record = OAuthCode(
                code_digest=digest(code),
                client_id=request.client.get_client_id(),
                user_id=request.user.id,
                redirect_uri=data.get("redirect_uri") or "",
                scope=request.scope or SCOPE,
                resource=data["resource"],
                code_challenge=data["code_challenge"],
                code_challenge_method=data.get("code_challenge_method") or "plain",
                expires_at_us=owner.clock() + CODE_SECONDS * 1_000_000,
            )
            owner.wait(owner.store.create_oauth_code(record))

        def query_authorization_code(self, code: str, client: Client) -> Code | None:
            record = owner.wait(owner.store.take_oauth_code(digest(code)))
            if record is None or record.used or owner.clock() >= record.expires_at_us:
                return None
            if record.client_id != client.get_client_id():
                return None
            return Code(record)

        def delete_authorization_code(self, authorization_code: Code) -> None:
            return None  # taken (marked used) when it was read

        def authenticate_user(self, authorization_code: Code) -> UserRow | None:
            return user(authorization_code.record.user_id)

        def validate_token_request(self) -> None:
            super().validate_token_request()
            check_resource(self.request, self.request.authorization_code.record.resource)

    class RefreshGrant(grants.RefreshTokenGrant):  # type: ignore[misc]
        TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = list(AUTH_METHODS)
        INCLUDE_NEW_REFRESH_TOKEN = True

        def authenticate_refresh_token(self, refresh_token: str) -> Grant | None:
            # taken at once: of two refreshes with one token, one wins (rotation)
            record = owner.wait(owner.store.take_oauth_refresh(digest(refresh_token)))
            if record is None or owner.clock() >= record.refresh_expires_at_us:
                return None
            return Grant(record)

        def authenticate_user(self, refresh_token: Grant) -> UserRow | None:
            return user(refresh_token.record.user_id)

        def revoke_old_credential(self, refresh_token: Grant) -> None:
            return None  # deleted when it was taken

        def validate_token_request(self) -> None:
            super().validate_token_request()
            check_resource(self.request, self.request.refresh_token.record.resource)

    class Revocation(rfc7009.RevocationEndpoint):  # type: ignore[misc]
        CLIENT_AUTH_METHODS: ClassVar[list[str]] = list(AUTH_METHODS)

        def query_token(self, token_string: str, token_type_hint: str | None) -> Grant | None:
            key = digest(token_string)
            found = owner.wait(owner.store.oauth_token_by_digest(key))
            if found is not None:
                return Grant(found[0])
            record = owner.wait(owner.store.get_oauth_refresh(key))
            return Grant(record) if record is not None else None

        def revoke_token(self, token: Grant, request: Any) -> None:
            owner.wait(owner.store.revoke_oauth_token(token.record.access_digest))

    class Registration(rfc7591.ClientRegistrationEndpoint):  # type: ignore[misc]
        def authenticate_token(self, request: Any) -> str:
            return "open"  # open registration (MCP hosts register themselves)

        def get_server_metadata(self) -> dict[str, Any]:
            metadata = owner.urls.authorization_server_metadata()
            metadata.pop("scopes_supported", None)  # a host's own scope is not refused
            return metadata

        def extract_client_metadata(self, request: Any) -> dict[str, Any]:
            data = request.payload.data
            uris = data.get("redirect_uris") if isinstance(data, dict) else None
            if not isinstance(uris, list) or not uris:
                raise InvalidRedirectURIError("redirect_uris is required")
            if len(uris) > MAX_REDIRECT_URIS:
                raise InvalidRedirectURIError(f"at most {MAX_REDIRECT_URIS} redirect_uris")
            for uri in uris:
                problem = redirect_uri_problem(uri) if isinstance(uri, str) else "not a string"
                if problem is not None:
                    raise InvalidRedirectURIError(problem)
            metadata: dict[str, Any] = super().extract_client_metadata(request)
            grant_types = metadata.get("grant_types") or ["authorization_code"]
            if "authorization_code" not in grant_types:
                raise InvalidClientMetadataError("grant_types must include authorization_code")
            metadata.setdefault("token_endpoint_auth_method", "client_secret_basic")
            return metadata

        def generate_client_info(self, request: Any) -> dict[str, Any]:
            info: dict[str, Any] = super().generate_client_info(request)
            data = request.payload.data or {}
            if data.get("token_endpoint_auth_method") == "none":
                info.pop("client_secret", None)  # a public client: no secret at all
                info.pop("client_secret_expires_at", None)
            return info

        def generate_client_id(self, request: Any) -> str:
            return "tlc_" + secrets.token_hex(16)

        def generate_client_secret(self, request: Any) -> str:
            return secrets.token_urlsafe(32)

        def save_client(
            self, client_info: Mapping[str, Any], client_metadata: Mapping[str, Any], request: Any
        ) -> Client:
            secret = client_info.get("client_secret")
            record = OAuthClient(
                client_id=client_info["client_id"],
                metadata=json.dumps(dict(client_metadata)),
                created_at_us=owner.clock(),
                secret_digest=digest(secret) if isinstance(secret, str) else None,
            )
            owner.wait(owner.store.create_oauth_client(record))
            return Client(record)

    class Server(rfc6749.AuthorizationServer):  # type: ignore[misc]
        def query_client(self, client_id: str) -> Client | None:
            record = owner.wait(owner.store.get_oauth_client(client_id))
            return Client(record) if record is not None else None

        def save_token(self, token: Mapping[str, Any], request: Any) -> None:
            now = owner.clock()
            source = request.authorization_code or request.refresh_token
            record = source.record
            grant_id = record.code_digest if isinstance(record, OAuthCode) else record.grant_id
            refresh = token.get("refresh_token") or new_oauth_tokens()[1]
            row = OAuthToken(
                access_digest=digest(token["access_token"]),
                refresh_digest=digest(refresh),
                grant_id=grant_id,
                client_id=request.client.get_client_id(),
                user_id=request.user.id,
                scope=token.get("scope") or SCOPE,
                resource=record.resource,
                issued_at_us=now,
                expires_at_us=now + ACCESS_SECONDS * 1_000_000,
                refresh_expires_at_us=now + REFRESH_SECONDS * 1_000_000,
            )
            if not owner.wait(owner.store.create_oauth_token(row)):
                raise InvalidGrantError("The user of this grant no longer exists.")

        def create_oauth2_request(self, request: Any) -> Any:
            return request  # built by ``form_request`` before the worker thread

        def create_json_request(self, request: Any) -> Any:
            return request

        def handle_response(self, status: int, body: Any, headers: Any) -> Any:
            return status, body, list(headers)

        def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
            return None

        def handle_error_response(self, request: Any, error: Any) -> Any:
            return self.handle_response(*error(self.get_error_uri(request, error)))

    def generate_token(
        grant_type: str,
        client: Client,
        user: Any = None,
        scope: str | None = None,
        expires_in: int | None = None,
        include_refresh_token: bool = True,
    ) -> dict[str, Any]:
        access, refresh = new_oauth_tokens()
        token: dict[str, Any] = {
            "token_type": "Bearer",
            "access_token": access,
            "expires_in": ACCESS_SECONDS,
            "scope": SCOPE,
        }
        if include_refresh_token:
            token["refresh_token"] = refresh
        return token

    server = Server(scopes_supported=None)
    server.register_token_generator("default", generate_token)
    server.register_grant(CodeGrant, [rfc7636.CodeChallenge(required=True)])
    server.register_grant(RefreshGrant)
    server.register_endpoint(Revocation)
    server.register_endpoint(Registration)
    server.errors = (OAuth2Error, InvalidClientError, InvalidTargetError)
    server.invalid_target = InvalidTargetError
    return server


def form_request(method: str, uri: str, data: Mapping[str, str], headers: Mapping[str, str]) -> Any:
    """An authlib ``OAuth2Request`` of already-read parameters (query and form)."""
    from authlib.oauth2.rfc6749 import OAuth2Request
    from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload

    class Request(OAuth2Request):  # type: ignore[misc]
        @property
        def args(self) -> Mapping[str, str]:
            return data

        @property
        def form(self) -> Mapping[str, str]:
            return data

    request = Request(method, uri, headers=dict(headers))
    request.payload = BasicOAuth2Payload(dict(data))
    return request


def json_request(uri: str, data: Any, headers: Mapping[str, str]) -> Any:
    """An authlib ``JsonRequest`` of an already-parsed JSON body (registration)."""
    from authlib.oauth2.rfc6749 import JsonRequest

    class Payload:
        def __init__(self, value: Any) -> None:
            self.data = value

    request = JsonRequest("POST", uri, headers=dict(headers))
    request.payload = Payload(data)
    return request
