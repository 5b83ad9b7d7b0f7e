"""The tool playground over HTTP (spec 08 §8.10.7): ``POST /api/tools/{name}/call`` runs
one tool of the project with the arguments a person typed, in a scratch thread or a given
one, and answers its result with the log row that records it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from threadloom.wire.model import Answer, Body, examples

PLAYGROUND_TAG = "playground"
"""The tag of the scratch threads the playground creates (they are listed and deleted as
any thread)."""


class CallTool(Body):
    """``POST /api/tools/{name}/call``: the arguments (checked against the tool's schema
    by the tool pipeline), and where to run it: ``thread_id`` a thread that exists, or a
    new scratch thread of ``agent_id`` (default: the project's first primary agent)."""

    model_config = examples(
        {"arguments": {"order_id": "A-1"}},
        {"arguments": {}, "agent_id": "support"},
    )

    arguments: dict[str, Any] = Field(default_factory=dict)
    thread_id: Annotated[str | None, Field(min_length=1, max_length=200)] = None
    agent_id: Annotated[str | None, Field(min_length=1, max_length=200)] = None


class ToolCallAnswer(Answer):
    """What the call did: its thread (``created`` when the playground made it), the
    tool's normalised result, how long it ran, and the id of its ``app`` log row."""

    thread_id: str
    created: bool
    tool: str
    status: Literal["success", "error"]
    result: str | None
    error: str | None
    duration_ms: float
    log_id: str | None
