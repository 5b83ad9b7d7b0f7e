"""Statements that write NULL values in their text instead of binding them.

Python's ``sqlite3`` (3.11) binds ``None`` through its adaptation protocol: about 0.4 µs a
value, against 0.03 µs for an int and 0.1 µs for a str. A log row has some 60 columns,
most of them NULL, and binding them cost more than writing the row. A :class:`NullFree`
statement keeps one text per pattern of ``None`` values, with ``NULL`` in place of the
``?`` of each ``None``, and binds only the other values. A table sees a handful of
patterns (a user message, a pending model message, a tool result …), so the texts stay
few and the connection's statement cache (``CACHED_STATEMENTS``) keeps them prepared.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CACHED_STATEMENTS = 512
"""Prepared statements a connection keeps (``sqlite3.connect(cached_statements=…)``);
Python's default, 128, is close to what the store's statements and their NULL patterns
need."""


class NullFree:
    """A statement whose ``?`` slots become ``NULL`` in its text where the value is
    ``None``. The text must have no ``?`` other than its parameter slots."""

    __slots__ = ("_parts", "_texts")

    def __init__(self, text: str) -> None:
        self._parts = text.split("?")
        self._texts: dict[tuple[bool, ...], str] = {}

    @property
    def slots(self) -> int:
        return len(self._parts) - 1

    def bind(self, values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        """The text for ``values`` and the values it binds."""
        if len(values) != len(self._parts) - 1:
            raise ValueError(f"{len(values)} values for {len(self._parts) - 1} slots")
        if None not in values:
            return self._text(()), tuple(values)
        nulls = tuple([value is None for value in values])
        return self._text(nulls), tuple([value for value in values if value is not None])

    def _text(self, nulls: tuple[bool, ...]) -> str:
        text = self._texts.get(nulls)
        if text is None:
            parts = self._parts
            pieces = [parts[0]]
            for index, part in enumerate(parts[1:]):
                pieces.append("NULL" if nulls and nulls[index] else "?")
                pieces.append(part)
            text = self._texts[nulls] = "".join(pieces)
        return text
