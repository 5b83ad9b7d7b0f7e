"""Schedules over HTTP (spec 18 §18.7): list, create, read, change, delete and fire one now,
under ``/api/schedules``, for admins (a schedule creates threads for any owner)."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from threadloom import errors as E
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import ApiError, bad_field
from threadloom.server.routing import Router
from threadloom.wire.auth import Success
from threadloom.wire.schedules import (
    CreateSchedule,
    FireAnswer,
    FireOut,
    PatchSchedule,
    ScheduleAnswer,
    ScheduleList,
    schedule_out,
)

router = Router(prefix="/api/schedules", tags=["schedules"])


def _known(schedule_id: str) -> str:
    """A path id that can name a stored schedule, else 404 (``%00`` and the like)."""
    if not deps.storable(schedule_id):
        raise ApiError(404, "schedule_not_found", f"Schedule not found: {schedule_id}")
    return schedule_id


@router.get("", summary="Every schedule (admin)")
async def list_schedules(request: Request, who: Principal = Depends(deps.admin)) -> dict[str, Any]:
    rows = await deps.runtime(request).schedules.list()
    return ScheduleList(schedules=[schedule_out(r) for r in rows]).to_wire()


@router.post("", summary="Create a schedule (admin)")
async def create_schedule(request: Request, who: Principal = Depends(deps.admin)) -> JSONResponse:
    body = await deps.body_of(request, CreateSchedule)
    row = await deps.runtime(request).schedules.create(body.schedule())
    return JSONResponse(ScheduleAnswer(schedule=schedule_out(row)).to_wire(), status_code=201)


@router.get("/{schedule_id}", summary="A schedule with its firing state (admin)")
async def get_schedule(
    schedule_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    row = await deps.runtime(request).schedules.get(_known(schedule_id))
    return ScheduleAnswer(schedule=schedule_out(row)).to_wire()


@router.patch("/{schedule_id}", summary="Change a schedule (admin)")
async def patch_schedule(
    schedule_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    body = await deps.body_of(request, PatchSchedule)
    try:
        row = await deps.runtime(request).schedules.update(_known(schedule_id), body.changes())
    except E.InvalidField as exc:
        raise bad_field(exc.field, exc.problem) from None
    return ScheduleAnswer(schedule=schedule_out(row)).to_wire()


@router.delete("/{schedule_id}", summary="Delete a schedule (admin)")
async def delete_schedule(
    schedule_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    await deps.runtime(request).schedules.delete(_known(schedule_id))
    return Success(success=True).to_wire()


@router.post("/{schedule_id}/fire", summary="Fire a schedule once now (admin)")
async def fire_schedule(
    schedule_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    fire = await deps.runtime(request).schedules.fire_now(_known(schedule_id))
    return FireAnswer(
        fire=FireOut(
            schedule_id=fire.schedule_id,
            due_at=fire.due_us,
            status=fire.status,
            thread_id=fire.thread_id,
            error=fire.error,
        )
    ).to_wire()
