"""The streams over HTTP (spec 09): a thread's Server-Sent Events and the thread-list
events (WebSocket only; the GET describes the upgrade's query). The frames themselves are
spec 09's and ``server/stream/frames.py``'s."""

from __future__ import annotations

from typing import Any

from threadloom.wire.model import Answer
from threadloom.wire.query import boolean, choice, integer, text

STREAM_QUERY = (
    integer("since", "Resume after this seq (spec 09 §9.7)"),
    boolean("logs", "Also log frames (needs the 'logs' permission)"),
    boolean("includeSilent", "Also silent messages"),
    integer("depth", "Deepest sub-prompt level"),
    boolean("reasoning", "Also reasoning chunks"),
    text("ticket", "A WebSocket ticket (POST /api/auth/websocket-ticket)"),
    text("token", "A credential, for clients that cannot send headers"),
)
EVENTS_QUERY = (
    choice("scope", ("user", "all"), "all: every user's threads (admins)"),
    text("ticket", "A WebSocket ticket"),
    text("token", "A credential, for clients that cannot send headers"),
)


class ServerSentEvent(Answer):
    """One event of a ``text/event-stream`` answer (the stream of spec 09 §9.13, AG-UI's
    events): ``data`` is a JSON text."""

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None


EVENT_STREAM: dict[str, Any] = {"text/event-stream": ServerSentEvent}
"""Server-Sent Events; the schema is each event's (OpenAPI 3.1 has no ``itemSchema``)."""
