"""The JSON text of a request's provider messages in a log's request body (spec 04
§4.25): one fragment per message, images omitted, written directly for the common shapes
and byte-identical to ``json_compact(message.model_dump(mode="json"))`` for every shape
(``tests/engine/test_fragments.py``).
"""

from __future__ import annotations

from json.encoder import encode_basestring
from typing import Any

from threadloom.providers.types import (
    AssistantMessage,
    SystemMessage,
    ToolCallSpec,
    ToolMessage,
    UserMessage,
)
from threadloom.records import json_compact

json_string = encode_basestring
"""A str as JSON text, as ``json_compact`` writes it (non-ASCII kept)."""


def fragment(message: Any) -> str:
    """The JSON text of one provider message in a log's request body (images omitted):
    ``json_compact(message.model_dump(mode="json"))``, written directly for the common
    shapes (text content, calls without round-trip data, no images; byte-identical,
    ``tests/engine/test_fragments.py``) and by that generic path for the rest."""
    kind = type(message)
    if kind is UserMessage or kind is SystemMessage:
        role, content = message.role, message.content
        if type(content) is str and (role == "user" or role == "system"):
            return f'{{"role":"{role}","content":{json_string(content)}}}'
    elif kind is AssistantMessage:
        text = _assistant_fragment(message)
        if text is not None:
            return text
    elif kind is ToolMessage and not message.images and message.role == "tool":
        call_id, name, content = message.tool_call_id, message.name, message.content
        error = "true" if message.is_error is True else "false" if message.is_error is False else ""
        if type(call_id) is str and type(name) is str and type(content) is str and error:
            return (
                f'{{"role":"tool","tool_call_id":{json_string(call_id)},"name":{json_string(name)},'
                f'"content":{json_string(content)},"is_error":{error},"images":[]}}'
            )
    return _generic_fragment(message)


def _assistant_fragment(message: AssistantMessage) -> str | None:
    content, reasoning = message.content, message.reasoning_content
    if (
        message.reasoning_details is not None
        or message.role != "assistant"
        or (content is not None and type(content) is not str)
        or (reasoning is not None and type(reasoning) is not str)
    ):
        return None
    calls = calls_json(message.tool_calls)
    if calls is None:
        return None
    return (
        f'{{"role":"assistant","content":{json_string(content) if content is not None else "null"},'
        f'"tool_calls":{calls},'
        f'"reasoning_content":{json_string(reasoning) if reasoning is not None else "null"},'
        '"reasoning_details":null}'
    )


def _generic_fragment(message: Any) -> str:
    data = message.model_dump(mode="json")
    content = data.get("content")
    if isinstance(content, list):
        for part in content:
            if part.get("type") == "image":
                part["data"] = "[base64 omitted]"
    for image in data.get("images") or []:
        image["data"] = "[base64 omitted]"
    return json_compact(data)


def calls_json(calls: list[ToolCallSpec]) -> str | None:
    """The JSON array of ``calls`` (``None`` when one carries round-trip data)."""
    parts: list[str] = []
    for call in calls:
        call_id, name, arguments = call.id, call.name, call.arguments
        if (
            call.extra_content is not None
            or type(call) is not ToolCallSpec
            or type(call_id) is not str
            or type(name) is not str
            or type(arguments) is not str
        ):
            return None
        parts.append(
            f'{{"id":{json_string(call_id)},"name":{json_string(name)},'
            f'"arguments":{json_string(arguments)},"extra_content":null}}'
        )
    return f"[{','.join(parts)}]"
