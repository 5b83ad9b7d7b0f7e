"""Messages (spec 08 §8.4): the page read, the send, the edit and the delete — their query
parameters, bodies and answers; and the parts other bodies share with them (an uploaded
attachment §8.2.5, a message's ``metadata``).

The bodies are checked by the spec's rules, with its texts (``problems.check``); their
types and constraints say the same for ``/openapi.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, model_validator

from threadloom.records import Message
from threadloom.wire.model import Absent, Answer, Body, examples
from threadloom.wire.patterns import (
    BASE64_OR_EMPTY_PATTERN,
    BASE64_PATTERN,
    FILE_NAME,
    MIME_PATTERN,
    NOT_BLANK,
    decode_base64,
    is_mime_type,
)
from threadloom.wire.problems import boolean_value, check, check_then, integer_from, refuse
from threadloom.wire.query import LIMIT, OFFSET, boolean, choice, integer, text

# -- shared parts of bodies ------------------------------------------------------------------

RESERVED_METADATA = ("queued", "queue_status", "queue_source")
MAX_METADATA = 16 * 1024
"""The most bytes of a message's ``metadata`` as JSON."""


def message_metadata(value: Any) -> dict[str, Any] | None:
    """A message's ``metadata`` (spec 08 §8.4.2): an object of at most 16 KiB as JSON,
    without the queue's reserved keys, its ``client_message_id`` 1-128 characters."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise refuse("must be an object")
    for key in RESERVED_METADATA:
        if key in value:
            raise refuse("is reserved", at=key)
    try:
        size = len(json.dumps(value, allow_nan=False).encode())
    except (TypeError, ValueError):
        raise refuse("must be JSON") from None
    if size > MAX_METADATA:
        raise refuse("must be at most 16 KiB as JSON")
    cid = value.get("client_message_id")
    if cid is not None and (not isinstance(cid, str) or not 1 <= len(cid) <= 128):
        raise refuse("must be a string of 1-128 characters", at="client_message_id")
    return value


def _metadata(schema: dict[str, Any]) -> None:
    schema["not"] = {"anyOf": [{"required": [key]} for key in RESERVED_METADATA]}
    schema["properties"] = {
        "client_message_id": {
            "anyOf": [{"type": "string", "minLength": 1, "maxLength": 128}, {"type": "null"}]
        }
    }


Metadata = Annotated[
    dict[str, Any],
    Field(
        json_schema_extra=_metadata,
        description="At most 16 KiB as JSON; `queued`, `queue_status`, `queue_source` are reserved",
    ),
]


MAX_UPLOADS = 20
MAX_UPLOAD_DATA = 20 * 1024 * 1024
MAX_UPLOAD_THUMBNAIL = 1024 * 1024


def _file_name(value: Any) -> str:
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= 255
        or not value.strip()
        or any(c in value for c in "/\\\x00")
    ):
        raise refuse("must be 1-255 characters, not blank, without '/', '\\' or NUL")
    return value


def _mime_type(value: Any) -> str:
    if not isinstance(value, str) or not is_mime_type(value):
        raise refuse("must be a MIME type such as image/png")
    return value


def _upload_data(value: Any) -> bytes:
    data = decode_base64(value) if isinstance(value, str) else None
    if data is None:
        raise refuse("must be base64-encoded data")
    if not 1 <= len(data) <= MAX_UPLOAD_DATA:
        raise refuse(f"must decode to 1 to {MAX_UPLOAD_DATA} bytes")
    return data


def _thumbnail(value: Any) -> str | None:
    if value is None:
        return None
    decoded = decode_base64(value) if isinstance(value, str) else None
    if decoded is None or len(decoded) > MAX_UPLOAD_THUMBNAIL:
        raise refuse("must be base64 of at most 1 MiB")
    return str(value)


def _description(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or len(value) > 2000):
        raise refuse("must be a string of at most 2000 characters")
    return value


_dimension = integer_from(1, 100_000)


class Upload(Body):
    """An attachment sent inline (§8.2.5); stored as a thread file."""

    # checked, ``data`` holds the decoded bytes

    name: Annotated[str, check(_file_name)] = Field(min_length=1, max_length=255, pattern=FILE_NAME)
    mimeType: Annotated[str, check(_mime_type)] = Field(pattern=MIME_PATTERN)
    data: Annotated[
        bytes,
        check(_upload_data),
        WithJsonSchema({"type": "string", "pattern": BASE64_PATTERN}),
    ] = Field(description="base64 of 1 byte to 20 MiB")
    thumbnail: Annotated[str | None, check(_thumbnail)] = Field(
        None, pattern=BASE64_OR_EMPTY_PATTERN, description="base64 of at most 1 MiB"
    )
    description: Annotated[str | None, check(_description)] = Field(None, max_length=2000)
    width: Annotated[int | None, check(_dimension)] = Field(None, ge=1, le=100_000)
    height: Annotated[int | None, check(_dimension)] = Field(None, ge=1, le=100_000)


def _upload_list(value: Any) -> list[Any] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise refuse("must be an array")
    if len(value) > MAX_UPLOADS:
        raise refuse(f"must have at most {MAX_UPLOADS} items")
    return value


Uploads = Annotated[list[Upload], Field(max_length=MAX_UPLOADS), check_then(_upload_list)]
"""Attachments sent inline: the list checked first, then each item."""

# -- read (§8.4.1) ---------------------------------------------------------------------------

PAGE_QUERY = (
    LIMIT,
    OFFSET,
    choice("order", ("asc", "desc"), "Which end the page starts from (default desc)"),
    integer("depth", "Deepest sub-prompt level to include (default 0)"),
    boolean("includeSilent", "Include silent messages"),
    boolean("includeWorkblocks", "With ids: add each tool call's whole work block"),
    text("ids", "Comma-separated message ids (at most 200): those, in history order"),
)


class MessagePage(Answer):
    """A page of messages in history order, queue entries as pending records (§8.4.1)."""

    messages: list[Message]
    total: int
    has_more: bool = Field(alias="hasMore")
    seq: int


# -- send (§8.4.2) ---------------------------------------------------------------------------


def _something_said(schema: dict[str, Any]) -> None:
    """Non-blank ``content`` or at least one attachment (§8.4.2)."""
    schema["anyOf"] = [
        {
            "required": ["content"],
            "properties": {"content": {"type": "string", "pattern": NOT_BLANK}},
        },
        {
            "required": ["attachments"],
            "properties": {"attachments": {"type": "array", "minItems": 1}},
        },
    ]


def _text_or_null(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise refuse("must be a string or null")
    return value


SEND_ROLES = ("user", "assistant", "system")


def _send_role(value: Any) -> str:
    if not isinstance(value, str) or value not in SEND_ROLES:
        raise refuse(
            "must be one of user, assistant, system", "role must be one of user, assistant, system"
        )
    return value


class SendMessage(Body):
    # the send (§8.4.2): problems are reported in the order of these fields
    model_config = examples(
        {"content": "Hello"},
        {"content": "Hello once", "metadata": {"client_message_id": "example-1"}},
        extra=_something_said,
    )

    content: Annotated[str | None, check(_text_or_null)] = None
    role: Annotated[Literal["user", "assistant", "system"], check(_send_role)] = "user"
    silent: Annotated[bool, check(boolean_value)] = False
    metadata: Annotated[Metadata | None, check(message_metadata)] = None
    attachments: Uploads | None = None

    @model_validator(mode="after")
    def _says_something(self) -> SendMessage:
        if not (self.content or "").strip() and not self.attachments:
            raise refuse(
                "must not be blank without attachments",
                "Message content or attachments required",
                at="content",
            )
        return self


class SendAccepted(Answer):
    """202 ``queued``; 200 ``duplicate`` for a repeated ``client_message_id`` (§8.4.2)."""

    status: Literal["queued", "duplicate"]
    queueId: str | None
    messageId: str
    message: str


# -- edit and delete (§8.4.3, §8.4.4) --------------------------------------------------------


def _some_field(*names: str) -> Callable[[dict[str, Any]], None]:
    """A body's schema needs at least one of ``names``."""

    def extra(schema: dict[str, Any]) -> None:
        schema["anyOf"] = [{"required": [name]} for name in names]

    return extra


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise refuse("must be a string")
    return value


class PatchMessage(Body):
    # the edit (§8.4.3): at least one of the fields; ``metadata`` is merged one level deep
    model_config = examples(
        {"content": "Edited"},
        {"metadata": {"label": "kept"}},
        extra=_some_field("content", "metadata", "silent"),
    )

    content: Annotated[str | Absent, check(_text)] = None
    silent: Annotated[bool | Absent, check(boolean_value)] = None
    metadata: Annotated[Metadata | Absent, check(message_metadata)] = None

    @model_validator(mode="after")
    def _changes_something(self) -> PatchMessage:
        if "metadata" in self.model_fields_set and self.metadata is None:
            raise refuse("must be an object", at="metadata")
        if self.content is None and self.silent is None and self.metadata is None:
            raise refuse("has no field to update", "No valid fields to update", at="body")
        return self


class MessageUpdated(Answer):
    success: bool
    message: Message


class MessagesDeleted(Answer):
    success: bool
    deletedIds: list[str]
