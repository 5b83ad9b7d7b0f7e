"""Execution control (spec 08 §8.5): continue, stop, terminate."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from threadloom.errors import ThreadBusy, ThreadTerminated
from threadloom.server import deps
from threadloom.server.errors import ApiError
from threadloom.server.routes.threads import refuse_orphaned
from threadloom.server.routing import Router
from threadloom.store.base import ThreadRow
from threadloom.wire.control import Cascade, ContinueThread, Stopped, Terminated

router = Router(prefix="/api/threads/{id}", tags=["execution"])


SIDE_ROLE = {"a": "assistant", "b": "user"}
"""The stored role of what each side writes (spec 04 §4.8.1)."""


async def continue_plan(request: Request, row: ThreadRow, side: str) -> dict[str, Any]:
    """What a continue on ``side`` starts, read just before it starts (spec 08 §8.5.1):
    the queue entries its first step delivers, the message it continues after (the last
    stored, non-silent, top-level one) and whether that message is the acting side's own
    completed answer, so that the run makes the side answer again."""
    queue = await deps.runtime(request).store.list_queue(row.id)
    waiting = sum(1 for entry in queue if not entry.silent)  # the read below skips them
    state = deps.state_of(request, row)
    page = await state.get_messages(limit=1, offset=waiting, order="desc")
    last = next((m for m in page.messages if not (m.metadata or {}).get("queued")), None)
    again = (
        not queue
        and last is not None
        and last.role == SIDE_ROLE[side]
        and last.status == "completed"
        and not last.tool_calls
    )
    after = None if last is None else {"id": last.id, "role": last.role, "status": last.status}
    return {"side": side, "queued": len(queue), "after": after, "again": again}


@router.post(
    "/continue",
    status_code=202,
    summary="Run a turn without a new message",
)
async def continue_thread(
    request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> JSONResponse:
    body = await deps.body_of(request, ContinueThread)
    side = body.side or "a"
    runtime = deps.runtime(request)
    if row.terminated is not None:
        raise ThreadTerminated(row.id, row.terminated)  # 423 (errors.from_threadloom)
    refuse_orphaned(runtime.definitions, row)  # 409: no run of it can start here
    busy = ApiError(409, "thread_running", "Thread is already running")
    if runtime.running(row.id):
        raise busy
    run = await continue_plan(request, row, side)
    if body.ifUnanswered and run["again"]:
        raise ApiError(
            409,
            "nothing_to_continue",
            f"Nothing to continue: side {side} has already answered the last message",
            extra={"run": run},
        )
    try:
        await runtime.continue_thread(row.id, side, trace_headers=request.headers)
    except ThreadBusy:  # a run started between the check and the call
        raise busy from None
    return JSONResponse(
        {
            "status": "queued",
            "queueId": str(uuid.uuid4()),
            "message": "Continuing execution. Connect via WebSocket for real-time updates.",
            "run": run,
        },
        status_code=202,
    )


@router.post("/stop", summary="Stop the running execution")
async def stop_thread(
    request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    cascade = (await deps.body_of(request, Cascade)).cascade
    runtime = deps.runtime(request)
    was_running = runtime.running(row.id) or row.status.state == "running"
    await runtime.stop(row.id, cascade=cascade)
    # a run of another node is settled by its owner (spec 12 §12.5 rule 3): whether the
    # status left ``running`` within the wait
    after = await runtime.store.get_thread(row.id) if was_running else None
    return Stopped(
        status="stopped",
        message="Thread execution stopped",
        wasRunning=was_running,
        settled=after is None or after.status.state != "running",
    ).model_dump(by_alias=True)


@router.post("/terminate", summary="Terminate the thread")
async def terminate_thread(
    request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    cascade = (await deps.body_of(request, Cascade)).cascade
    runtime = deps.runtime(request)
    already = row.terminated is not None
    at = await runtime.terminate(row.id, cascade=cascade)
    return Terminated(
        success=True, threadId=row.id, terminated=at, alreadyTerminated=already
    ).model_dump(by_alias=True)
