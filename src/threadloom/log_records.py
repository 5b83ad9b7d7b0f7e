"""The request delta of an LLM log row: how its request body shares its leading messages
with an earlier row's, so a store can keep the body as that delta (store/sqlite/bodies.py).
Plain data, no I/O; ``threadloom.records`` (whose ``LogRow`` carries it) and
``threadloom.store.shapes`` re-export it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class RequestDelta:
    """How a log row's request body shares its leading messages with an earlier row's.

    Invariant::

        row.request_body == prefix + ",".join(base_messages[:keep] + list(fragments)) + suffix

    where base_messages are the message fragments of row `base_log_id`'s request body
    (base_log_id None: keep is 0 and fragments are all the messages).

    A storage hint only (``LogRow.request_delta``): never serialised, never a column, never
    read back; a store may keep the body as this delta and must read back exactly
    ``request_body``.

    A row may leave ``request_body`` ``None`` and give its body lazily instead: ``whole``
    builds the text (a store calls it only when it keeps the body as text) and ``length``
    is that text's length. The body is then ``whole()`` in every respect: reads return
    it. On a long thread this spares joining the whole history (hundreds of KB) for a
    row stored as a few new messages."""

    base_log_id: str | None
    keep: int
    prefix: str  # e.g. '{"model":"m","messages":['
    fragments: tuple[str, ...]  # JSON text of each message after the kept ones
    suffix: str  # e.g. '],"tools":[...],"_metadata":{...}}'
    whole: Callable[[], str] | None = field(default=None, compare=False, repr=False)
    length: int | None = None
