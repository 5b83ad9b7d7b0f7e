"""A snapshot of chat messages ⇄ AG-UI messages (spec 11 §11.7.3, "Export of a snapshot").

``to_agui_messages`` follows the spec's table; ``from_agui_messages`` is its inverse for the
fields AG-UI carries. What AG-UI has no field for travels in ``metadata["threadloom"]``: the
spec's ``silent``, ``depth``, ``created_at``, ``subagent_id`` on every message, and, on the
``ReasoningMessage``, the provider's ``reasoning_details`` (so an Anthropic thinking signature
survives a trip through AG-UI) and ``reasoning_duration_ms``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ag_ui.core import (
    ActivityMessage,
    AssistantMessage,
    DataSource,
    DeveloperMessage,
    DocumentPart,
    FunctionCall,
    ImagePart,
    ReasoningMessage,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UrlSource,
    UserMessage,
)
from ag_ui.core import Message as AguiMessage
from pydantic import TypeAdapter

from threadloom.client.chat import (
    AttachmentRef,
    ContentBlock,
    Delivery,
    FileBlock,
    ImageBlock,
    Message,
    SubagentRef,
    TextBlock,
    ToolUseBlock,
    frozen,
)
from threadloom.client.convert.openai import model_visible

__all__ = ["KEY", "REASONING_SUFFIX", "from_agui_messages", "parse_message", "to_agui_messages"]

KEY = "threadloom"
"""The key of Threadloom's own fields inside an AG-UI ``metadata`` object."""
REASONING_SUFFIX = ":reasoning"

_MESSAGE: TypeAdapter[AguiMessage] = TypeAdapter(AguiMessage)


def parse_message(item: Any) -> AguiMessage:
    """An AG-UI message model from a model or a plain dict (wire or attribute names)."""
    if isinstance(item, Mapping):
        return _MESSAGE.validate_python(dict(item))
    return _MESSAGE.validate_python(item)


def _arguments(block: ToolUseBlock) -> str:
    if block.args_raw is not None:
        return block.args_raw
    return json.dumps(block.args, separators=(",", ":"))


SIDE_B = "b"
"""``metadata.threadloom.side`` of a message side b's model wrote (a ``dual_ai`` agent)."""


def _by_side_b(m: Message) -> bool:
    """A message side b's model wrote: stored ``user`` (spec 04 §4.8.1) with the prompt
    that wrote it, where a person's message has none."""
    return m.role == "user" and m.extra.get("prompt") is not None


def _metadata(m: Message) -> dict[str, Any]:
    ours: dict[str, Any] = {
        "silent": m.silent,
        "depth": m.depth,
        "created_at": m.created_at_us,
        "subagent_id": m.subagent.id if m.subagent is not None else None,
    }
    if _by_side_b(m):
        ours["side"] = SIDE_B
    return {KEY: ours}


def _image_source(url: str, mime_type: str | None) -> DataSource | UrlSource:
    if url.startswith("data:") and ";base64," in url:
        head, data = url.split(";base64,", 1)
        return DataSource(value=data, mime_type=head.removeprefix("data:") or "image/*")
    return UrlSource(value=url, mime_type=mime_type)


def _user_content(
    m: Message, attachment_url: Callable[[AttachmentRef], str] | None
) -> str | list[Any]:
    if isinstance(m.content, str):
        return m.content
    parts: list[Any] = []
    for block in m.content:
        if isinstance(block, TextBlock):
            parts.append(TextPart(text=block.text))
        elif isinstance(block, ImageBlock):
            parts.append(ImagePart(source=_image_source(block.url, block.mime_type)))
        elif isinstance(block, FileBlock):
            ref = block.attachment
            url = block.url or ""
            if ref is not None and attachment_url is not None:
                url = attachment_url(ref)
            elif ref is not None and not url:
                url = ref.path
            meta = {KEY: {"attachment": ref.model_dump()}} if ref is not None else None
            mime = ref.mimeType if ref is not None else None
            parts.append(DocumentPart(source=UrlSource(value=url, mime_type=mime), metadata=meta))
    return parts


def to_agui_messages(
    messages: Iterable[Message],
    *,
    attachment_url: Callable[[AttachmentRef], str] | None = None,
    include_subprompts: bool = False,
) -> list[AguiMessage]:
    """The AG-UI messages of a snapshot (§11.7.3), model-visible messages only (§11.7)."""
    out: list[AguiMessage] = []
    for m in messages:
        if not model_visible(m, include_subprompts):
            continue
        meta = _metadata(m)
        if m.role == "system":
            out.append(SystemMessage(id=m.id, content=m.text, name=m.name, metadata=meta))
        elif m.role == "user" and not _by_side_b(m):
            content = _user_content(m, attachment_url)
            out.append(UserMessage(id=m.id, content=content, name=m.name, metadata=meta))
        elif m.role == "tool":
            error = m.text if m.extra.get("tool_status") == "error" else None
            out.append(
                ToolMessage(
                    id=m.id,
                    tool_call_id=m.tool_call_id or "",
                    content=m.text,
                    error=error,
                    metadata=meta,
                )
            )
        else:  # a model's message: side a's, or side b's of a dual_ai agent (§13.2.10)
            if m.reasoning is not None:
                thinking = dict(meta[KEY])
                if "reasoning_details" in m.extra:
                    thinking["reasoning_details"] = m.extra["reasoning_details"]
                if m.reasoning_duration_ms is not None:
                    thinking["reasoning_duration_ms"] = m.reasoning_duration_ms
                out.append(
                    ReasoningMessage(
                        id=m.id + REASONING_SUFFIX, content=m.reasoning, metadata={KEY: thinking}
                    )
                )
            calls = [
                ToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=_arguments(c)))
                for c in m.tool_uses
            ]
            out.append(
                AssistantMessage(
                    id=m.id,
                    content=m.text if m.text or not calls else None,
                    tool_calls=calls or None,
                    name=m.name,
                    metadata=meta,
                )
            )
    return out


