"""``POST /api/agui/{agent}``: an AG-UI run of one of the project's agents (spec 13 §13.2).

The body is a ``RunAgentInput``. Its ``threadId`` is the Threadloom thread: created on first
use, for the agent and the caller, with that id (a UUID); afterwards the caller must be
allowed to see it (spec 10 §10.6) and it must be that agent's. Of ``messages``, those the
thread already has — by id, or by the AG-UI id a previous request stored them under
(``metadata.client_message_id``) — are not stored again; the others are sent, in order, as
any send (spec 04 §4.7.2): they join a running execution or start one. The answer is the
run's AG-UI events as ``text/event-stream`` (``run.py``).

A request carrying a cursor — the ``Last-Event-ID`` header, or ``forwardedProps.threadloom
.lastEventId`` — resumes the stream of that run from the cursor: nothing is stored or run
again. Credentials, errors and the per-principal stream limit are the API's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from pydantic import ValidationError

from threadloom.engine.run.client_tools import ClientAnswer, ClientTool
from threadloom.engine.run.runtime import Runtime
from threadloom.errors import AgentNotFound, DuplicateMessage, InvalidField
from threadloom.records import ContextEntry, SharedState
from threadloom.server import deps
from threadloom.server.agui.approvals import Resume, decide, pending, read_resume
from threadloom.server.agui.cursor import Cursor, CursorError, run_key
from threadloom.server.agui.parts import content_of, fit
from threadloom.server.agui.run import (
    ID_KEY,
    RUN_KEY,
    SNAPSHOT_LIMIT,
    AguiRun,
    agui_id,
    cost_now,
)
from threadloom.server.agui.state import apply, request_context, request_state
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import ApiError, bad_field, invalid
from threadloom.server.routes.approvals import decider
from threadloom.server.stream.auth import authenticate_stream
from threadloom.server.stream.frames import Filters
from threadloom.server.stream.session import Grant
from threadloom.server.stream.stream import CountedStream, check_open_limit, hold_slot, redact_query
from threadloom.server.uploads import Upload
from threadloom.store.base import ThreadRow
from threadloom.thread.files import file_limits
from threadloom.wire.agui import ID_LIMIT, RunAgentInput
from threadloom.wire.problems import REFUSED, problems_of

ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
"""AG-UI roles a request may add to a thread, as the queue's roles (tool results,
reasoning and activity messages are not stored)."""
IDS_PER_READ = 200
RECENT_EXTRA = 20


def field_path(body: Any, loc: Sequence[Any]) -> str:
    """A validation error's location as the API names fields (``messages[0].content``,
    spec 08 §8.1.3): the parts of ``loc`` that are keys or indexes of ``body`` (pydantic
    adds the names of union members, which are not)."""
    out, value = "", body
    for part in loc:
        if isinstance(part, int) and isinstance(value, list) and 0 <= part < len(value):
            out, value = f"{out}[{part}]", value[part]
        elif isinstance(part, str) and isinstance(value, dict) and part in value:
            out, value = (f"{out}.{part}" if out else part), value[part]
    return out or "body"


def parse_input(body: dict[str, Any]) -> RunAgentInput:
    """The body as ``wire.agui.RunAgentInput``; a 400 naming every bad field in AG-UI's
    words, or the first refusal of Threadloom's rules of the ids in the spec's."""
    try:
        return RunAgentInput.model_validate(body)
    except ValidationError as exc:
        if all(err["type"] == REFUSED for err in exc.errors()):
            first = problems_of(exc)[0]
            raise invalid(first.message, [(first.field, first.problem)]) from None
        found: dict[str, str] = {}
        for err in exc.errors():
            loc = err["loc"]
            if err["type"] == "missing" and loc and isinstance(loc[-1], str):
                parent = field_path(body, loc[:-1])
                where = loc[-1] if parent == "body" else f"{parent}.{loc[-1]}"
            else:
                where = field_path(body, loc)
            found.setdefault(where, err["msg"])
        details = list(found.items())[:20]
        field, problem = details[0]
        raise invalid(f"Invalid RunAgentInput: {field}: {problem}", details) from None


def last_event_id(request: Request, run_input: RunAgentInput) -> str | None:
    """The cursor to resume from: ``Last-Event-ID``, else ``forwardedProps.threadloom
    .lastEventId``."""
    header = request.headers.get("last-event-id", "").strip()
    if header:
        return header
    props = run_input.forwarded_props
    ours = props.get("threadloom") if isinstance(props, dict) else None
    value = ours.get("lastEventId") if isinstance(ours, dict) else None
    if value is not None and not isinstance(value, str):
        raise bad_field("forwardedProps.threadloom.lastEventId", "must be a string")
    return value or None


def checked_row(row: ThreadRow, who: Principal, agent: str | None) -> ThreadRow:
    """``row`` when ``who`` may use it for ``agent`` (403, 409 otherwise)."""
    if not who.may_access(row.user_id):
        raise ApiError(403, "forbidden", "Forbidden: You don't have access to this thread")
    if agent is not None and row.agent_id != agent:
        raise ApiError(409, "conflict", f"Thread {row.id} is a thread of agent {row.agent_id!r}")
    return row


def client_id(message_id: str) -> str:
    """The ``client_message_id`` a message is stored under (its AG-UI id, or a digest of
    an id longer than the field holds)."""
    if len(message_id) <= ID_LIMIT:
        return message_id
    return "sha256:" + hashlib.sha256(message_id.encode()).hexdigest()


@dataclass(frozen=True)
class NewMessage:
    """A message of the request the thread does not have: what is sent for it (its
    media parts as uploads, written as attachments with it)."""

    agui_id: str
    role: str
    text: str
    uploads: list[Upload] = field(default_factory=list)
    source: Any = None
    """The AG-UI message of a ``tool`` result (its ``toolCallId`` and ``error``)."""


async def unseen(
    runtime: Runtime, row: ThreadRow | None, messages: Sequence[Any]
) -> list[NewMessage]:
    """The request's messages the thread does not have yet, in order, checked (a 400 for
    one without text). A message is known by its id, or by the AG-UI id it was stored
    under: read with the thread's newest messages, older ones by id; the send's own check
    of ``client_message_id`` has the last word. Tool results, reasoning and activity
    messages are never stored."""
    known: set[str] = set()
    if row is not None:
        state = await runtime.thread(row.id)
        window = min(len(messages) + RECENT_EXTRA, SNAPSHOT_LIMIT)
        recent = await state.get_messages(limit=window, include_silent=True)
        known.update(m.id for m in recent.messages)
        known.update(i for m in recent.messages if (i := agui_id(m)) is not None)
        ids = [m.id for m in messages if m.id not in known]
        for start in range(0, len(ids), IDS_PER_READ):
            chunk = ids[start : start + IDS_PER_READ]
            page = await state.get_messages(
                ids=chunk, limit=len(chunk), include_silent=True, max_depth=None
            )
            known.update(m.id for m in page.messages)
    new: list[NewMessage] = []
    limits = file_limits(runtime.hub)
    for index, message in enumerate(messages):
        role = ROLES.get(message.role)
        if message.id in known:
            continue
        if message.role == "tool":  # the client's result of a call (spec 13 §13.7)
            at = f"messages[{index}].content"
            text = content_of(message.content, at, limits).text
            new.append(NewMessage(message.id, "tool", text, source=message))
            continue
        if role is None:
            continue
        at = f"messages[{index}].content"
        content = content_of(getattr(message, "content", None), at, limits)
        if not content.text.strip() and not content.uploads:
            if role == "assistant" and getattr(message, "tool_calls", None):
                continue  # calls the runtime did not issue are not stored (§13.7.6)
            raise bad_field(at, "must hold text or a media part (a new message)")
        new.append(NewMessage(message.id, role, content.text, content.uploads))
    uploads = [u for m in new for u in m.uploads]
    if uploads and limits.max_thread_file_bytes is not None:
        used = 0
        if row is not None:
            used = (await (await runtime.thread(row.id)).get_file_stats("/")).total_size
        fit(uploads, used, limits)
    return new


def client_tools(runtime: Runtime, agent: str, run_input: RunAgentInput) -> list[ClientTool]:
    """The request's frontend tools (spec 13 §13.7), checked: a 400 naming
    ``tools[i].name`` or ``tools[i].parameters``."""
    tools = [
        ClientTool(
            t.name,
            t.description,
            {"type": "object", "properties": {}} if t.parameters is None else t.parameters,
        )
        for t in run_input.tools or ()
    ]
    try:
        return runtime.check_client_tools(agent, tools)
    except InvalidField as exc:
        raise bad_field(exc.field, exc.problem) from None


def answers(run_id: str, new: Sequence[NewMessage]) -> list[ClientAnswer]:
    """The request's ``tool`` messages as the client's answers to calls (each stored with
    its AG-UI ids, as a sent message is)."""
    out = []
    for message in new:
        if message.role != "tool" or message.source is None:
            continue
        metadata = {
            "client_message_id": client_id(message.agui_id),
            RUN_KEY: run_id,
            ID_KEY: message.agui_id,
        }
        error = getattr(message.source, "error", None)
        out.append(ClientAnswer(message.source.tool_call_id, message.text, error, metadata))
    return out


async def store(
    runtime: Runtime,
    thread_id: str,
    run_id: str,
    new: Sequence[NewMessage],
    trace_headers: Mapping[str, str] | None = None,
    tools: Sequence[ClientTool] = (),
) -> int:
    """Send ``new`` in order, as any send (with the request's trace context, spec 13
    §13.6.7); how many were stored."""
    sent = 0
    for message in new:
        if message.role == "tool":
            continue  # answers to calls: ``answers``
        metadata = {
            "client_message_id": client_id(message.agui_id),
            RUN_KEY: run_id,
            ID_KEY: message.agui_id,
        }
        try:
            if message.uploads:
                await runtime.send_with_uploads(
                    await runtime.thread(thread_id),
                    message.text,
                    message.uploads,
                    role=message.role,
                    metadata=metadata,
                    trace_headers=trace_headers,
                    client_tools=tools,
                )
            else:
                await runtime.send_message(
                    thread_id,
                    message.text,
                    role=message.role,
                    metadata=metadata,
                    trace_headers=trace_headers,
                    client_tools=tools,
                )
        except DuplicateMessage:
            continue  # stored meanwhile by a concurrent request
        sent += 1
    return sent


async def create_once(runtime: Runtime, who: Principal, agent: str, thread_id: str) -> ThreadRow:
    """The thread, created for ``agent`` and ``who`` (or by a concurrent first request)."""
    try:
        await runtime.create_thread(agent, user_id=who.owner_id, thread_id=thread_id)
    except Exception:
        if await runtime.store.get_thread(thread_id) is None:
            raise
    row = await runtime.store.get_thread(thread_id)
    assert row is not None
    return checked_row(row, who, agent)


async def run_agent(agent: str, request: Request) -> Any:
    """The route (declared by ``threadloom.server.agui``). Everything that can refuse the
    request is checked before anything is written."""
    try:
        auth = await authenticate_stream(request)
    finally:
        redact_query(request)
    who = auth.principal
    ctx = deps.context(request)
    runtime = ctx.runtime
    if runtime.definitions.agent(agent) is None:
        raise AgentNotFound(agent)
    body = await deps.json_object(request, ctx.settings.max_upload_bytes, required="Body required")
    run_input = parse_input(body)
    tools = client_tools(runtime, agent, run_input)
    thread_id = run_input.thread_id
    resume = last_event_id(request, run_input)
    await runtime.hub.commit_deferred(thread_id)
    row = await runtime.store.get_thread(thread_id)
    if row is not None:
        checked_row(row, who, agent)
    cursor: Cursor | None = None
    new: list[NewMessage] = []
    state: dict[str, Any] | None = None
    context: list[ContextEntry] = []
    resume_entries = Resume()
    if resume is not None:
        try:
            cursor = Cursor.decode(resume)
        except CursorError as exc:
            raise bad_field("Last-Event-ID", f"is not a cursor of this server ({exc})") from None
        if cursor.run != run_key(thread_id, run_input.run_id):
            raise bad_field("Last-Event-ID", "is the cursor of another run (threadId and runId)")
        if row is None:
            raise ApiError(404, "thread_not_found", f"Thread not found: {thread_id}")
        ctx.agui_drops.resumed(cursor.run)  # the client goes on with it (§13.2.8)
    else:  # a resume stores nothing: its state and context are not read (§13.3.2)
        state = request_state(run_input.state)
        context = request_context(run_input.context)
        resume_entries = await read_resume(
            runtime, row.id if row is not None else None, run_input.resume or ()
        )
        new = await unseen(runtime, row, run_input.messages)
    app = request.app
    check_open_limit(app, who)
    release = hold_slot(app, who)  # counted with the check, before any await (§9.2.4)
    shared: SharedState | None = None
    try:
        follow = True
        if cursor is None:
            if (new or resume_entries.decisions) and await ctx.agui_drops.claim(thread_id):
                row = await runtime.store.get_thread(thread_id)  # the client left a dropped
                # run for this one: it was stopped first (§13.2.8)
            if row is None:
                row = await create_once(runtime, who, agent, thread_id)
            total, requests, _ = await cost_now(runtime, thread_id)
            key = run_key(thread_id, run_input.run_id)
            cursor = Cursor(row.event_seq, key, cost=total, requests=requests)
            await apply(runtime, row, state, context)
            # read before the run starts: the response opens without a read (§13.2.9)
            shared = await runtime.store.get_shared_state(thread_id)
            answered = answers(run_input.run_id, new)
            started = False
            if answered:  # the client's results first: the calls precede any new message
                _, started = await runtime.answer_client_calls(thread_id, answered, tools)
            decided = await decide(runtime, thread_id, resume_entries, decider(who))
            sent = await store(runtime, thread_id, run_input.run_id, new, request.headers, tools)
            running = runtime.running(thread_id) or row.status.state == "running"
            follow = started or decided > 0 or sent > 0 or running
            if follow and (decided or row.status.reason == "awaiting_approval"):
                # still parked: the run ends at once, with the interrupts still open
                follow = not await pending(runtime, thread_id)
        if shared is None:  # a resume: the state now (§13.3.2)
            shared = await runtime.store.get_shared_state(thread_id)
    except BaseException:
        release()
        raise
    grant = Grant(who, auth, thread_id, Filters(reasoning=True), cursor.seq)
    warnings = [
        f"resume entry {i!r} answers no interrupt of this thread"
        for i in resume_entries.unrecognised
    ]
    protocol = run_input.protocol_version
    run = AguiRun(ctx, grant, run_input.run_id, cursor, follow, warnings, protocol, shared)
    return CountedStream(
        run.body(),
        release,
        ctx.settings.stream.write_timeout_s,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
