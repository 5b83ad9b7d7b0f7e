"""JSON response bodies encoded fast, byte for byte as Starlette's ``JSONResponse`` does.

``JSONResponse`` encodes with ``json.dumps(ensure_ascii=False, allow_nan=False,
separators=(",", ":"))``; a page of 100 messages takes it about 0.3–0.5 ms, most of a
read's CPU. pydantic-core's ``to_json`` (a dependency already, through pydantic) writes the
same bytes for every JSON value but one kind — a float below 1e-4 in magnitude, which it
writes as ``1e-5`` or ``0.00001`` where Python writes ``1e-05`` — and about five times
faster. So a body is encoded by ``to_json`` only once the free-form parts a route knows of
(message ``metadata``) are checked to hold no float it would write differently; anything
else goes through ``json.dumps`` exactly as before. ``tests/server/test_json_body.py``
pins the equality (hypothesis over JSON values, and a seeded thread's page over HTTP).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from pydantic_core import to_json
from starlette.responses import Response

from threadloom.records import Message

_SMALLEST_SAME_FLOAT = 1e-4
"""Below this magnitude (0 aside) pydantic-core spells a float differently from ``repr``."""


def python_json(value: Any) -> bytes:
    """``JSONResponse``'s encoding of ``value``: the reference every fast path equals."""
    return json.dumps(
        value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


def same_in_both(value: Any) -> bool:
    """Whether ``to_json(value)`` is exactly ``python_json(value)``: plain JSON values
    (``dict`` with ``str`` keys, ``list``, ``str``, ``int``, ``bool``, ``None``) and floats
    that both spell alike. Anything else (another type, a non-finite or small float, a key
    that is not a ``str``) is left to ``json.dumps``, which also raises as before."""
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is dict:
            for key, child in item.items():
                if type(key) is not str:
                    return False
                push(child)
        elif kind is list:
            stack.extend(item)
        elif kind is float:
            if not math.isfinite(item) or (item != 0.0 and abs(item) < _SMALLEST_SAME_FLOAT):
                return False
        else:
            return False
    return True


def messages_page(messages: Sequence[Message], total: int, has_more: bool, seq: int) -> bytes:
    """The body of ``GET …/messages``: ``MessagesPage.to_wire()`` (messages in the order
    given) plus ``seq``. Records whose metadata is plain JSON are rendered without its
    detached copy (``to_wire(copy_metadata=False)``: encoded at once, nothing holds it)."""
    return wire_page([m.to_wire(copy_metadata=False) for m in messages], total, has_more, seq)


def wire_page(wire: list[dict[str, Any]], total: int, has_more: bool, seq: int) -> bytes:
    """The body of ``GET …/messages`` from wire records (``Message.to_wire()``, in the
    order given) plus ``seq``. A record's fields are typed — text, integers, booleans,
    attachment objects of text and integers — and only ``metadata`` holds free-form JSON,
    so only that is checked before the fast encoder is trusted with the page."""
    page = {"messages": wire, "total": total, "hasMore": has_more, "seq": seq}
    for record in wire:
        metadata = record.get("metadata")
        if metadata is not None and not same_in_both(metadata):
            break
    else:
        try:
            return to_json(page)
        except Exception:  # a value to_json refuses: json.dumps raises as JSONResponse did
            pass
    return python_json(page)


class JSONBody(Response):
    """A response whose body is already encoded JSON: the headers ``JSONResponse`` sends
    (``content-type: application/json``, ``content-length``), without its encoding."""

    media_type = "application/json"
