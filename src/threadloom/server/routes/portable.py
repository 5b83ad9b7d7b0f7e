"""Threads that move (spec 21 §21.6): ``GET /api/threads/{id}/export`` answers the portable
thread file of a thread the caller may read; ``POST /api/threads/import`` stores one as
history. Thin: the file is read and written by ``records/portable.py``, the work is the
runtime's."""

from __future__ import annotations

from fastapi import Depends, Request
from fastapi.responses import JSONResponse, Response

from threadloom.records.portable import parse_export
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.deps import Query
from threadloom.server.errors import ApiError
from threadloom.server.routing import Router
from threadloom.server.settings import JSON_BODY_LIMIT
from threadloom.store.base import ThreadRow
from threadloom.wire.portable import ThreadImported

router = Router(prefix="/api/threads", tags=["threads"])


@router.get("/{id:thread_id}/export", summary="Export a thread with its child threads")
async def export_thread(request: Request, row: ThreadRow = Depends(deps.thread_row)) -> Response:
    doc = await deps.runtime(request).export_thread(row.id)
    return Response(
        doc.dump(),
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="thread-{row.id}.json"'},
    )


@router.post("/import", summary="Import a thread file as history", status_code=201)
async def import_thread(
    request: Request,
    who: Principal = Depends(deps.principal),
    q: Query = Depends(deps.query),
) -> JSONResponse:
    ids = q.enum("ids", ("keep", "new"), "keep")
    # a thread file may carry files: as large as an upload (base64 included); larger
    # files are imported with the CLI (``threadloom import``)
    limit = max(JSON_BODY_LIMIT, deps.context(request).settings.max_upload_bytes)
    body = await deps.json_object(request, limit, required="body is required")
    doc = parse_export(body)
    if not who.is_admin:
        for thread in doc.threads:
            if thread.user_id != who.owner_id:
                raise ApiError(
                    403,
                    "forbidden",
                    f"Forbidden: thread {thread.id} of the file belongs to another user",
                )
    stored = await deps.runtime(request).import_thread(doc, "new" if ids == "new" else "keep")
    answer = ThreadImported(threadId=stored.root, threadIds=[t.id for t in stored.threads])
    return JSONResponse(answer.to_wire(), status_code=201)
