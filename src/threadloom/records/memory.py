"""The persisted shape of the memory store (spec 20): an item — a JSON object kept under a
namespace (a tuple of labels) and a key, in one scope (a user's memory or an agent's) — and
the rules its namespace, key and value follow. Plain typed data, no I/O."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from threadloom.errors import InvalidField

MAX_LABELS = 10
"""Labels a namespace may have at most (spec 20 §20.2)."""
MAX_LABEL_CHARS = 128
MAX_KEY_CHARS = 256
MAX_VALUE_BYTES = 256 * 1024
"""The largest value, as compact JSON in UTF-8."""
MAX_TTL_S = 10 * 366 * 86_400
MAX_LIMIT = 1000
"""The most items or namespaces one search or listing returns."""
SEPARATOR = "."
"""Joins a namespace's labels in the store (a label holds none)."""

ScopeKind = Literal["user", "agent"]


def _text_problem(text: object, most: int) -> str | None:
    if not isinstance(text, str) or not 0 < len(text) <= most:
        return f"must be a string of 1 to {most} characters"
    if any(ord(c) < 32 or c == "\x7f" for c in text):
        return "must not hold control characters"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode text"
    return None


def namespace_problem(namespace: object, *, prefix: bool = False) -> str | None:
    """Why ``namespace`` is not a namespace (a prefix may be empty); None when it is."""
    if not isinstance(namespace, list | tuple):
        return "must be a list of labels"
    if not namespace and not prefix:
        return "must have at least one label"
    if len(namespace) > MAX_LABELS:
        return f"must have at most {MAX_LABELS} labels"
    for label in namespace:
        problem = _text_problem(label, MAX_LABEL_CHARS)
        if problem is not None:
            return f"labels {problem}"
        if SEPARATOR in label:
            return f"labels must not contain {SEPARATOR!r}"
    return None


def key_problem(key: object) -> str | None:
    return _text_problem(key, MAX_KEY_CHARS)


def value_problem(value: object) -> str | None:
    """Why ``value`` is not a storable document: a JSON object of at most
    ``MAX_VALUE_BYTES`` (finite numbers, string keys)."""
    if not isinstance(value, dict):
        return "must be a JSON object"
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
        size = len(text.encode("utf-8"))
    except (TypeError, ValueError, UnicodeEncodeError):
        return "must be JSON (string keys, finite numbers, valid text)"
    if "\\u0000" in text:
        return "must not hold the NUL character"
    if size > MAX_VALUE_BYTES:
        return f"must be at most {MAX_VALUE_BYTES} bytes as JSON"
    return None


def ttl_problem(ttl_s: object) -> str | None:
    if ttl_s is None:
        return None
    if (
        isinstance(ttl_s, bool)
        or not isinstance(ttl_s, int | float)
        or not math.isfinite(ttl_s)
        or not 0 < ttl_s <= MAX_TTL_S
    ):
        return f"must be a number of seconds above 0 and at most {MAX_TTL_S}, or null"
    return None


OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
MAX_FILTER_FIELDS = 32


def filter_problem(filter: object) -> str | None:
    """Why ``filter`` is not a filter (field path → a JSON value, or an object of
    operators ``$eq $ne $gt $gte $lt $lte``); None when it is."""
    if filter is None:
        return None
    if not isinstance(filter, Mapping):
        return "must be an object"
    if len(filter) > MAX_FILTER_FIELDS:
        return f"must have at most {MAX_FILTER_FIELDS} fields"
    for path, condition in filter.items():
        if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
            return "field paths must be non-empty names joined by '.'"
        if isinstance(condition, Mapping) and any(str(k).startswith("$") for k in condition):
            unknown = [k for k in condition if k not in OPERATORS]
            if unknown:
                return f"has an unknown operator {unknown[0]!r} (one of {', '.join(OPERATORS)})"
    problem = value_problem(dict(filter))
    return problem


def checked_namespace(namespace: object, field: str = "namespace", prefix: bool = False) -> str:
    """The stored form of ``namespace`` (labels joined by ``SEPARATOR``), or
    :class:`InvalidField`."""
    problem = namespace_problem(namespace, prefix=prefix)
    if problem is not None:
        raise InvalidField(field, problem)
    assert isinstance(namespace, list | tuple)
    return SEPARATOR.join(namespace)


def checked(field: str, problem: str | None) -> None:
    if problem is not None:
        raise InvalidField(field, problem)


def scope_of(kind: ScopeKind, owner: str | None) -> str:
    """The stored scope: ``user:<id>`` (``user:`` for threads without a user) or
    ``agent:<id>``."""
    return f"{kind}:{owner or ''}"


def labels_of(stored: str) -> tuple[str, ...]:
    return tuple(stored.split(SEPARATOR))


def prefix_bounds(prefix: Sequence[str]) -> tuple[str, str, str] | None:
    """The stored namespaces under ``prefix``: equal to the first, or in ``[second,
    third)`` (the labels after the prefix's own); None for the empty prefix (all)."""
    if not prefix:
        return None
    joined = SEPARATOR.join(prefix)
    return joined, joined + SEPARATOR, joined + chr(ord(SEPARATOR) + 1)


class MemoryItem(BaseModel):
    """One stored document (spec 20 §20.1): the shape of LangGraph's ``Item`` — namespace,
    key, value, created_at, updated_at — with the version each write increments and the
    time it expires (µs; None: never)."""

    model_config = ConfigDict(frozen=True)

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: int
    """µs since the epoch of the first write (since it last expired)."""
    updated_at: int
    version: int
    expires_at: int | None = None

    def to_wire(self) -> dict[str, Any]:
        out = self.model_dump()
        out["namespace"] = list(self.namespace)
        return out
