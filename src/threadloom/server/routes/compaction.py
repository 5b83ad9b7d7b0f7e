"""A thread's compactions (spec 23 §23.6): compact now, list, undo.

Who may: whoever may act on the thread (``deps.thread_row``: 404/403 for anyone else). A
compaction asks the model for a summary: a provider failure is a 502 and writes nothing.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from threadloom.errors import ProviderError
from threadloom.server import deps
from threadloom.server.errors import ApiError
from threadloom.server.routing import Router
from threadloom.store.base import ThreadRow
from threadloom.wire.compaction import CompactionItem, CompactionList, CompactThread

router = Router(prefix="/api/threads/{id}", tags=["compaction"])


@router.post("/compact", summary="Compact the thread's history now", status_code=201)
async def compact_thread(
    request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> JSONResponse:
    body = await deps.body_of(request, CompactThread)
    state = deps.state_of(request, row)
    try:
        record = await state.compact(keep_messages=body.keep_messages)
    except ProviderError as exc:
        raise ApiError(502, "compaction_failed", f"The model could not summarise: {exc}") from None
    return JSONResponse(CompactionItem.of(record).to_wire(), status_code=201)


@router.get("/compactions", summary="The thread's compactions")
async def list_compactions(
    request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    found = await deps.runtime(request).store.list_compactions(row.id)
    active = [c.id for c in found if c.undone_at is None]
    return CompactionList(
        compactions=[CompactionItem.of(c) for c in found], active=active[-1] if active else None
    ).to_wire()


@router.delete("/compactions/{compaction_id}", summary="Undo a compaction")
async def undo_compaction(
    compaction_id: str, request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    undone = await deps.state_of(request, row).undo_compaction(compaction_id)
    return CompactionItem.of(undone).to_wire()
