"""The provider registry (spec 05 §5.2.2): lazy built-ins, register/replace, unknown names."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import threadloom.providers.base as base_module
from threadloom.errors import InvalidArgument, ProviderError
from threadloom.providers import (
    BUILTIN_PROVIDERS,
    Finish,
    ProviderRegistry,
    ProviderRequest,
    ScriptedProvider,
    StreamEvent,
    generate,
    is_provider,
)

REQ = ProviderRequest(model="m")


class Minimal:
    """A provider without ``aclose`` (optional per spec 05 §5.2.1)."""

    name = "minimal"

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        yield Finish()


class Closing(Minimal):
    def __init__(self, fail: bool = False) -> None:
        self.closes = 0
        self.fail = fail

    async def aclose(self) -> None:
        self.closes += 1
        if self.fail:
            raise RuntimeError("close failed")


def test_builtin_names() -> None:
    registry = ProviderRegistry()
    assert registry.names() == [
        "anthropic",
        "anthropic-bedrock",
        "anthropic-vertex",
        "azure-openai",
        "azure-openai-responses",
        "gemini",
        "gemini-vertex",
        "openai",
        "openai-responses",
        "openrouter",
        "scripted",
    ]
    assert set(BUILTIN_PROVIDERS) == set(registry.names())
    assert "openai" in registry and "vllm" not in registry


async def test_builtins_are_created_lazily_once() -> None:
    registry = ProviderRegistry()
    assert registry.created() == {}
    scripted = registry.get("scripted")
    assert isinstance(scripted, ScriptedProvider) and scripted.mode == "default"
    assert registry.get("scripted") is scripted
    assert registry.created() == {"scripted": scripted}
    assert (await generate(scripted, REQ)).content == "Test response received."


def test_missing_adapter_module_is_a_clear_provider_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A built-in whose adapter module cannot be imported fails at first use, clearly."""
    factory = base_module._lazy("ghost", "ghost_adapter", "GhostProvider")
    monkeypatch.setitem(base_module.BUILTIN_PROVIDERS, "ghost", factory)
    registry = ProviderRegistry()
    assert "ghost" in registry.names()
    with pytest.raises(ProviderError) as info:
        registry.get("ghost")
    error = info.value
    assert error.code == "invalid_request" and error.retryable is False
    assert error.message.startswith("provider ghost is not available: ")
    assert "threadloom.providers.ghost_adapter" in error.message
    assert "ghost" not in registry.created()


def test_register_adds_and_replaces() -> None:
    custom = ScriptedProvider(name="vllm")
    registry = ProviderRegistry({"vllm": custom})
    assert registry.get("vllm") is custom
    assert "vllm" in registry.names()

    replacement = ScriptedProvider.echo()
    registry.register("scripted", replacement)
    assert registry.get("scripted") is replacement
    registry.register("openai", custom)  # a built-in name can be taken over
    assert registry.get("openai") is custom


def test_unknown_name_and_bad_registrations() -> None:
    registry = ProviderRegistry()
    with pytest.raises(ProviderError) as info:
        registry.get("nope")
    assert info.value.code == "invalid_request" and not info.value.retryable
    assert info.value.message.startswith('provider "nope" is not registered')
    with pytest.raises(InvalidArgument):
        registry.register("", ScriptedProvider())
    with pytest.raises(InvalidArgument):
        registry.register("x", object())  # type: ignore[arg-type]


def test_is_provider_does_not_require_aclose() -> None:
    assert is_provider(Minimal())
    assert not is_provider(object())


async def test_aclose_closes_each_instance_once_and_reports_failures() -> None:
    shared, failing = Closing(), Closing(fail=True)
    registry = ProviderRegistry()
    registry.register("a", shared)
    registry.register("b", shared)
    registry.register("c", Minimal())  # type: ignore[arg-type]
    registry.register("d", failing)
    registry.get("scripted")
    with pytest.raises(RuntimeError, match="close failed"):
        await registry.aclose()
    assert shared.closes == 1 and failing.closes == 1
