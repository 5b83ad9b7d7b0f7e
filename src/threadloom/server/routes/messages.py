"""Message routes (spec 08 §8.4): read [seed], send, edit, delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from threadloom.engine.run.runtime import Runtime
from threadloom.errors import DuplicateMessage, MessageNotFound, ThreadBusy, ThreadTerminated
from threadloom.server import deps, json_body
from threadloom.server.deps import Query
from threadloom.server.errors import ApiError, Problems, bad_field
from threadloom.server.routes.threads import check_metadata, refuse_orphaned
from threadloom.server.uploads import (
    check_uploads_fit,
    parse_uploads,
    remove_uploads,
    store_uploads,
)
from threadloom.store.base import ThreadRow
from threadloom.thread.messages import delete_with_cascade

router = APIRouter(prefix="/api/threads/{id}/messages", tags=["messages"])

MAX_IDS = 200
MESSAGE_NOT_FOUND = ApiError(404, "message_not_found", "Message not found")


@router.get("", summary="Read messages (queued entries appear as pending)")
async def get_messages(id: str, request: Request) -> Response:
    # The checks of spec 08 §8.1.4 called in their order rather than declared as three
    # dependencies: FastAPI solves declared ones anew on every request (issue 23 item 9).
    who = await deps.principal(request)
    row = await deps.accessible_thread(request, id, who)
    q = Query(request)
    limit = q.int("limit", 100, cap=1000)
    offset = q.int("offset", 0) or 0
    order = q.enum("order", ("asc", "desc"), "desc") or "desc"
    depth = q.int("depth", 0)
    include_silent = bool(q.bool("includeSilent", False))
    include_workblocks = bool(q.bool("includeWorkblocks", False))
    ids = q.items("ids")
    if len(ids) > MAX_IDS:
        raise bad_field("ids", "has more than 200 ids", "Too many message IDs requested")
    pages = deps.context(request).pages
    key = None
    if not ids and pages.budget:  # unchanged since a read kept it: the same bytes
        key = (
            id,
            row.created_at_us,
            limit,
            offset,
            order,
            depth,
            include_silent,
            include_workblocks,
        )
        kept = pages.get(key, row.event_seq)
        if kept is not None:
            return json_body.JSONBody(kept)
    state = deps.state_of(request, row)
    page = await state.get_messages(
        limit=limit,
        offset=offset,
        order="asc" if order == "asc" else "desc",
        include_silent=include_silent,
        max_depth=depth,
        ids=ids or None,
        include_workblocks=include_workblocks,
    )
    messages = page.messages
    if order == "desc" and not ids:
        messages = messages[::-1]  # the wire page is chronological in both orders [seed]
    # seq: the stream head read just before the page; a resume may repeat, never miss
    body = json_body.messages_page(messages, page.total, page.has_more, row.event_seq)
    if key is not None:
        pages.put(key, row.event_seq, body, messages)
    return json_body.JSONBody(body)


def overlap_policy(runtime: Runtime, row: ThreadRow) -> str:
    """The thread's overlap policy, else its agent's (spec 04 §4.7.4), as the Runtime reads
    it for a send while the thread runs."""
    agent = runtime.definitions.agent(row.agent_id)
    return row.overlap or (agent.overlap if agent else "enqueue")


@router.post("", status_code=202, summary="Send a message")
async def send_message(request: Request, row: ThreadRow = Depends(deps.thread_row)) -> Any:
    ctx = deps.context(request)
    body = await deps.json_object(request, ctx.settings.max_upload_bytes)
    problems = Problems()
    content = body.get("content", "")
    if content is None:
        content = ""
    if not isinstance(content, str):
        problems.add("content", "must be a string or null")
        content = ""
    role = body.get("role", "user")
    if role not in ("user", "assistant", "system"):
        problems.add(
            "role",
            "must be one of user, assistant, system",
            "role must be one of user, assistant, system",
        )
    silent = body.get("silent", False)
    if not isinstance(silent, bool):
        problems.add("silent", "must be a boolean")
    metadata = check_metadata(body.get("metadata"), "metadata", problems)
    uploads = parse_uploads(body.get("attachments"), "attachments", problems)
    if not problems and not content.strip() and not uploads:
        problems.add(
            "content",
            "must not be blank without attachments",
            "Message content or attachments required",
        )
    problems.raise_if_any()
    if row.terminated is not None:
        raise ThreadTerminated(row.id, row.terminated)  # 423, nothing stored
    runtime = ctx.runtime
    refuse_orphaned(runtime.definitions, row)  # 409: no run could deliver it here
    state = deps.state_of(request, row)
    if uploads:  # every refusal known before the first write (spec 08 §8.4.2 step 1)
        await check_uploads_fit(runtime.hub, [("attachments", uploads)], state)
        if runtime.running(row.id) and overlap_policy(runtime, row) == "reject":
            raise ThreadBusy("Thread is running (overlap policy: reject)", row.id)
    refs = await store_uploads(state, uploads)
    try:
        view = await runtime.send_message(
            row.id,
            content,
            role=role,
            attachments=refs or None,
            silent=silent is True,
            metadata=metadata,
            trace_headers=request.headers,  # a traceparent parents the run (spec 13 §13.6.7)
        )
    except DuplicateMessage as dup:
        await remove_uploads(state, refs)
        return JSONResponse(
            {
                "status": "duplicate",
                "queueId": dup.message_id if dup.queued else None,
                "messageId": dup.message_id,
                "message": "Duplicate of an earlier send; nothing was stored.",
            },
            status_code=200,
        )
    except BaseException:
        await remove_uploads(state, refs)
        raise
    return {
        "status": "queued",
        "queueId": view.id,
        "messageId": view.id,
        "message": "Message queued for processing. Connect via WebSocket for real-time updates.",
    }


@router.patch(
    "/{message_id}",
    summary="Edit a stored message or a waiting queue entry",
)
async def patch_message(
    message_id: str, request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    body = await deps.json_object(request)
    problems = Problems()
    updates: dict[str, Any] = {}
    if "content" in body:
        if not isinstance(body["content"], str):
            problems.add("content", "must be a string", "content must be a string")
        else:
            updates["content"] = body["content"]
    if "silent" in body:
        if not isinstance(body["silent"], bool):
            problems.add("silent", "must be a boolean")
        else:
            updates["silent"] = body["silent"]
    patch_meta: dict[str, Any] | None = None
    if "metadata" in body:
        patch_meta = check_metadata(body["metadata"], "metadata", problems)
        if patch_meta is None and not problems:
            problems.add("metadata", "must be an object")
    problems.raise_if_any()
    if not updates and patch_meta is None:
        raise bad_field("body", "has no field to update", "No valid fields to update")
    state = deps.state_of(request, row)
    if patch_meta is not None:
        updates["metadata"] = patch_meta  # merged one level deep by update_message
    if not deps.storable(message_id):
        raise MESSAGE_NOT_FOUND
    try:
        updated = await state.update_message(message_id, updates)
    except MessageNotFound:
        raise MESSAGE_NOT_FOUND from None
    return {"success": True, "message": updated.to_wire()}


@router.delete("/{message_id}", summary="Delete a message with its cascade")
async def delete_message(
    message_id: str, request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    if not deps.storable(message_id):
        raise MESSAGE_NOT_FOUND
    state = deps.state_of(request, row)
    deleted = await delete_with_cascade(state, message_id)
    if not deleted:
        raise MESSAGE_NOT_FOUND
    return {"success": True, "deletedIds": deleted}
