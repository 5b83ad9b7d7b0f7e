"""OpenAPI descriptions of request bodies and the error body (spec 08 §8.11.2).

Routes read their JSON bodies themselves (to give the spec's exact error texts and report
every problem at once), so the request schemas are declared here for ``/openapi.json``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ErrorDetail(BaseModel):
    field: str
    problem: str


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer (spec 08 §8.1.3)."""

    error: str
    code: str
    details: list[ErrorDetail] | None = None


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in (
        (400, "Invalid JSON or invalid request"),
        (401, "No or invalid credentials"),
        (403, "Not allowed"),
        (404, "Not found"),
        (409, "State conflict"),
        (413, "Body too large"),
        (415, "Content-Type must be application/json"),
        (423, "Thread is terminated"),
        (500, "Server fault"),
    )
}

_STR = {"type": "string"}
_OBJ = {"type": "object"}
_BOOL = {"type": "boolean"}
_UPLOAD = {
    "type": "object",
    "required": ["name", "mimeType", "data"],
    "properties": {
        "name": _STR,
        "mimeType": _STR,
        "data": {"type": "string", "description": "base64"},
        "width": {"type": "integer"},
        "height": {"type": "integer"},
        "thumbnail": _STR,
        "description": _STR,
    },
}
_OVERLAP = {"enum": ["enqueue", "reject", "interrupt", None]}


def body(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """``openapi_extra`` declaring a JSON object body."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return {
        "requestBody": {
            "required": bool(required),
            "content": {"application/json": {"schema": schema}},
        }
    }


CREATE_THREAD = body(
    {
        "agent_id": _STR,
        "user_id": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": _STR},
        "arguments": _OBJ,
        "data": _OBJ,
        "initial_messages": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["role"],
                "properties": {
                    "role": {"enum": ["system", "user", "assistant", "tool"]},
                    "content": {"type": ["string", "null"]},
                    "name": _STR,
                    "tool_calls": {"type": ["array", "string"]},
                    "tool_call_id": _STR,
                    "tool_status": {"enum": ["success", "error"]},
                    "silent": _BOOL,
                    "metadata": _OBJ,
                    "attachments": {"type": "array", "items": _UPLOAD},
                },
            },
        },
        "env": {"type": "object", "additionalProperties": _STR},
        "env_types": {"type": "object", "additionalProperties": {"enum": ["text", "secret"]}},
        "properties": _OBJ,
        "overlap": _OVERLAP,
    },
    ("agent_id",),
)
PATCH_THREAD = body(
    {
        "tags": {"type": "array", "items": _STR},
        "agent_id": _STR,
        "env": {"type": ["object", "null"], "additionalProperties": _STR},
        "env_types": _OBJ,
        "env_patch": {"type": "object", "additionalProperties": _STR},
        "env_type_patch": _OBJ,
        "env_delete": {"type": "array", "items": _STR},
        "overlap": _OVERLAP,
    }
)
SEND_MESSAGE = body(
    {
        "content": {"type": ["string", "null"]},
        "role": {"enum": ["user", "assistant", "system"]},
        "attachments": {"type": "array", "items": _UPLOAD},
        "silent": _BOOL,
        "metadata": _OBJ,
    }
)
PATCH_MESSAGE = body({"content": _STR, "metadata": _OBJ, "silent": _BOOL})
CONTINUE = body({"side": {"enum": ["a", "b", None]}})
CASCADE = body({"cascade": _BOOL})
