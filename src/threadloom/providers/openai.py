"""The OpenAI SDK adapters (spec 05 §5.8) and the plumbing they share.

The adapters themselves live in two modules and are re-exported here, which is the module
the registry imports for the built-in names ``openai``, ``openai-responses`` and
``openrouter`` (spec 05 §5.2.2):

- :class:`~threadloom.providers.openai_chat.OpenAIChatProvider` — Chat Completions, for
  api.openai.com, OpenRouter and OpenAI-compatible servers (vLLM, Ollama, …);
- :class:`~threadloom.providers.openai_responses.OpenAIResponsesProvider` — the Responses
  API, with replay of encrypted reasoning items.

Both import the shared pieces below (client creation with credentials read at the first
request, SDK exception → :class:`ProviderError` mapping, body/``extra_body`` splitting),
so the re-export is lazy (PEP 562 ``__getattr__``): importing either adapter module first
must not re-enter this module half-initialised.

``provider_options`` (spec 05 §5.3.1) are wire body keys for both adapters: every key is
merged over the body the adapter built (e.g. ``temperature``, ``top_p``, ``seed``,
``stop``, ``response_format``, ``service_tier``, ``user``, ``metadata``, ``store``,
OpenRouter's ``provider`` / ``models`` / ``transforms``), except the keys the adapter owns
(``model``, ``messages`` / ``input``, ``stream``, ``stream_options``), which are ignored.
Keys the installed SDK's ``create()`` knows are passed as arguments, others through
``extra_body``; on the wire both end up as top-level body fields.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import httpx
import openai

from threadloom.errors import ProviderError
from threadloom.providers.errormap import code_for_error, error_for_status, missing_setting
from threadloom.providers.types import ImagePart

if TYPE_CHECKING:
    from threadloom.providers.openai_chat import OpenAIChatProvider
    from threadloom.providers.openai_responses import OpenAIResponsesProvider

#: Connect / write / pool limits only: stream timeouts are the engine's (spec 04 §4.12.4).
DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=10.0)

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"

#: The ``extra_content`` key under which the Responses adapter keeps a function call's item
#: id (spec 05 §5.8.2); it is that adapter's own data, never sent to Chat Completions.
RESPONSES_ITEM_ID = "responses_item_id"

#: ``create()`` parameters that steer the SDK rather than name body fields.
_SDK_CONTROL_PARAMS = frozenset({"self", "extra_headers", "extra_query", "extra_body", "timeout"})


class OpenAIClientOwner:
    """Owns one lazily created ``openai.AsyncOpenAI`` client for an adapter.

    Nothing is read from the environment at construction, so a project whose unused models
    lack keys still loads (spec 05 §5.2.2). At the first request the key is taken from the
    ``api_key`` argument or the environment variable :attr:`key_env`; a missing key raises
    ``ProviderError(code="authentication", retryable=False, message="<VAR> is not set")``
    and is looked up again on the next request. The client never retries
    (``max_retries=0``): retries are the engine's.
    """

    name: str

    def __init__(
        self,
        *,
        name: str,
        api_key: str | None,
        base_url: str | None,
        default_headers: Mapping[str, str] | None,
    ) -> None:
        self.name = name
        self._api_key = api_key
        self._base_url = base_url
        self._default_headers = dict(default_headers) if default_headers else None
        self._client: openai.AsyncOpenAI | None = None

    @property
    def key_env(self) -> str:
        """The environment variable the API key is read from when none was given."""
        return "OPENAI_API_KEY"

    @property
    def base_url(self) -> str | None:
        """The base URL requests go to: the argument, else ``OPENAI_BASE_URL``, else None
        (the SDK's default, api.openai.com)."""
        if self._client is not None:
            return str(self._client.base_url)
        return self._base_url or os.environ.get("OPENAI_BASE_URL") or None

    def missing_credential(self) -> str | None:
        """The environment variable to set when this adapter has no API key (none given,
        the variable unset): reported when definitions are loaded (spec 05 §5.2.3)."""
        if self._client is not None or self._api_key or os.environ.get(self.key_env):
            return None
        return self.key_env

    def client(self) -> openai.AsyncOpenAI:
        """The SDK client, created at the first call (the first request)."""
        if self._client is None:
            self._client = self.new_client()
        return self._client

    def new_client(self) -> openai.AsyncOpenAI:
        """A new SDK client from the settings (the one hook a cloud variant replaces:
        :mod:`threadloom.providers.azure_openai`); raises ``authentication`` without a key."""
        key = self._api_key or os.environ.get(self.key_env)
        if not key:
            raise missing_setting(self.key_env, self.name)
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=self.base_url,
            max_retries=0,
            timeout=DEFAULT_TIMEOUT,
            default_headers=self._default_headers,
        )

    async def aclose(self) -> None:
        """Close the HTTP client (if one was created); a later request creates a new one."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()


# --------------------------------------------------------------------------------------
# Request helpers


def image_data_url(image: ImagePart) -> str:
    """``data:<media_type>;base64,<data>`` — how both OpenAI APIs take inline images."""
    return f"data:{image.media_type};base64,{image.data}"


def merge_options(
    body: dict[str, Any], options: Mapping[str, Any], owned: frozenset[str]
) -> dict[str, Any]:
    """``body`` with ``provider_options`` merged over it, except the adapter-owned keys."""
    merged = dict(body)
    for key, value in options.items():
        if key not in owned:
            merged[key] = value
    return merged


_KNOWN_PARAMS: dict[Callable[..., Any], frozenset[str]] = {}


def split_body(
    create: Callable[..., Any], body: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a wire body into ``create()`` keyword arguments and ``extra_body``.

    Keys that ``create`` (the SDK method, bound or not) declares go as arguments; the rest
    (OpenRouter fields, server-specific fields, fields newer than the installed SDK) go
    through ``extra_body``, which the SDK merges into the JSON body unchanged.
    """
    func = getattr(create, "__func__", create)
    known = _KNOWN_PARAMS.get(func)
    if known is None:
        known = frozenset(inspect.signature(func).parameters) - _SDK_CONTROL_PARAMS
        _KNOWN_PARAMS[func] = known
    kwargs = {k: v for k, v in body.items() if k in known}
    extra = {k: v for k, v in body.items() if k not in known}
    return kwargs, extra