def _ours(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    value = (metadata or {}).get(KEY)
    return dict(value) if isinstance(value, Mapping) else {}


def _source_url(source: Any) -> str:
    if isinstance(source, DataSource):
        return f"data:{source.mime_type};base64,{source.value}"
    return str(getattr(source, "value", ""))


def _parts(content: str | Sequence[Any]) -> tuple[str, list[ContentBlock]]:
    """The text and the non-text blocks of AG-UI content (a string or content parts)."""
    if isinstance(content, str):
        return content, []
    text = ""
    blocks: list[ContentBlock] = []
    for part in content:
        if isinstance(part, TextPart):
            text += part.text
        elif isinstance(part, ImagePart):
            mime = getattr(part.source, "mime_type", None)
            blocks.append(ImageBlock(url=_source_url(part.source), mime_type=mime))
        else:
            source = getattr(part, "source", None)
            ref = _ours(getattr(part, "metadata", None)).get("attachment")
            attachment = AttachmentRef.model_validate(ref) if isinstance(ref, Mapping) else None
            blocks.append(FileBlock(attachment=attachment, url=_source_url(source) or None))
    return text, blocks


def _calls(items: Sequence[ToolCall] | None) -> tuple[ToolUseBlock, ...]:
    blocks: list[ToolUseBlock] = []
    for call in items or ():
        raw = call.function.arguments
        try:
            args: Any = json.loads(raw) if raw else {}
        except ValueError:
            args = {}
        blocks.append(ToolUseBlock(id=call.id, name=call.function.name, args=args, args_raw=raw))
    return tuple(blocks)


def _content(text: str, blocks: Sequence[ContentBlock]) -> str | tuple[ContentBlock, ...]:
    if not blocks:
        return text
    return ((TextBlock(text=text),) if text else ()) + tuple(blocks)


def _message(
    item: AguiMessage, reasoning: ReasoningMessage | None, extra: dict[str, Any]
) -> Message:
    ours = _ours(item.metadata)
    subagent_id = ours.get("subagent_id")
    created_at = ours.get("created_at")
    depth = ours.get("depth")
    fields: dict[str, Any] = {
        "silent": bool(ours.get("silent", False)),
        "depth": depth if isinstance(depth, int) else 0,
        "created_at_us": created_at if isinstance(created_at, int) else None,
        "subagent": SubagentRef(id=subagent_id) if isinstance(subagent_id, str) else None,
    }
    if reasoning is not None:
        thinking = _ours(reasoning.metadata)
        fields["reasoning"] = reasoning.content
        duration = thinking.get("reasoning_duration_ms")
        fields["reasoning_duration_ms"] = duration if isinstance(duration, int) else None
        if "reasoning_details" in thinking:
            extra["reasoning_details"] = thinking["reasoning_details"]
    role = "system" if item.role == "developer" else item.role
    if isinstance(item, AssistantMessage) and ours.get("side") == SIDE_B:
        role = "user"  # side b's model wrote it (to_agui_messages shows it as an assistant)
    if isinstance(item, ToolMessage):
        text, _ = _parts(item.content)
        if item.error is not None:
            extra["tool_status"] = "error"
        fields["tool_call_id"] = item.tool_call_id
        content: str | tuple[ContentBlock, ...] = text
    elif isinstance(item, AssistantMessage):
        calls = _calls(item.tool_calls)
        content = _content(item.content or "", calls)
        fields["tool_call_ids"] = tuple(c.id for c in calls)
    elif isinstance(item, UserMessage):
        text, blocks = _parts(item.content)
        content = _content(text, blocks)
    else:
        content = str(getattr(item, "content", "") or "")
    if isinstance(item, UserMessage | AssistantMessage | SystemMessage | DeveloperMessage):
        fields["name"] = item.name
    return Message(
        id=item.id,
        key=item.id,
        role=role,  # type: ignore[arg-type]
        content=content,
        delivery=Delivery.static(item.id),
        extra=frozen(extra),
        **fields,
    )


def from_agui_messages(items: Iterable[Any]) -> list[Message]:
    """Chat messages from AG-UI messages (models or dicts): the inverse of
    ``to_agui_messages``. A ``ReasoningMessage`` gives its text to the assistant message it
    precedes (``<id>:reasoning`` before ``<id>``, or the next message when it is an assistant);
    one without an assistant becomes an assistant message with empty content. Activity
    messages are skipped."""
    parsed = [parse_message(item) for item in items]
    out: list[Message] = []
    pending: ReasoningMessage | None = None
    for item in parsed:
        if isinstance(item, ReasoningMessage):
            if pending is not None:
                out.append(_orphan(pending))
            pending = item
            continue
        if isinstance(item, ActivityMessage):
            continue
        reasoning = None
        if pending is not None and isinstance(item, AssistantMessage):
            reasoning, pending = pending, None
        elif pending is not None:
            out.append(_orphan(pending))
            pending = None
        out.append(_message(item, reasoning, {}))
    if pending is not None:
        out.append(_orphan(pending))
    return out


def _orphan(reasoning: ReasoningMessage) -> Message:
    message_id = reasoning.id.removesuffix(REASONING_SUFFIX)
    assistant = AssistantMessage(id=message_id, content="", metadata=reasoning.metadata)
    return _message(assistant, reasoning, {})
