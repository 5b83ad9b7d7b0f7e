"""Request messages: a stored message as one side presents it to the model (spec 04
§4.8.1 perspective, §4.11.4 content and attachments, §4.11.5 reasoning replay), the
provider-bound normalisation of a request's messages (§4.11.7), and their provider form.

``context.assemble`` (the full pass) and ``context_cache`` (the incremental one) both build
requests from these; ``fragments`` writes their JSON text for the log's request body.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict

from threadloom.providers.types import (
    AssistantMessage,
    ImagePart,
    SystemMessage,
    ToolCallSpec,
    ToolMessage,
    UserMessage,
    trusted,
)
from threadloom.records import Message, SharingModel, ToolCall, decode_tool_calls
from threadloom.thread.history import MessageHistory

MISSING_RESULT = (
    'Tool result missing from conversation history for prior call "{name}". '
    "Treat this as a failed tool call."
)
NO_VISION = "[Image omitted: model does not support vision]"


class RequestMessage(SharingModel):
    """A message as presented to the model (spec 03 §3.6.5); ``source_id`` names the
    stored message it was built from (``None`` for the system and synthetic messages).
    Those the engine builds with ``trusted`` share their fields sets (``SharingModel``)."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    is_error: bool = False
    reasoning_content: str | None = None
    reasoning_details: list[dict[str, Any]] | None = None
    images: list[dict[str, Any]] | None = None
    """Image parts a tool result carries (for adapters that accept them)."""
    source_id: str | None = None


@dataclass(eq=False, slots=True)
class Presented:
    """A stored message in request form, remembered per record; the provider message and
    its JSON text are filled in by the request builder (``model_call.build_request``)."""

    request: RequestMessage
    provider: Any = None
    fragment: str | None = None


DECODED_CALLS = "decoded calls"
"""The history memo key of a record's decoded calls (``decoded_calls``)."""
CALL_IDS = "calls"
"""The history memo key of the ids of a record's calls (``call_ids``)."""


def decoded_calls(history: MessageHistory | None, message: Message) -> list[ToolCall]:
    """The calls a message issues, decoded once per stored record (its ids and its request
    form share them) while the history remembers them; callers do not mutate them."""
    if not message.tool_calls:
        return []
    if history is None:
        return decode_tool_calls(message.tool_calls)
    return history.memo(message, DECODED_CALLS, lambda m: decode_tool_calls(m.tool_calls or ""))


def call_ids(history: MessageHistory | None, message: Message) -> tuple[str, ...]:
    """The ids of the calls a message issues (remembered per stored record)."""

    def compute(m: Message) -> tuple[str, ...]:
        return tuple(c.id for c in decoded_calls(history, m))

    if history is None:
        return compute(message)
    return history.memo(message, CALL_IDS, compute)


def is_image(ref: Any) -> bool:
    return str(ref.mimeType).startswith("image/")


def _image_line(image: Any) -> str:
    if image.description:
        return f"[Image: {image.name}] {image.description}"
    if image.width and image.height:
        return f"[Image: {image.name} ({image.width}x{image.height})]"
    return f"[Image: {image.name}]"


