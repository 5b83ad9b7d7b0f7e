"""threadplane JSON (spec 11 §11.7.4): ``to_threadplane`` and its inverse ``from_threadplane``."""

from __future__ import annotations

from typing import Any

from threadloom.client.chat import (
    Citation,
    ContentBlock,
    Delivery,
    FileBlock,
    ImageBlock,
    Message,
    Outcome,
    Phase,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    frozen,
)


def _delivery(delivery: Delivery) -> tuple[dict[str, Any], str | None]:
    if delivery.phase in (Phase.SENDING, Phase.QUEUED):
        return {"generation": delivery.generation, "phase": "streaming"}, delivery.phase.value
    if delivery.phase is Phase.STREAMING:
        return {"generation": delivery.generation, "phase": "streaming"}, None
    outcome = delivery.outcome or Outcome.SUCCESS
    wire = "error" if outcome is Outcome.REJECTED else outcome.value
    return {"generation": delivery.generation, "phase": "complete", "outcome": wire}, None


def _block(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        out: dict[str, Any] = {"type": "image", "url": block.url}
        if block.alt is not None:
            out["alt"] = block.alt
        return out
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "args": block.args}
    if isinstance(block, ToolResultBlock):
        return {
            "type": "tool_result",
            "toolCallId": block.tool_call_id,
            "result": block.result,
            "isError": block.is_error,
        }
    raise TypeError(block)


def _citation(c: Citation) -> dict[str, Any]:
    out: dict[str, Any] = {"id": c.id, "index": c.index}
    for key, value in (("title", c.title), ("url", c.url), ("snippet", c.snippet)):
        if value is not None:
            out[key] = value
    if c.source_type is not None:
        out["sourceType"] = c.source_type
    return out


def to_threadplane(message: Message) -> dict[str, Any]:
    delivery, detail = _delivery(message.delivery)
    extra: dict[str, Any] = {"silent": message.silent, "depth": message.depth}
    if message.metadata:
        extra["metadata"] = dict(message.metadata)
    if message.subagent is not None:
        extra["subagent"] = {"id": message.subagent.id, "name": message.subagent.name}
    if "reasoning_details" in message.extra:
        extra["reasoningDetails"] = message.extra["reasoning_details"]
    if detail is not None:
        extra["deliveryDetail"] = detail
    content: Any = message.content
    if not isinstance(message.content, str):
        files = [b for b in message.content if isinstance(b, FileBlock)]
        content = [_block(b) for b in message.content if not isinstance(b, FileBlock)]
        if files:
            extra["files"] = [
                {
                    "url": f.url,
                    "attachment": f.attachment.model_dump(by_alias=True) if f.attachment else None,
                }
                for f in files
            ]
    out: dict[str, Any] = {
        "id": message.id,
        "role": message.role,
        "content": content,
        "delivery": delivery,
        "extra": extra,
    }
    if message.name is not None:
        out["name"] = message.name
    if message.reasoning is not None:
        out["reasoning"] = message.reasoning
    if message.reasoning_duration_ms is not None:
        out["reasoningDurationMs"] = message.reasoning_duration_ms
    if message.tool_call_id is not None:
        out["toolCallId"] = message.tool_call_id
    if message.tool_call_ids:
        out["toolCallIds"] = list(message.tool_call_ids)
    if message.citations:
        out["citations"] = [_citation(c) for c in message.citations]
    return out


def _from_block(obj: dict[str, Any]) -> ContentBlock:
    kind = obj.get("type")
    if kind == "image":
        return ImageBlock(url=str(obj.get("url", "")), alt=obj.get("alt"))
    if kind == "tool_use":
        return ToolUseBlock(
            id=str(obj.get("id", "")), name=str(obj.get("name", "")), args=obj.get("args")
        )
    if kind == "tool_result":
        return ToolResultBlock(
            tool_call_id=str(obj.get("toolCallId", "")),
            result=obj.get("result"),
            is_error=bool(obj.get("isError", False)),
        )
    return TextBlock(text=str(obj.get("text", "")))


def from_threadplane(obj: dict[str, Any]) -> Message:
    """The inverse of ``to_threadplane`` for the fields threadplane has."""
    wire = obj.get("delivery") or {}
    generation = str(wire.get("generation", obj["id"]))
    if wire.get("phase") == "complete":
        delivery = Delivery.complete(generation, Outcome(wire.get("outcome", "success")))
    else:
        delivery = Delivery.streaming(generation)
    raw = obj.get("content", "")
    content: Any = raw if isinstance(raw, str) else tuple(_from_block(b) for b in raw)
    extra = dict(obj.get("extra") or {})
    citations = tuple(
        Citation(
            id=str(c["id"]),
            index=int(c.get("index", n + 1)),
            title=c.get("title"),
            url=c.get("url"),
            snippet=c.get("snippet"),
            source_type=c.get("sourceType"),
        )
        for n, c in enumerate(obj.get("citations") or ())
    )
    return Message(
        id=str(obj["id"]),
        key=str(obj["id"]),
        role=obj["role"],
        content=content,
        delivery=delivery,
        name=obj.get("name"),
        tool_call_id=obj.get("toolCallId"),
        tool_call_ids=tuple(obj.get("toolCallIds") or ()),
        reasoning=obj.get("reasoning"),
        reasoning_duration_ms=obj.get("reasoningDurationMs"),
        citations=citations,
        silent=bool(extra.get("silent", False)),
        depth=int(extra.get("depth", 0)),
        metadata=frozen(extra.get("metadata")),
    )
