"""Spec 11 §11.2.2: every method of ``AsyncClient`` exists with the same name and signature,
without ``async``, on ``Client`` — checked by enumerating the async client's surface."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from threadloom.client import AsyncClient, Client, SyncThreadSession, ThreadSession

LIFECYCLE = {"aclose", "close"}
"""``aclose`` / ``close`` are the one documented difference of name (§11.2.1)."""


def public(obj: object) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in dir(obj) if not name.startswith("_")}


def namespaces(client: object) -> dict[str, object]:
    """The resource namespaces: public attributes that are objects holding methods."""
    return {
        name: value
        for name, value in public(client).items()
        if not callable(value) and type(value).__module__ == "threadloom.client.http"
    }


def methods(obj: object) -> dict[str, Callable[..., Any]]:
    return {name: value for name, value in public(obj).items() if callable(value)}


def parameters(method: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    """Name, kind, default and annotation of each parameter (the return type differs: a
    coroutine or async iterator on one side, the value or a plain iterator on the other)."""
    return [
        (p.name, p.kind, p.default, p.annotation)
        for p in inspect.signature(method).parameters.values()
    ]


@pytest.fixture
def pair() -> Iterator[tuple[AsyncClient, Client]]:
    sync = Client("http://127.0.0.1:9")
    yield AsyncClient("http://127.0.0.1:9"), sync
    sync.close()


def surface(client: object) -> dict[str, Callable[..., Any]]:
    """Every public method, namespaced ones as ``namespace.method``."""
    out = {name: m for name, m in methods(client).items() if name not in LIFECYCLE}
    for ns_name, ns in namespaces(client).items():
        out.update({f"{ns_name}.{name}": m for name, m in methods(ns).items()})
    return out


def test_the_async_surface_has_every_namespace_of_the_spec(
    pair: tuple[AsyncClient, Client],
) -> None:
    async_client, _ = pair
    assert set(namespaces(async_client)) == {
        "threads",
        "messages",
        "logs",
        "files",
        "catalog",
        "auth",
        "api_keys",
        "users",
        "schedules",
        "triggers",
        "webhooks",
        "memory",
    }
    found = surface(async_client)
    # a sample of the catalogue: the enumeration really reaches into each namespace
    for name in ("threads.iterate", "messages.iterate", "files.read_stream", "auth.login"):
        assert name in found
    assert {"health", "stream", "session"} <= set(found)


def test_client_has_every_async_method_with_the_same_signature(
    pair: tuple[AsyncClient, Client],
) -> None:
    async_client, sync_client = pair
    async_surface, sync_surface = surface(async_client), surface(sync_client)
    assert set(async_surface) - set(sync_surface) == set()
    assert set(sync_surface) - set(async_surface) == set()
    for name, async_method in sorted(async_surface.items()):
        sync_method = sync_surface[name]
        assert parameters(sync_method) == parameters(async_method), name
        assert not inspect.iscoroutinefunction(sync_method), name
        assert not inspect.isasyncgenfunction(sync_method), name


def test_wrapped_methods_show_the_route_signature(pair: tuple[AsyncClient, Client]) -> None:
    """The executors keep the builder's signature, so the parity check above compares real
    parameters and ``help()`` shows them."""
    async_client, sync_client = pair
    for method in (async_client.messages.list, sync_client.messages.list):
        names = list(inspect.signature(method).parameters)
        assert names == ["thread_id", "limit", "offset", "order", "depth", "include_silent"]


def test_the_constructors_take_the_same_arguments() -> None:
    def names(cls: type) -> list[tuple[str, Any, Any]]:
        return [
            (p.name, p.kind, p.default)
            for p in inspect.signature(cls).parameters.values()  # type: ignore[arg-type]
        ]

    assert names(Client) == names(AsyncClient)


def test_the_sync_session_has_every_method_of_thread_session() -> None:
    """§11.6.5: the sync counterparts of ``ThreadSession`` on ``Client.session``."""

    def session_methods(cls: type) -> dict[str, Callable[..., Any]]:
        return {
            name: value
            for name, value in vars(cls).items()
            if callable(value) and not name.startswith("_") and name not in LIFECYCLE
        }

    async_methods, sync_methods = session_methods(ThreadSession), session_methods(SyncThreadSession)
    assert set(async_methods) == set(sync_methods)
    assert {"send", "retry", "views", "events", "wait_for", "check_status"} <= set(sync_methods)
    for name, method in async_methods.items():
        assert parameters(sync_methods[name]) == parameters(method), name
        assert not inspect.iscoroutinefunction(sync_methods[name]), name
        assert not inspect.isasyncgenfunction(sync_methods[name]), name
    assert callable(SyncThreadSession.close) and callable(ThreadSession.aclose)
    assert hasattr(SyncThreadSession, "__enter__") and hasattr(SyncThreadSession, "__exit__")