def as_dict(obj: Any) -> dict[str, Any]:
    """A streamed SDK object back as the JSON object the server sent.

    The SDK builds its models without validation and keeps unknown fields, so dumping
    with ``exclude_unset`` returns the wire object, including non-OpenAI fields such as
    ``reasoning_content``, ``reasoning_details`` or ``usage.cost``.
    """
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        result = dump(by_alias=True, exclude_unset=True, warnings=False)
        return result if isinstance(result, dict) else {}
    return {}


def int_or_zero(value: Any) -> int:
    """A token count from the wire (missing, null or malformed → 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def float_or_none(value: Any) -> float | None:
    """A cost from the wire (a number, or a numeric string) or None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------------------
# Errors (spec 05 §5.4)


def embedded_error(error: Any, provider: str, fallback: str = "") -> ProviderError:
    """A :class:`ProviderError` for an error object inside a successful HTTP stream.

    ``error`` is the wire object (``{"code", "message", "type"?, ...}``): a numeric code is
    read as an HTTP status (OpenRouter), a named one by name (Responses
    ``response.failed`` / ``error`` events), and the message text decides
    ``context_length`` / ``content_filter`` otherwise.
    """
    data = error if isinstance(error, Mapping) else {}
    message = data.get("message")
    if not isinstance(message, str) or not message:
        message = fallback or "Error in the provider's stream"
    raw = data.get("code")
    if raw is None or raw == "":
        raw = data.get("type")
    code: str | int | None = None
    status: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        code = status = raw
    elif isinstance(raw, str):
        code = raw
        status = int(raw) if raw.isdigit() else None
    return ProviderError(
        message,
        code=code_for_error(code, message),
        status=status,
        provider=provider,
        body=dict(data) if data else error,
    )


def _failed(what: str, exc: BaseException) -> str:
    """``what`` went wrong, then the transport's own error once: the one the SDK wrapped
    (its own message only says ``what`` again: "Connection error."), else ``exc``."""
    cause = exc.__cause__ if isinstance(exc, openai.APIError) else exc
    if cause is None:
        return what
    text = str(cause)
    return f"{what}: {type(cause).__name__}: {text}" if text else f"{what}: {type(cause).__name__}"


def map_sdk_error(exc: BaseException, provider: str) -> ProviderError:
    """Classify an exception from the SDK or its HTTP transport (spec 05 §5.4).

    HTTP status first (``retry_after`` from the response headers, the body refining 400),
    then the connection / timeout classes of the SDK and of httpx (errors while reading a
    stream come from httpx directly), then an error object the SDK found inside the stream.
    Anything else is ``unknown`` (retryable), so ``stream()`` only ever raises
    ``ProviderError`` — except ``asyncio.CancelledError``, which is never passed here.
    """
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, openai.APIStatusError):
        return error_for_status(
            exc.status_code,
            exc.message,
            provider=provider,
            body=exc.body,
            headers=exc.response.headers,
        )
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        return ProviderError(_failed("Request timed out", exc), code="timeout", provider=provider)
    if isinstance(exc, openai.APIConnectionError | httpx.TransportError):
        return ProviderError(_failed("Connection error", exc), code="connection", provider=provider)
    if isinstance(exc, openai.APIError):
        return embedded_error(exc.body, provider, exc.message)
    return ProviderError(
        f"Unexpected error from the OpenAI SDK: {type(exc).__name__}: {exc}",
        code="unknown",
        provider=provider,
    )


# --------------------------------------------------------------------------------------
# Lazy re-export of the adapters (see the module docstring)

_EXPORTS = {
    "OpenAIChatProvider": "threadloom.providers.openai_chat",
    "OpenAIResponsesProvider": "threadloom.providers.openai_responses",
}


def __getattr__(name: str) -> Any:
    """Import an adapter class on first access (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_TIMEOUT",
    "OPENROUTER_BASE_URL",
    "RESPONSES_ITEM_ID",
    "OpenAIChatProvider",
    "OpenAIClientOwner",
    "OpenAIResponsesProvider",
    "as_dict",
    "embedded_error",
    "float_or_none",
    "image_data_url",
    "int_or_zero",
    "map_sdk_error",
    "merge_options",
    "split_body",
]
