"""The Provider protocol, stream aggregation and the provider registry (spec 05 §5.2, §5.3.4).

A provider is any object with a ``name``, a ``stream(request)`` method returning an async
iterator of neutral events, and (optionally) ``aclose()``; nothing needs subclassing.
The registry maps the names a ``Model`` may use to provider instances; the built-in ones
are created on first use so unused adapters cost nothing and need no credentials.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from threadloom.errors import InvalidArgument, ProviderError
from threadloom.providers.types import (
    Finish,
    ProviderRequest,
    ProviderResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallSpec,
    ToolCallStart,
)
from threadloom.records import new_call_id


@runtime_checkable
class Provider(Protocol):
    """One model API behind the neutral types (spec 05 §5.2.1)."""

    name: str
    """Written to log rows as ``provider`` ("scripted", "openai", …)."""

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """Send one request; yield neutral events; end with exactly one ``Finish`` or raise
        ``ProviderError``. Cancellation must close the HTTP stream and propagate."""
        ...

    async def aclose(self) -> None:
        """Release clients (the runtime calls it on shutdown)."""
        ...


def is_provider(obj: object) -> bool:
    """True when ``obj`` can serve as a provider: a string ``name`` and a callable
    ``stream``. Unlike ``isinstance(obj, Provider)`` it does not require ``aclose``, which
    spec 05 §5.2.1 makes optional."""
    return isinstance(getattr(obj, "name", None), str) and callable(getattr(obj, "stream", None))


async def close_provider(provider: object) -> None:
    """Call the provider's ``aclose()`` when it has one."""
    aclose = getattr(provider, "aclose", None)
    if callable(aclose):
        await aclose()


# --------------------------------------------------------------------------------------
# Aggregation (§5.3.4)


def new_response_id() -> str:
    """A response id for providers that give none: ``res_`` + 12 hex characters."""
    return "res_" + uuid.uuid4().hex[:12]


class _CallParts:
    __slots__ = ("arguments", "extra_content", "id", "name")

    def __init__(self, id: str, name: str) -> None:
        self.id = id
        self.name = name
        self.arguments: list[str] = []
        self.extra_content: dict[str, Any] | None = None


class ResponseBuilder:
    """Folds stream events into a :class:`ProviderResponse`, one event at a time.

    :func:`generate` uses it; the engine can too, since it must publish each delta while
    it aggregates. Tool calls are kept in start order; a ``ToolCallEnd`` with
    ``arguments`` replaces the fragments accumulated for its call. An event that breaks
    the stream contract (a delta for a call that never started, anything after
    ``Finish``) raises ``ProviderError(code="unknown")``, which the engine retries.
    """

    def __init__(self, model: str, provider: str = "") -> None:
        self.model = model
        self.provider = provider
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _CallParts] = {}
        self.finish: Finish | None = None

    @property
    def text(self) -> str:
        """The visible text received so far."""
        return "".join(self._text)

    @property
    def reasoning(self) -> str:
        """The reasoning text received so far."""
        return "".join(self._reasoning)

    def _fail(self, detail: str) -> ProviderError:
        return ProviderError(
            f"Invalid provider stream: {detail}", code="unknown", provider=self.provider
        )

    def _call(self, index: int, event: str) -> _CallParts:
        try:
            return self._calls[index]
        except KeyError:
            raise self._fail(f"{event} for tool call {index} before its ToolCallStart") from None

    def add(self, event: StreamEvent) -> None:
        """Take one event into the response."""
        if self.finish is not None:
            raise self._fail(f"{type(event).__name__} after Finish")
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self._reasoning.append(event.text)
        elif isinstance(event, ToolCallStart):
            if event.index in self._calls:
                raise self._fail(f"tool call {event.index} started twice")
            self._calls[event.index] = _CallParts(event.id, event.name)
        elif isinstance(event, ToolCallDelta):
            self._call(event.index, "ToolCallDelta").arguments.append(event.arguments)
        elif isinstance(event, ToolCallEnd):
            call = self._call(event.index, "ToolCallEnd")
            if event.arguments is not None:
                call.arguments = [event.arguments]
            if event.extra_content is not None:
                call.extra_content = event.extra_content
        elif isinstance(event, Finish):
            self.finish = event
        else:  # pragma: no cover - guarded by the StreamEvent union
            raise self._fail(f"unknown event {event!r}")

    def build(self) -> ProviderResponse:
        """The response; raises ``ProviderError`` when the stream ended without ``Finish``.

        A call whose provider gave no id gets ``call_`` + 32 hex (as the engine assigns,
        spec 04 §4.12.2).
        """
        if self.finish is None:
            raise self._fail("stream ended without a Finish event")
        return ProviderResponse(
            id=self.finish.response_id or new_response_id(),
            model=self.model,
            content=self.text or None,
            tool_calls=[
                ToolCallSpec(
                    id=call.id or new_call_id(),
                    name=call.name,
                    arguments="".join(call.arguments),
                    extra_content=call.extra_content,
                )
                for call in self._calls.values()
            ],
            reasoning_content=self.reasoning or None,
            reasoning_details=self.finish.reasoning_details,
            finish_reason=self.finish.finish_reason,
            usage=self.finish.usage,
        )