def _image_part(image: Any, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {"type": "text", "text": f"[Image not available: {image.name}]"}
    return {
        "type": "image",
        "media_type": image.mimeType,
        "name": image.name,
        "data": base64.b64encode(data).decode("ascii"),
    }


def _user_content(
    message: Message, recent: bool, files: Mapping[str, bytes | None]
) -> str | list[dict[str, Any]]:
    """A user-presented message's content with its attachments (spec 04 §4.11.4 item 2)."""
    content = message.content or ""
    if not message.attachments:
        return content
    images = [a for a in message.attachments if is_image(a)]
    others = [a.name for a in message.attachments if not is_image(a)]
    if not images:
        return (
            f"{content}\n\n[Attached files: {', '.join(others)}]"
            if content
            else (f"[Attached files: {', '.join(others)}]")
        )
    if not recent:
        lines = [_image_line(image) for image in images]
        if others:
            lines.append(f"[Other files: {', '.join(others)}]")
        text = "\n".join(lines)
        return f"{text}\n\n{content}" if content else text
    parts: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
    parts += [_image_part(image, files.get(image.path)) for image in images]
    if others:
        parts.append({"type": "text", "text": f"[Attached files: {', '.join(others)}]"})
    return parts


def convert(
    m: Message,
    own: str,
    include_reasoning: bool,
    recent: bool = False,
    files: Mapping[str, bytes | None] | None = None,
    history: MessageHistory | None = None,
) -> Presented | None:
    """One stored message as the acting side sees it (spec 04 §4.8.1, §4.11.4, §4.11.5)."""
    # Built without validation (``trusted``): the values are the stored record's typed
    # fields; reasoning details parsed from their stored text are validated as before.
    files = files or {}
    if m.role == "tool":
        images = [a for a in (m.attachments or []) if is_image(a)]
        parts = [_image_part(a, files.get(a.path)) for a in images if files.get(a.path)]
        return Presented(
            trusted(
                RequestMessage,
                {
                    "role": "tool",
                    "content": m.content or "",
                    "name": m.name,
                    "tool_call_id": m.tool_call_id,
                    "is_error": m.tool_status == "error",
                    "images": parts or None,
                    "source_id": m.id,
                },
            )
        )
    if m.role == "system":
        return Presented(
            trusted(
                RequestMessage, {"role": "system", "content": m.content or "", "source_id": m.id}
            )
        )
    if m.role != own:
        # The sibling's tool calls are not this side's: keep only what it said.
        if m.tool_calls and not (m.content or "").strip() and not m.attachments:
            return None
        content = _user_content(m, recent, files)
        return Presented(
            trusted(RequestMessage, {"role": "user", "content": content, "source_id": m.id})
        )
    details = json.loads(m.reasoning_details) if m.reasoning_details else None
    values = {
        "role": "assistant",
        "content": m.content,
        "tool_calls": list(decoded_calls(history, m)) if m.tool_calls else None,
        "reasoning_content": m.reasoning_content if include_reasoning else None,
        "reasoning_details": details if include_reasoning else None,
        "source_id": m.id,
    }
    if values["reasoning_details"] is not None:  # parsed JSON: checked
        return Presented(RequestMessage(**values))
    return Presented(trusted(RequestMessage, values))


def missing_result(call: ToolCall) -> RequestMessage:
    """The error result normalisation puts in for a call with no stored result."""
    return RequestMessage(
        role="tool",
        name=call.function.name,
        tool_call_id=call.id,
        is_error=True,
        content=MISSING_RESULT.format(name=call.function.name),
    )


def blank_assistant(m: RequestMessage) -> bool:
    """An assistant message with nothing to send (no calls, reasoning or content), which
    normalisation drops (spec 04 §4.11.7)."""
    if m.role != "assistant" or m.tool_calls or m.reasoning_content or m.reasoning_details:
        return False
    return not (m.content if isinstance(m.content, list) else (m.content or "").strip())


def normalize(messages: Sequence[RequestMessage], supports_images: bool) -> list[RequestMessage]:
    """Provider-bound normalisation (spec 04 §4.11.7): tool pairing, blank assistants,
    vision. Linear: answers are found through an index of tool messages by call id."""
    answers: dict[str, int] = {}
    for index, m in enumerate(messages):
        if m.role == "tool" and m.tool_call_id and m.tool_call_id not in answers:
            answers[m.tool_call_id] = index
    used: set[int] = set()
    out: list[RequestMessage] = []
    for m in messages:
        if m.role == "tool":
            continue  # emitted with its block, or dropped when outside any block
        if m.role == "assistant" and m.tool_calls:
            out.append(m)
            for call in m.tool_calls:
                found = answers.get(call.id)
                if found is not None and found not in used:
                    used.add(found)
                    out.append(messages[found])
                else:
                    out.append(missing_result(call))
            continue
        if blank_assistant(m):
            continue
        out.append(m)
    if not supports_images:
        out = [_strip_images(m) for m in out]
    return out


def _strip_images(m: RequestMessage) -> RequestMessage:
    if m.images:
        m = m.model_copy(update={"images": None})
    if not isinstance(m.content, list):
        return m
    parts = [p for p in m.content if p.get("type") != "image"]
    if not parts and m.role == "user":
        parts = [{"type": "text", "text": NO_VISION}]
    return m.model_copy(update={"content": parts})


def provider_message(m: RequestMessage) -> Any:
    """The provider form of a request message (``providers.types``), validated."""
    if m.role == "system":
        return SystemMessage(content=m.content if isinstance(m.content, str) else "")
    if m.role == "user":
        return UserMessage(content=m.content if m.content is not None else "")
    if m.role == "tool":
        text = m.content if isinstance(m.content, str) else ""
        images = [
            ImagePart(media_type=i["media_type"], data=i["data"], name=i.get("name"))
            for i in (m.images or [])
            if i.get("type") == "image"
        ]
        return ToolMessage(
            tool_call_id=m.tool_call_id or "",
            name=m.name or "",
            content=text,
            is_error=m.is_error,
            images=images,
        )
    return AssistantMessage(
        content=m.content if isinstance(m.content, str) else None,
        tool_calls=[
            ToolCallSpec(
                id=c.id,
                name=c.function.name,
                arguments=c.function.arguments,
                extra_content=c.extra_content,
            )
            for c in (m.tool_calls or [])
        ],
        reasoning_content=m.reasoning_content,
        reasoning_details=m.reasoning_details,
    )


def own_provider_message(m: RequestMessage) -> Any:
    """``provider_message`` for a request message the engine built itself (the context
    cache's, from stored records): the provider message built without validation when
    its values are typed as its fields are, else validated by ``provider_message``."""
    role, content = m.role, m.content
    if role == "system" or role == "user":
        if type(content) is str:
            return trusted(SystemMessage if role == "system" else UserMessage, {"content": content})
    elif role == "tool":
        if not m.images and type(content) is str:
            return trusted(
                ToolMessage,
                {
                    "tool_call_id": m.tool_call_id or "",
                    "name": m.name or "",
                    "content": content,
                    "is_error": m.is_error,
                    "images": [],
                },
            )
    elif role == "assistant" and m.reasoning_details is None:
        calls = [
            trusted(
                ToolCallSpec,
                {
                    "id": c.id,
                    "name": c.function.name,
                    "arguments": c.function.arguments,
                    "extra_content": c.extra_content,
                },
            )
            for c in (m.tool_calls or [])
            if c.extra_content is None
        ]
        if len(calls) == len(m.tool_calls or []):
            return trusted(
                AssistantMessage,
                {
                    "content": content if isinstance(content, str) else None,
                    "tool_calls": calls,
                    "reasoning_content": m.reasoning_content,
                    "reasoning_details": None,
                },
            )
    return provider_message(m)
