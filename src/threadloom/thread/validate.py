"""Validation of caller input for inject, queue and update (spec 01 §1.4, spec 02 §2.5–§2.7).

Everything here is synchronous and pure: invalid input raises before any hook runs or
anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict

from pydantic import BaseModel, ValidationError

from threadloom.errors import InvalidMessage, InvalidUpdate
from threadloom.records import (
    METADATA_MAX_BYTES,
    QUEUE_ROLES,
    RESERVED_METADATA_KEYS,
    ROLES,
    AttachmentRef,
    Message,
    encode_tool_calls,
    json_compact,
    normalize_tool_calls,
)

INJECT_FIELDS = frozenset(
    (
        "role",
        "content",
        "name",
        "silent",
        "metadata",
        "attachments",
        "tool_calls",
        "tool_call_id",
        "tool_status",
    )
)
QUEUE_FIELDS = frozenset(("role", "content", "attachments", "silent", "metadata"))
UPDATE_FIELDS = frozenset(
    ("content", "name", "metadata", "silent", "attachments", "status", "tool_status", "tool_calls")
)
QUEUE_UPDATE_FIELDS = frozenset(("content", "metadata", "silent", "attachments"))


# Every Message field at its default: construction then resolves no defaults (hot path).
_BLANK: dict[str, Any] = {
    name: field.get_default(call_default_factory=True)
    for name, field in Message.model_fields.items()
    if not field.is_required()
}


class InjectMessageInput(TypedDict, total=False):
    role: str
    content: str | None
    name: str | None
    silent: bool
    metadata: Mapping[str, Any] | None
    attachments: list[AttachmentRef | Mapping[str, Any]] | None
    tool_calls: str | list[Any] | None
    tool_call_id: str | None
    tool_status: str | None


class QueueMessageInput(TypedDict, total=False):
    role: str
    content: str
    attachments: list[AttachmentRef | Mapping[str, Any]] | None
    silent: bool
    metadata: Mapping[str, Any] | None


class MessageUpdates(TypedDict, total=False):
    content: str | None
    name: str | None
    metadata: Mapping[str, Any] | None
    silent: bool
    attachments: list[AttachmentRef | Mapping[str, Any]] | None
    status: str
    tool_status: str | None
    tool_calls: str | list[Any] | None


def gather(message: object, fields: Mapping[str, Any], what: str) -> dict[str, Any]:
    """One dict from a positional mapping/record or keyword fields, never both."""
    if message is not None and fields:
        raise TypeError(f"{what}() takes a mapping or keyword fields, not both")
    if message is None:
        return dict(fields)
    if isinstance(message, BaseModel):
        return message.model_dump(exclude_unset=True)
    if isinstance(message, Mapping):
        return dict(message)
    raise InvalidMessage(f"{what}() expects a mapping of message fields")


def _optional_str(data: Mapping[str, Any], key: str, error: type[InvalidMessage]) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise error(f"{key} must be a string or None")
    return value


def check_metadata(
    value: Any, error: type[InvalidMessage] = InvalidMessage
) -> dict[str, Any] | None:
    """A JSON object ≤ 16 KiB without the reserved queue keys; empty → ``None``."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise error("metadata must be an object")
    for key in RESERVED_METADATA_KEYS:
        if key in value:
            raise error(f"metadata.{key} is reserved")
    if not all(isinstance(k, str) for k in value):
        raise error("metadata keys must be strings")
    if not value:
        return None
    try:
        text = json_compact(dict(value))
    except (TypeError, ValueError):
        raise error("metadata must be JSON-encodable") from None
    if len(text.encode()) > METADATA_MAX_BYTES:
        raise error(f"metadata exceeds {METADATA_MAX_BYTES} bytes as JSON")
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def check_attachments(
    value: Any, error: type[InvalidMessage] = InvalidMessage
) -> list[AttachmentRef] | None:
    """A list of attachment objects (spec 01 §1.4.8); empty → ``None``."""
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise error("attachments must be a list")
    refs: list[AttachmentRef] = []
    for item in value:
        raw = item.model_dump() if isinstance(item, AttachmentRef) else item
        if not isinstance(raw, Mapping):
            raise error("attachments: every element must be an object")
        missing = [k for k in ("id", "path", "name", "mimeType", "size") if k not in raw]
        if missing:
            raise error(f"attachments: element lacks {', '.join(missing)}")
        if raw.get("type", "file") != "file":
            raise error("attachments: type must be 'file'")
        try:
            ref = AttachmentRef.model_validate({k: v for k, v in raw.items() if v is not None})
        except ValidationError as exc:
            raise error(
                f"attachments: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}"
            ) from None
        if not ref.path.startswith("/"):
            raise error("attachments: path must start with '/'")
        refs.append(ref)
    return refs or None


def check_role_fields(message: Message, error: type[InvalidMessage]) -> None:
    """The role invariants of spec 01 §1.4.13 (3, 4, 5, 9)."""
    if message.role == "tool":
        if not message.tool_call_id:
            raise error("tool messages need a non-empty tool_call_id")
        if not isinstance(message.content, str):
            raise error("tool messages need string content")
    elif message.tool_call_id is not None:
        raise error("tool_call_id is only allowed on tool messages")
    if message.tool_status is not None and message.role != "tool":
        raise error("tool_status is only allowed on tool messages")
    if message.tool_calls is not None and message.role not in ("assistant", "user"):
        raise error("tool_calls are only allowed on assistant and user messages")


