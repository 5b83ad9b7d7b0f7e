"""The scripted test model, in one place: what a test (or an offline demo) of an agent uses
instead of a real provider.

``ScriptedProvider`` is a provider whose answers are written in advance (spec 05 §5.7):

- ``ScriptedProvider()`` answers every request with ``Test response received.``;
- ``ScriptedProvider([Reply.tool_calls(Call("lookup_order", {"order_id": "A-1"})),
  Reply.text("It shipped.")])`` answers with those replies, one per request, in order;
- ``ScriptedProvider(reply)`` calls ``reply(request)`` — a function of the
  ``ProviderRequest`` (its ``messages`` are ``SystemMessage``, ``UserMessage``,
  ``AssistantMessage`` and ``ToolMessage`` objects, each with ``.text``) — for every request.

``png(width, height)`` makes a small valid PNG image, for tests of tools and messages that
carry images (spec 04 §4.5.4 checks that an image's bytes are of its type).

A ``Reply`` can also raise (``Reply.error("rate limited", "rate_limit")``), stream in chunks
(``chunk_size``), wait (``delay``) and check what it was sent (``Expect``). The provider
records the requests it received (``requests``, ``last_request``), so a test can assert
what the model was shown.

Give it to a model as its provider::

    from threadloom import Model
    from threadloom.testing import Call, Reply, ScriptedProvider

    model = Model(name="fast", provider=ScriptedProvider([Reply.text("Hello!")]), model="demo")
"""

from __future__ import annotations

import struct
import zlib

from threadloom.errors import ProviderError
from threadloom.providers.script import Call, Expect, Fail, Reply, Script
from threadloom.providers.scripted import ScriptedProvider
from threadloom.providers.types import (
    AssistantMessage,
    ProviderRequest,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

__all__ = [
    "AssistantMessage",
    "Call",
    "Expect",
    "Fail",
    "ProviderError",
    "ProviderRequest",
    "Reply",
    "Script",
    "ScriptedProvider",
    "SystemMessage",
    "ToolMessage",
    "UserMessage",
    "png",
]


def png(width: int, height: int, shade: int = 0x80) -> bytes:
    """A valid RGB PNG image of ``width`` × ``height`` pixels, all of one grey ``shade``
    (0–255), built byte by byte (no imaging library)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + bytes((shade, shade, shade)) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
