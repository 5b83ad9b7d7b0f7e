"""The persisted shapes of a thread's messages (spec 01): attachments, tool calls, messages,
queue entries, the messages page, and the owner's identity; plain typed data, no I/O.

Import them from ``threadloom.records``, the one import place for every record.

Message-shaped records use the seed's wire field names as Python names (``created_at``,
``tool_calls``, ``mimeType``). Records whose wire names are camelCase and are not
message-shaped (the messages page, the cost report) use snake_case fields with the
camelCase wire name as serialization alias.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from threadloom.errors import InvalidMessage

Role = Literal["system", "user", "assistant", "tool"]
QueueRole = Literal["user", "assistant", "system"]
MessageStatus = Literal["pending", "completed", "failed"]
ToolStatus = Literal["success", "error"]
QueueSource = Literal["api", "queue_message", "subagent", "parent"]

ROLES: frozenset[str] = frozenset(("system", "user", "assistant", "tool"))
QUEUE_ROLES: frozenset[str] = frozenset(("user", "assistant", "system"))
QUEUE_SOURCES: frozenset[str] = frozenset(("api", "queue_message", "subagent", "parent"))
RESERVED_METADATA_KEYS: tuple[str, ...] = ("queued", "queue_status", "queue_source")
METADATA_MAX_BYTES = 16_384


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _c_encoder() -> Callable[[Any, int], list[str]] | None:
    """``_COMPACT``'s C encoder, built once: ``JSONEncoder.encode`` builds a new one (and a
    circular-reference memo) on every call. ``None`` where ``_json`` is unavailable."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    encoder: Callable[[Any, int], list[str]] = make(
        None,  # no circular-reference memo: a failing value is encoded again by _COMPACT
        _COMPACT.default,
        json.encoder.encode_basestring,  # ensure_ascii=False
        None,  # indent
        _COMPACT.key_separator,
        _COMPACT.item_separator,
        _COMPACT.sort_keys,
        _COMPACT.skipkeys,
        _COMPACT.allow_nan,
    )
    return encoder


_C_COMPACT = _c_encoder()


def json_compact(value: Any) -> str:
    """Threadloom's JSON text: compact separators, non-ASCII kept (spec 01 §1.1.5).

    One prebuilt C encoder serves every call. A value it refuses (not serialisable, a
    float out of range, a cycle, too deep) is encoded again by ``_COMPACT``, so the error
    raised is exactly ``json.JSONEncoder``'s (a cycle is its ``ValueError``, not the
    ``RecursionError`` an encoder without a memo meets)."""
    if _C_COMPACT is not None:
        try:
            return "".join(_C_COMPACT(value, 0))
        except (TypeError, ValueError, RecursionError):
            pass
    return _COMPACT.encode(value)


# --------------------------------------------------------------------------------------
# Attachments


class AttachmentRef(BaseModel):
    """A file in the thread's file system that a message references (spec 01 §1.4.8)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    id: str
    type: Literal["file"] = "file"
    path: str
    name: str
    mimeType: str
    size: int = Field(ge=0)
    width: int | None = Field(default=None, gt=0)
    height: int | None = Field(default=None, gt=0)
    description: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The wire object: optional keys omitted when absent."""
        return self.model_dump(exclude_none=True)


# --------------------------------------------------------------------------------------
# Tool calls