def check_inject(data: Mapping[str, Any], what: str = "inject_message") -> Message:
    """The candidate message for ``inject_message`` (id, stamps and position left unset)."""
    for key in data:
        if key not in INJECT_FIELDS:
            raise InvalidMessage(f"{what} does not accept field '{key}'")
    role = data.get("role")
    if role not in ROLES:
        raise InvalidMessage(f"role must be one of system, user, assistant, tool; got {role!r}")
    silent = data.get("silent", False)
    if not isinstance(silent, bool):
        raise InvalidMessage("silent must be a boolean")
    tool_status = data.get("tool_status")
    if tool_status not in (None, "success", "error"):
        raise InvalidMessage("tool_status must be 'success', 'error' or None")
    raw_calls = data.get("tool_calls")
    tool_calls = (
        encode_tool_calls(normalize_tool_calls(raw_calls)) if raw_calls is not None else None
    )
    message = Message.model_construct(
        **{
            **_BLANK,
            "id": "",
            "role": role,
            "content": _optional_str(data, "content", InvalidMessage),
            "name": _optional_str(data, "name", InvalidMessage),
            "silent": silent,
            "metadata": check_metadata(data.get("metadata")),
            "attachments": check_attachments(data.get("attachments")),
            "tool_calls": tool_calls,
            "tool_call_id": _optional_str(data, "tool_call_id", InvalidMessage),
            "tool_status": tool_status,
            "status": "completed",
        }
    )
    check_role_fields(message, InvalidMessage)
    if message.content is None and not (message.tool_calls or message.attachments):
        raise InvalidMessage("content may be None only when tool_calls or attachments are given")
    return message


def check_queue(data: Mapping[str, Any]) -> dict[str, Any]:
    """Validated fields of a queue entry (spec 02 §2.6.1)."""
    for key in data:
        if key not in QUEUE_FIELDS:
            raise InvalidMessage(f"queue_message does not accept field '{key}'")
    role = data.get("role")
    if role not in QUEUE_ROLES:
        raise InvalidMessage(f"queue role must be one of user, assistant, system; got {role!r}")
    content = data.get("content")
    if not isinstance(content, str):
        raise InvalidMessage("content must be a string")
    silent = data.get("silent", False)
    if not isinstance(silent, bool):
        raise InvalidMessage("silent must be a boolean")
    attachments = check_attachments(data.get("attachments"))
    if not content.strip() and not attachments:
        raise InvalidMessage("Message content or attachments required")
    return {
        "role": role,
        "content": content,
        "attachments": attachments,
        "silent": silent,
        "metadata": check_metadata(data.get("metadata")),
    }


def check_update_names(updates: Mapping[str, Any], allowed: frozenset[str]) -> None:
    for key in updates:
        if key not in allowed:
            raise InvalidUpdate(f"field '{key}' cannot be updated")


def merge_metadata(
    stored: Mapping[str, Any] | None, change: Any, error: type[InvalidMessage] = InvalidUpdate
) -> dict[str, Any] | None:
    """One-level merge (spec 02 §2.7.1): a ``None`` value removes a key; ``None`` clears."""
    if change is None:
        return None
    if not isinstance(change, Mapping):
        raise error("metadata must be an object")
    for key in RESERVED_METADATA_KEYS:
        if key in change:
            raise error(f"metadata.{key} is reserved")
    merged = dict(stored or {})
    for key, value in change.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return check_metadata(merged, error)


def apply_update(stored: Message, updates: Mapping[str, Any]) -> Message:
    """The stored message with ``updates`` applied and every invariant re-checked."""
    check_update_names(updates, UPDATE_FIELDS)
    change: dict[str, Any] = {}
    for key in ("content", "name"):
        if key in updates:
            change[key] = _optional_str(updates, key, InvalidUpdate)
    if "silent" in updates:
        if not isinstance(updates["silent"], bool):
            raise InvalidUpdate("silent must be a boolean")
        change["silent"] = updates["silent"]
    if "metadata" in updates:
        change["metadata"] = merge_metadata(stored.metadata, updates["metadata"])
    if "attachments" in updates:
        change["attachments"] = check_attachments(updates["attachments"], InvalidUpdate)
    if "status" in updates:
        if updates["status"] not in ("completed", "failed"):
            raise InvalidUpdate("status can only be set to 'completed' or 'failed'")
        change["status"] = updates["status"]
    if "tool_status" in updates:
        if updates["tool_status"] not in (None, "success", "error"):
            raise InvalidUpdate("tool_status must be 'success', 'error' or None")
        change["tool_status"] = updates["tool_status"]
    if "tool_calls" in updates:
        raw = updates["tool_calls"]
        try:
            change["tool_calls"] = encode_tool_calls(normalize_tool_calls(raw)) if raw else None
        except InvalidMessage as exc:
            raise InvalidUpdate(str(exc)) from None
    updated = stored.model_copy(update=change)
    check_role_fields(updated, InvalidUpdate)
    return updated


def apply_queue_update(
    entry_fields: Mapping[str, Any], updates: Mapping[str, Any]
) -> dict[str, Any]:
    """A waiting queue entry's editable fields with ``updates`` applied (spec 02 §2.7.4)."""
    check_update_names(updates, QUEUE_UPDATE_FIELDS)
    result = dict(entry_fields)
    if "content" in updates:
        if not isinstance(updates["content"], str):
            raise InvalidUpdate("content of a queued message must be a string")
        result["content"] = updates["content"]
    if "silent" in updates:
        if not isinstance(updates["silent"], bool):
            raise InvalidUpdate("silent must be a boolean")
        result["silent"] = updates["silent"]
    if "metadata" in updates:
        result["metadata"] = merge_metadata(result.get("metadata"), updates["metadata"])
    if "attachments" in updates:
        result["attachments"] = check_attachments(updates["attachments"], InvalidUpdate)
    if not result["content"].strip() and not result.get("attachments"):
        raise InvalidUpdate("Message content or attachments required")
    return result
