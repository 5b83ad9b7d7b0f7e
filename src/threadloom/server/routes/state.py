"""A thread's shared state (spec 02 §2.20, spec 08 §8.3.7): read it, replace it.

Who may: whoever may act on the thread (``deps.thread_row``: 404/403 for anyone else). A
replacement is ``ThreadState.set_shared_state``: one transaction with its ``shared_state``
event, last write wins unless the body names the version it read.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from threadloom.server import deps
from threadloom.server.routing import Router
from threadloom.store.base import ThreadRow
from threadloom.wire.state import PutState, StateAnswer

router = Router(prefix="/api/threads/{id}/state", tags=["threads"])


@router.get("", summary="The thread's shared state")
async def get_state(request: Request, row: ThreadRow = Depends(deps.thread_row)) -> dict[str, Any]:
    state = await deps.runtime(request).store.get_shared_state(row.id)
    return StateAnswer.of(state).to_wire()


@router.put("", summary="Replace the thread's shared state")
async def put_state(request: Request, row: ThreadRow = Depends(deps.thread_row)) -> dict[str, Any]:
    body = await deps.body_of(request, PutState)
    written = await deps.state_of(request, row).set_shared_state(body.state, version=body.version)
    return StateAnswer.of(written).to_wire()
