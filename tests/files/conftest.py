"""File system fixtures: a fresh thread, a file-event subscription helper and tiny images
built byte by byte (no imaging library)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from threadloom import Runtime
from threadloom.testing import png as grey_png
from threadloom.thread.events import Subscription
from threadloom.thread.state import ThreadState


@pytest.fixture
async def state(runtime: Runtime) -> ThreadState:
    return await runtime.create_thread("a")


def make_png(width: int, height: int) -> bytes:
    """A valid RGB PNG of the given size (all black)."""
    return grey_png(width, height, shade=0)


@pytest.fixture
def png() -> Callable[[int, int], bytes]:
    return make_png


def file_events(sub: Subscription) -> list[dict[str, Any]]:
    """The buffered ``file`` events of a subscription as ``{seq, event_type, data}``."""
    return [
        {"seq": e.seq, "event_type": e.data["event_type"], "data": e.data["data"]}
        for e in sub.drain()
        if e.kind == "file"
    ]


@pytest.fixture
def events_of() -> Callable[[Subscription], list[dict[str, Any]]]:
    return file_events