async def generate(provider: Provider, request: ProviderRequest) -> ProviderResponse:
    """Send ``request`` and aggregate the whole stream into one response (spec 05 §5.3.4).

    Errors of the provider propagate unchanged; the stream is closed on every exit.
    """
    builder = ResponseBuilder(request.model, provider.name)
    events = provider.stream(request)
    try:
        async for event in events:
            builder.add(event)
    finally:
        aclose = getattr(events, "aclose", None)
        if callable(aclose):
            await aclose()
    return builder.build()


# --------------------------------------------------------------------------------------
# The registry (§5.2.2)


def _scripted() -> Provider:
    from threadloom.providers.scripted import ScriptedProvider

    return ScriptedProvider()


def _lazy(label: str, module: str, cls: str, **kwargs: Any) -> Callable[[], Provider]:
    """A factory that imports ``threadloom.providers.<module>`` only when first called and
    builds ``cls(**kwargs)``; a missing module or class is reported for name ``label``."""

    def factory() -> Provider:
        try:
            mod = importlib.import_module(f"threadloom.providers.{module}")
            provider: Provider = getattr(mod, cls)(**kwargs)
        except (ImportError, AttributeError) as exc:
            raise ProviderError(
                f"provider {label} is not available: {exc}",
                code="invalid_request",
                retryable=False,
                provider=label,
            ) from exc
        return provider

    return factory


#: The built-in names and how each is created (spec 05 §5.2.2 table).
BUILTIN_PROVIDERS: dict[str, Callable[[], Provider]] = {
    "scripted": _scripted,
    "openai": _lazy("openai", "openai", "OpenAIChatProvider"),
    "openai-responses": _lazy("openai-responses", "openai", "OpenAIResponsesProvider"),
    "anthropic": _lazy("anthropic", "anthropic", "AnthropicProvider"),
    "gemini": _lazy("gemini", "gemini", "GeminiProvider"),
    "gemini-vertex": _lazy(
        "gemini-vertex", "gemini", "GeminiProvider", name="gemini-vertex", vertexai=True
    ),
    "openrouter": _lazy(
        "openrouter",
        "openai",
        "OpenAIChatProvider",
        name="openrouter",
        base_url="https://openrouter.ai/api/v1",
        dialect="openrouter",
    ),
    "azure-openai": _lazy("azure-openai", "azure_openai", "AzureOpenAIChatProvider"),
    "azure-openai-responses": _lazy(
        "azure-openai-responses", "azure_openai", "AzureOpenAIResponsesProvider"
    ),
    "anthropic-bedrock": _lazy(
        "anthropic-bedrock", "anthropic_bedrock", "AnthropicBedrockProvider"
    ),
    "anthropic-vertex": _lazy("anthropic-vertex", "anthropic_vertex", "AnthropicVertexProvider"),
}


