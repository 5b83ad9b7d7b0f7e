"""Messages (spec 08 §8.4): the page read, the send, the edit and the delete — their query
parameters, bodies and answers; and the parts other bodies share with them (an uploaded
attachment §8.2.5, a message's ``metadata``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field

from threadloom.records import Message
from threadloom.wire.model import Absent, Answer, Body, examples
from threadloom.wire.patterns import (
    BASE64_OR_EMPTY_PATTERN,
    BASE64_PATTERN,
    FILE_NAME,
    MIME_PATTERN,
    NOT_BLANK,
)
from threadloom.wire.query import LIMIT, OFFSET, boolean, choice, integer, text

# -- shared parts of bodies ------------------------------------------------------------------

RESERVED_METADATA = ("queued", "queue_status", "queue_source")


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


class Upload(Body):
    """An attachment sent inline (§8.2.5); stored as a thread file."""

    name: str = Field(min_length=1, max_length=255, pattern=FILE_NAME)
    mimeType: str = Field(pattern=MIME_PATTERN)
    data: str = Field(pattern=BASE64_PATTERN, description="base64 of 1 byte to 20 MiB")
    width: int | None = Field(None, ge=1, le=100_000)
    height: int | None = Field(None, ge=1, le=100_000)
    thumbnail: str | None = Field(
        None, pattern=BASE64_OR_EMPTY_PATTERN, description="base64 of at most 1 MiB"
    )
    description: str | None = Field(None, max_length=2000)


Uploads = Annotated[list[Upload], Field(max_length=20)]

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
    hasMore: bool
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


class SendMessage(Body):
    model_config = examples(
        {"content": "Hello"},
        {"content": "Hello once", "metadata": {"client_message_id": "example-1"}},
        extra=_something_said,
    )

    content: str | None = None
    role: Literal["user", "assistant", "system"] = "user"
    attachments: Uploads | None = None
    silent: bool = False
    metadata: Metadata | None = None


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


class PatchMessage(Body):
    model_config = examples(
        {"content": "Edited"},
        {"metadata": {"label": "kept"}},
        extra=_some_field("content", "metadata", "silent"),
    )

    content: str | Absent = None
    metadata: Metadata | Absent = None
    silent: bool | Absent = None


class MessageUpdated(Answer):
    success: bool
    message: Message


class MessagesDeleted(Answer):
    success: bool
    deletedIds: list[str]
