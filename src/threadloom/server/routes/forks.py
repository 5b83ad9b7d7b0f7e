"""Forks (spec 08 §8.3.8): ``POST /api/threads/{id}/fork`` copies a thread's history up to
one of its messages into a new thread (optionally with that message's text replaced: edit
and rerun), ``GET /api/threads/{id}/forks`` lists the threads forked from one. Thin: the
copy is ``store/fork.py``'s, through the runtime."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from threadloom.errors import InvalidField
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import bad_field
from threadloom.server.routes.threads import THREAD, origin_of
from threadloom.server.routing import Router
from threadloom.server.thread_answers import thread_answer
from threadloom.store.base import ThreadRow
from threadloom.wire.threads import ForkList, ForkThread, ThreadForked

router = Router(prefix="/api/threads", tags=["threads"])


@router.post(f"{THREAD}/fork", summary="Fork a thread at one of its messages")
async def fork_thread(
    request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    body = await deps.body_of(request, ForkThread)
    runtime = deps.runtime(request)
    try:
        fork = await runtime.fork_thread(row.id, body.message_id, body.content)
    except InvalidField as exc:
        raise bad_field(exc.field, exc.problem, str(exc)) from None
    return ThreadForked(
        threadId=fork.row.id,
        messageId=fork.message_id,
        copiedCount=fork.copied,
        thread=thread_answer(fork.row, runtime.definitions, origin_of(request)),
    ).to_wire()


@router.get(f"{THREAD}/forks", summary="The threads forked from a thread")
async def list_forks(
    request: Request,
    row: ThreadRow = Depends(deps.thread_row),
    who: Principal = Depends(deps.principal),
) -> dict[str, Any]:
    runtime = deps.runtime(request)
    rows = await runtime.list_forks(row.id)
    origin = origin_of(request)
    return ForkList(
        forks=[
            thread_answer(r, runtime.definitions, origin) for r in rows if who.may_access(r.user_id)
        ]
    ).to_wire()
