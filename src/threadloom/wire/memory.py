"""The memory store on the wire (spec 20 §20.7): the bodies that put an item, search items
and list namespaces, and the item, items and namespaces as answered (``/api/memory``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from threadloom.records import MemoryItem
from threadloom.records.memory import (
    MAX_LABEL_CHARS,
    MAX_LABELS,
    MAX_LIMIT,
    MAX_TTL_S,
    filter_problem,
    key_problem,
    namespace_problem,
    ttl_problem,
    value_problem,
)
from threadloom.wire.model import Absent, Answer, Body, examples
from threadloom.wire.problems import check, integer_from, refuse
from threadloom.wire.query import integer, text

MAX_VERSION = 2**53 - 1
MAX_OWNER = 256


def _rule(problem_of: Any) -> Any:
    def rule(value: Any) -> Any:
        problem = problem_of(value)
        if problem is not None:
            raise refuse(problem)
        return value

    return rule


def _int(low: int, high: int) -> Any:
    within = integer_from(low, high)

    def rule(value: Any) -> int:
        checked = within(value)
        if checked is None:
            raise refuse(f"must be an integer from {low} to {high}")
        return checked

    return rule


def _ttl(value: Any) -> float:
    problem = ttl_problem(value) if value is not None else ttl_problem("null")
    if problem is not None:
        raise refuse(problem)
    return float(value)


def _owner(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_OWNER:
        raise refuse(f"must be a string of 1 to {MAX_OWNER} characters")
    return value


_Label = Annotated[
    str, Field(min_length=1, max_length=MAX_LABEL_CHARS, pattern=r"^[^.\x00-\x1f\x7f]+$")
]
Namespace = Annotated[
    list[_Label],
    Field(min_length=1, max_length=MAX_LABELS),
    check(_rule(namespace_problem)),
]
Prefix = Annotated[
    list[_Label],
    Field(max_length=MAX_LABELS),
    check(_rule(lambda v: namespace_problem(v, prefix=True))),
]
_Owner = Annotated[
    Annotated[str, Field(min_length=1, max_length=MAX_OWNER)] | Absent, check(_owner)
]
_Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT), check(_int(1, MAX_LIMIT))]
_Offset = Annotated[int, Field(ge=0, le=2**31 - 1), check(_int(0, 2**31 - 1))]


def _filter(value: Any) -> str | None:
    return "must be an object" if value is None else filter_problem(value)


def _query(value: Any) -> str:
    raise refuse("needs an embedding function (semantic search), and none is configured")


class Scoped(Body):
    """Whose memory: the caller's own user memory by default; ``user_id`` another user's
    (admins, or the caller's own id), ``agent_id`` an agent's (admins; ``user_id`` is then
    not read)."""

    user_id: _Owner = None
    agent_id: _Owner = None


class PutItem(Scoped):
    """``PUT /api/memory/items``: store ``value`` at ``key`` of ``namespace``; with
    ``if_version``, only if the stored item is at that version (0: only if none is), else
    409 ``memory_conflict``; ``ttl_s``: seconds until it expires."""

    model_config = examples(
        {"namespace": ["prefs"], "key": "theme", "value": {"dark": True}},
        {"namespace": ["notes", "2026"], "key": "n1", "value": {"text": "hi"}, "ttl_s": 3600},
    )

    namespace: Namespace
    key: Annotated[str, Field(min_length=1, max_length=256), check(_rule(key_problem))]
    value: Annotated[dict[str, Any], check(_rule(value_problem))]
    ttl_s: Annotated[Annotated[float, Field(gt=0, le=MAX_TTL_S)] | Absent, check(_ttl)] = None
    if_version: Annotated[
        Annotated[int, Field(ge=0, le=MAX_VERSION)] | Absent, check(_int(0, MAX_VERSION))
    ] = None


class SearchItems(Scoped):
    """``POST /api/memory/search``: the live items under ``namespace_prefix`` whose value
    meets ``filter``, most recently updated first."""

    model_config = examples(
        {"namespace_prefix": ["prefs"]},
        {"namespace_prefix": [], "filter": {"score": {"$gte": 3}}, "limit": 5, "offset": 0},
    )

    namespace_prefix: Prefix = Field(default_factory=list)
    filter: Annotated[dict[str, Any] | Absent, check(_rule(_filter))] = None
    query: Annotated[Annotated[str, Field(max_length=4096)] | Absent, check(_query)] = None
    limit: _Limit = 10
    offset: _Offset = 0


class ListNamespaces(Scoped):
    """``POST /api/memory/namespaces``: the namespaces holding live items."""

    model_config = examples({}, {"prefix": ["notes"], "max_depth": 2, "limit": 10})

    prefix: Prefix = Field(default_factory=list)
    suffix: Prefix = Field(default_factory=list)
    max_depth: Annotated[
        Annotated[int, Field(ge=1, le=MAX_LABELS)] | Absent, check(_int(1, MAX_LABELS))
    ] = None
    limit: _Limit = 100
    offset: _Offset = 0


_LABEL_RE = rf"[^.\x00-\x1f\x7f]{{1,{MAX_LABEL_CHARS}}}"
NAMESPACE_PATTERN = rf"^{_LABEL_RE}(?:\.{_LABEL_RE}){{0,{MAX_LABELS - 1}}}$"
"""A namespace in a query: 1 to 10 labels joined by ``.``, no control character."""
KEY_PATTERN = r"^[^\x00-\x1f\x7f]{1,256}$"


def _required(param: dict[str, Any], pattern: str) -> dict[str, Any]:
    return {**param, "required": True, "schema": {"type": "string", "pattern": pattern}}


ITEM_QUERY = (
    _required(
        text("namespace", "The namespace: its labels joined by '.'", min_length=1),
        NAMESPACE_PATTERN,
    ),
    _required(text("key", "The item's key", min_length=1), KEY_PATTERN),
    text("user_id", "Another user's memory (admins, or the caller's own id)"),
    text("agent_id", "An agent's memory (admins; user_id is then not read)"),
)
DELETE_QUERY = (
    *ITEM_QUERY,
    integer("if_version", "Only if the stored item is at this version", 1, MAX_VERSION),
)


class ItemOut(Answer):
    """An item (spec 20 §20.1): times in µs; ``expires_at`` null: never."""

    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: int
    updated_at: int
    version: int
    expires_at: int | None


class ItemAnswer(Answer):
    item: ItemOut

    @classmethod
    def of(cls, item: MemoryItem) -> ItemAnswer:
        return cls(item=ItemOut.model_validate(item.to_wire()))


class ItemList(Answer):
    items: list[ItemOut]

    @classmethod
    def of(cls, items: list[MemoryItem]) -> ItemList:
        return cls(items=[ItemOut.model_validate(i.to_wire()) for i in items])


class NamespaceList(Answer):
    namespaces: list[list[str]]
