"""Message routes (spec 08 §8.4): read [seed], send, edit, delete."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse, Response

from threadloom.errors import DuplicateMessage, MessageNotFound, ThreadTerminated
from threadloom.server import deps, json_body
from threadloom.server.deps import Query
from threadloom.server.errors import ApiError, bad_field
from threadloom.server.routes.threads import refuse_orphaned
from threadloom.server.routing import Router
from threadloom.server.uploads import check_uploads_fit, uploads_of
from threadloom.store.base import ThreadRow
from threadloom.thread.messages import WirePage, delete_with_cascade, thread_and_wire_page
from threadloom.wire.messages import MessagesDeleted, PatchMessage, SendAccepted, SendMessage

router = Router(prefix="/api/threads/{id}/messages", tags=["messages"])

MAX_IDS = 200
MESSAGE_NOT_FOUND = ApiError(404, "message_not_found", "Message not found")


@router.get("", summary="Read messages (queued entries appear as pending)")
async def get_messages(id: str, request: Request) -> Response:
    # The checks of spec 08 §8.1.4 called in their order rather than declared as three
    # dependencies: FastAPI solves declared ones anew on every request (issue 23 item 9).
    who = await deps.principal(request)
    try:
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
    except ApiError:
        await deps.accessible_thread(request, id, who)  # a 404 or 403 comes first
        raise
    if ids:
        row = await deps.accessible_thread(request, id, who)
        page = await deps.state_of(request, row).get_messages(
            limit=limit,
            offset=offset,
            order="asc" if order == "asc" else "desc",
            include_silent=include_silent,
            max_depth=depth,
            ids=ids,
            include_workblocks=include_workblocks,
            from_replica=True,  # fresh as of now: never older than the row's seq (§17.5.4)
        )
        body = json_body.messages_page(page.messages, page.total, page.has_more, row.event_seq)
        return json_body.JSONBody(body)
    pages = deps.context(request).pages
    params = (limit, offset, order, depth, include_silent, include_workblocks)
    wired: WirePage | None = None
    if pages.budget and pages.holds_thread(id):  # maybe unchanged since a read kept it
        row = await deps.accessible_thread(request, id, who)
        kept = pages.get((id, row.created_at_us, *params), row.event_seq)
        if kept is not None:
            return json_body.JSONBody(kept)  # the same bytes
    else:  # the row and the page in one read (issue 40); seq: the row's, read with it
        if not deps.storable(id):
            deps.checked_access(id, None, who)
        found, wired = await thread_and_wire_page(
            deps.runtime(request).hub,
            id,
            limit=limit,
            offset=offset,
            order=order,
            include_silent=include_silent,
            max_depth=depth,
            wanted=lambda found: who.may_access(found.user_id),
            from_replica=True,  # fresh as of now (spec 17 §17.5.4)
        )
        row = deps.checked_access(id, found, who)
    if wired is None:  # or a message of the page names a subagent: projected records
        wired = await deps.state_of(request, row).get_wire_page(
            limit=limit,
            offset=offset,
            order="asc" if order == "asc" else "desc",
            include_silent=include_silent,
            max_depth=depth,
            from_replica=True,
        )
    wire = wired.messages
    if order == "desc":
        wire.reverse()  # the wire page is chronological in both orders [seed]
    body = json_body.wire_page(wire, wired.total, wired.has_more, row.event_seq)
    if pages.budget:
        pages.put((id, row.created_at_us, *params), row.event_seq, body, keep=not wired.projected)
    return json_body.JSONBody(body)


@router.post("", status_code=202, summary="Send a message")
async def send_message(request: Request, row: ThreadRow = Depends(deps.thread_row)) -> Any:
    ctx = deps.context(request)
    send = await deps.body_of(request, SendMessage, ctx.settings.max_upload_bytes)
    uploads = uploads_of(send.attachments)
    if row.terminated is not None:
        raise ThreadTerminated(row.id, row.terminated)  # 423, nothing stored
    runtime = ctx.runtime
    refuse_orphaned(runtime.definitions, row)  # 409: no run could deliver it here
    state = deps.state_of(request, row)
    if uploads:  # every refusal known before the first write (spec 08 §8.4.2 step 1)
        await check_uploads_fit(runtime.hub, [("attachments", uploads)], state)
    try:
        view = await runtime.send_with_uploads(
            state,
            send.content or "",
            uploads,
            role=send.role,
            silent=send.silent,
            metadata=send.metadata,
            trace_headers=request.headers,  # a traceparent parents the run (spec 13 §13.6.7)
        )
    except DuplicateMessage as dup:
        duplicate = SendAccepted(
            status="duplicate",
            queueId=dup.message_id if dup.queued else None,
            messageId=dup.message_id,
            message="Duplicate of an earlier send; nothing was stored.",
        )
        return JSONResponse(duplicate.model_dump(by_alias=True), status_code=200)
    return SendAccepted(
        status="queued",
        queueId=view.id,
        messageId=view.id,
        message="Message queued for processing. Connect via WebSocket for real-time updates.",
    ).model_dump(by_alias=True)


@router.patch(
    "/{message_id}",
    summary="Edit a stored message or a waiting queue entry",
)
async def patch_message(
    message_id: str, request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    patch = await deps.body_of(request, PatchMessage)
    updates: dict[str, Any] = {}
    if patch.content is not None:
        updates["content"] = patch.content
    if patch.silent is not None:
        updates["silent"] = patch.silent
    state = deps.state_of(request, row)
    if patch.metadata is not None:
        updates["metadata"] = patch.metadata  # merged one level deep by update_message
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
    return MessagesDeleted(success=True, deletedIds=deleted).to_wire()