class ToolCallFunction(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    arguments: str


class ToolCall(BaseModel):
    """One element of a message's ``tool_calls`` (spec 01 §1.4.3)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction
    extra_content: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        """The canonical object: keys ``id, type, function{name, arguments}, extra_content``."""
        out: dict[str, Any] = {
            "id": self.id,
            "type": "function",
            "function": {"name": self.function.name, "arguments": self.function.arguments},
        }
        if self.extra_content is not None:
            out["extra_content"] = self.extra_content
        return out


def encode_tool_calls(calls: Iterable[ToolCall]) -> str:
    """Encode calls as the canonical compact JSON text (spec 01 §1.4.3 rule 2)."""
    return json_compact([call.to_wire() for call in calls])


_TOOL_CALLS: TypeAdapter[list[ToolCall]] = TypeAdapter(list[ToolCall])


def decode_tool_calls(text: str) -> list[ToolCall]:
    """Parse stored ``tool_calls`` text back into :class:`ToolCall` records: parsed and
    validated in one pass by pydantic (about 2.5 times faster than ``json.loads`` and a
    validation per call). Text that is not a JSON array of calls raises pydantic's
    ``ValidationError`` (a ``ValueError``)."""
    return _TOOL_CALLS.validate_json(text)


def _canonical_arguments(arguments: Any) -> str:
    if not isinstance(arguments, str):
        raise InvalidMessage("tool_calls: function.arguments must be a JSON string")
    text = arguments if arguments.strip() else "{}"
    try:
        parsed = json.loads(text)
    except ValueError:
        raise InvalidMessage("tool_calls: function.arguments is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise InvalidMessage("tool_calls: function.arguments must encode a JSON object")
    try:
        return json_compact(parsed)
    except ValueError:
        raise InvalidMessage("tool_calls: function.arguments is not valid JSON") from None


def normalize_tool_calls(value: Any) -> list[ToolCall]:
    """Validate caller-given ``tool_calls`` (spec 01 §1.4.3 rule 4) and return them canonical.

    Accepts JSON text, or a list of :class:`ToolCall` or mappings. Raises
    :class:`InvalidMessage` for every malformed shape. Uniqueness against other messages of
    the thread is the store's job (it holds the ``tool_calls`` table).
    """
    items: Any = value
    if isinstance(value, str):
        try:
            items = json.loads(value)
        except ValueError:
            raise InvalidMessage("tool_calls is not valid JSON") from None
    if not isinstance(items, list | tuple):
        raise InvalidMessage("tool_calls must be an array")
    if not items:
        raise InvalidMessage("tool_calls must not be empty")
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for item in items:
        raw = item.model_dump() if isinstance(item, ToolCall) else item
        if not isinstance(raw, Mapping):
            raise InvalidMessage("tool_calls: every element must be an object")
        call_id = raw.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage("tool_calls: every call needs a non-empty string id")
        if "type" in raw and raw["type"] != "function":
            raise InvalidMessage("tool_calls: type must be 'function'")
        function = raw.get("function")
        if not isinstance(function, Mapping):
            raise InvalidMessage("tool_calls: every call needs a function object")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidMessage("tool_calls: function.name must be a non-empty string")
        arguments = _canonical_arguments(function.get("arguments", "{}"))
        extra = raw.get("extra_content")
        if extra is not None and not isinstance(extra, Mapping):
            raise InvalidMessage("tool_calls: extra_content must be an object")
        if call_id in seen:
            raise InvalidMessage(f"tool_calls: duplicate call id '{call_id}'")
        seen.add(call_id)
        calls.append(
            ToolCall(
                id=call_id,
                function=ToolCallFunction(name=name, arguments=arguments),
                extra_content=dict(extra) if extra is not None else None,
            )
        )
    return calls


# --------------------------------------------------------------------------------------
# Messages

PROJECTED_FIELDS: tuple[str, ...] = (
    "subagent_relationship",
    "subagent_name",
    "subagent_title",
    "subagent_description",
    "subagent_status",
    "subagent_blocking",
    "subagent_thread_name",
    "subagent_spawn_group_id",
)


class Message(BaseModel):
    """A thread message with every field of the seed's message structure (spec 01 §1.4.1)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    role: Role
    content: str | None = None
    name: str | None = None
    tool_calls: str | None = None
    tool_call_id: str | None = None
    tool_status: ToolStatus | None = None
    status: MessageStatus | None = "completed"
    attachments: list[AttachmentRef] | None = None
    reasoning_content: str | None = None
    reasoning_details: str | None = None
    prompt: str | None = None
    created_at: int = 0
    parent_id: str | None = None
    depth: int = 0
    silent: bool = False
    metadata: dict[str, Any] | None = None
    subagent_id: str | None = None
    subagent_relationship: str | None = None
    subagent_name: str | None = None
    subagent_title: str | None = None
    subagent_description: str | None = None
    subagent_status: str | None = None
    subagent_blocking: bool | None = None
    subagent_thread_name: str | None = None
    subagent_spawn_group_id: str | None = None
    log_id: str | None = None

    def decoded_tool_calls(self) -> list[ToolCall]:
        """The message's tool calls as records (empty when it has none)."""
        return decode_tool_calls(self.tool_calls) if self.tool_calls else []

    @property
    def output(self) -> Any:
        """The parsed value of a structured answer: ``metadata["output"]`` of an assistant
        message whose prompt declares an output type (spec 24 §24.5), else None."""
        metadata = self.metadata
        return metadata.get("output") if metadata else None

    def to_wire(self, *, copy_metadata: bool = True) -> dict[str, Any]:
        """The wire record (spec 01 §1.4.12): ``metadata`` omitted when ``None``, projected
        ``subagent_*`` keys present only when ``subagent_id`` is set. ``metadata`` is a
        detached JSON copy unless ``copy_metadata`` is false (a caller that encodes the
        record at once and checked the metadata is plain JSON: the same bytes, no copy)."""
        # Read from the instance dict: a pydantic model's attribute access goes through its
        # __getattr__ hook, several times the cost of a dict lookup (a page renders 100).
        d = self.__dict__
        attachments = d["attachments"]
        metadata = d["metadata"]
        subagent_id = d["subagent_id"]
        out: dict[str, Any] = {
            "id": d["id"],
            "role": d["role"],
            "content": d["content"],
            "name": d["name"],
            "tool_calls": d["tool_calls"],
            "tool_call_id": d["tool_call_id"],
            "tool_status": d["tool_status"],
            "status": d["status"],
            "attachments": (
                [a.to_wire() for a in attachments] if attachments is not None else None
            ),
            "reasoning_content": d["reasoning_content"],
            "reasoning_details": d["reasoning_details"],
            "prompt": d["prompt"],
            "created_at": d["created_at"],
            "parent_id": d["parent_id"],
            "depth": d["depth"],
            "silent": d["silent"],
        }
        if metadata is not None:
            out["metadata"] = json.loads(json_compact(metadata)) if copy_metadata else metadata
        out["subagent_id"] = subagent_id
        if subagent_id is not None:
            for key in PROJECTED_FIELDS:
                out[key] = d[key]
        out["log_id"] = d["log_id"]
        return out


class QueueEntry(BaseModel):
    """A message accepted for delivery but not yet stored in history (spec 01 §1.5.1)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    role: QueueRole
    content: str
    attachments: list[AttachmentRef] | None = None
    silent: bool = False
    metadata: dict[str, Any] | None = None
    source: QueueSource
    created_at: int

    def pending_view(self, *, cancelled: bool = False) -> Message:
        """The entry presented as a pending Message (spec 01 §1.5.2); no projections."""
        metadata = dict(self.metadata or {})
        metadata.update(
            queued=True,
            queue_status="cancelled" if cancelled else "queued",
            queue_source=self.source,
        )
        subagent_id = (self.metadata or {}).get("subagent_id")
        return Message(
            id=self.id,
            role=self.role,
            content=self.content,
            attachments=[a.model_copy() for a in self.attachments] if self.attachments else None,
            silent=self.silent,
            created_at=self.created_at,
            status="pending",
            metadata=metadata,
            subagent_id=subagent_id if isinstance(subagent_id, str) and subagent_id else None,
        )


class MessagesPage(BaseModel):
    """Result of ``get_messages`` (seed: ``{messages, total, hasMore}``)."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    messages: list[Message]
    total: int
    has_more: bool = Field(alias="hasMore")

    def to_wire(self) -> dict[str, Any]:
        return {
            "messages": [m.to_wire() for m in self.messages],
            "total": self.total,
            "hasMore": self.has_more,
        }


# --------------------------------------------------------------------------------------
# Users


class UserHandle(BaseModel):
    """The thread owner's identity (spec 02 §2.12); never credentials."""

    model_config = ConfigDict(frozen=True)

    id: str
    username: str
    display_name: str | None = None
    email: str | None = None
    avatar_url: str | None = None
    role: str = "user"
    permissions: tuple[str, ...] | None = None
    roles: tuple[str, ...] = ()