@dataclass(frozen=True, slots=True)
class MissingCredential:
    """A model whose provider has no credential: ``variable`` is the environment variable
    to set (``OPENAI_API_KEY``)."""

    model: str
    provider: str
    variable: str

    def __str__(self) -> str:
        return (
            f'Model "{self.model}" (provider {self.provider}): {self.variable} is not set;'
            f" its requests will fail until it is"
        )


class ProviderRegistry:
    """Provider instances by name: the built-ins (created lazily) plus registered ones.

    ``providers`` — e.g. ``Runtime.open(..., providers={...})`` — add entries or replace
    built-ins. Adapters hold no per-thread state, so one instance per name serves every
    thread.
    """

    def __init__(self, providers: Mapping[str, Provider] | None = None) -> None:
        self._factories: dict[str, Callable[[], Provider]] = dict(BUILTIN_PROVIDERS)
        self._instances: dict[str, Provider] = {}
        for name, provider in (providers or {}).items():
            self.register(name, provider)

    def register(self, name: str, provider: Provider) -> None:
        """Add ``provider`` under ``name``, replacing any earlier entry (built-in or not)."""
        if not isinstance(name, str) or not name:
            raise InvalidArgument(f"provider name must be a non-empty string, got {name!r}")
        if not is_provider(provider):
            raise InvalidArgument(
                f"provider {name!r} must have a str 'name' and a 'stream' method, "
                f"got {type(provider).__name__}"
            )
        self._instances[name] = provider

    def __contains__(self, name: object) -> bool:
        return name in self._instances or name in self._factories

    def names(self) -> list[str]:
        """Every name :meth:`get` resolves, sorted."""
        return sorted(set(self._instances) | set(self._factories))

    def get(self, name: str) -> Provider:
        """The provider registered under ``name``, creating a built-in on first use.

        Raises ``ProviderError(code="invalid_request", retryable=False)`` for a name that
        is not registered, or a built-in whose adapter module cannot be imported.
        """
        provider = self._instances.get(name)
        if provider is not None:
            return provider
        factory = self._factories.get(name)
        if factory is None:
            raise ProviderError(
                f'provider "{name}" is not registered (known: {", ".join(self.names())})',
                code="invalid_request",
                retryable=False,
                provider=name,
            )
        provider = factory()
        self._instances[name] = provider
        return provider

    def missing_credentials(self, models: Iterable[Any]) -> list[MissingCredential]:
        """The models whose provider has no credential (spec 05 §5.2.3): for each model
        whose provider — named or an instance — has ``missing_credential()`` and answers
        a variable name. A named provider that cannot be created is left to the first
        request (its error says why)."""
        found: list[MissingCredential] = []
        for model in models:
            provider = model.provider
            name = provider if isinstance(provider, str) else getattr(provider, "name", "?")
            if isinstance(provider, str):
                try:
                    provider = self.get(provider)
                except ProviderError:
                    continue
            check = getattr(provider, "missing_credential", None)
            variable = check() if callable(check) else None
            if isinstance(variable, str) and variable:
                found.append(MissingCredential(model.name, str(name), variable))
        return found

    def created(self) -> dict[str, Provider]:
        """The instances that exist now (registered or already created built-ins)."""
        return dict(self._instances)

    async def aclose(self) -> None:
        """Close every existing instance once (an instance under two names is closed once).

        All are closed even if one fails; the first failure is raised afterwards.
        """
        seen: set[int] = set()
        first: BaseException | None = None
        for provider in list(self._instances.values()):
            if id(provider) in seen:
                continue
            seen.add(id(provider))
            try:
                await close_provider(provider)
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first


__all__ = [
    "BUILTIN_PROVIDERS",
    "MissingCredential",
    "Provider",
    "ProviderRegistry",
    "ResponseBuilder",
    "close_provider",
    "generate",
    "is_provider",
    "new_response_id",
]
