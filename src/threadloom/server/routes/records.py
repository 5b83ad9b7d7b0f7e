"""Logs, cost and the subagent registry of a thread (spec 08 §8.6, §8.7, §8.9)."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request

from threadloom.records import LogRow
from threadloom.server import deps
from threadloom.server.deps import Query
from threadloom.server.errors import ApiError, bad_field
from threadloom.server.routing import Router
from threadloom.store.base import ThreadRow
from threadloom.thread.event_data import registry_wire

router = Router(prefix="/api/threads/{id}", tags=["logs and cost"])

MAX_IDS = 200
HEAVY_KEYS = (
    "request_body",
    "response_body",
    "tools_schema",
    "system_prompt",
    "tool_results",
    "reasoning_content",
    "source_message_content",
)
DETAIL_KEYS = (
    "endpoint",
    "request_headers",
    "response_headers",
    "status_code",
    "reasoning_tokens",
    "latency_ms",
    "time_to_first_token_ms",
    "generation_ms",
    "finish_reason",
    "cost_input",
    "cost_cached",
    "cost_output",
    "cost_router_fee",
    "router_fee_percent",
    "message_history_length",
    "tools_available",
    "errors",
    "source_message_role",
    "source_message_created_at",
    "source_message_metadata",
    "scheduled_effects",
)


def log_detail(row: LogRow) -> dict[str, Any]:
    """Every list key, then the detail keys, the heavy keys last (§8.2.6)."""
    out = row.to_list_wire()
    for key in (*DETAIL_KEYS, *HEAVY_KEYS):
        out[key] = getattr(row, key, None)
    out["standard_agents_router_used"] = bool(out["standard_agents_router_used"])
    return out


TIMING_KEYS = ("latency_ms", "time_to_first_token_ms", "finish_reason")


def _list_row(row: LogRow, timing: bool) -> dict[str, Any]:
    """A list row; with ``timing=true`` also the timing keys of its detail (§8.6.1)."""
    out = row.to_list_wire()
    if timing:
        for key in TIMING_KEYS:
            out[key] = getattr(row, key, None)
    return out


def _is_error(row: LogRow) -> bool:
    return row.error is not None or row.app_status == "error"


def _kind_matches(row: LogRow, kinds: list[str]) -> bool:
    return not kinds or ("llm" if row.kind is None else row.kind) in kinds


@router.get("/logs", summary="List log rows (needs the 'logs' permission)")
async def list_logs(
    request: Request, row: ThreadRow = Depends(deps.logs_permission), q: Query = Depends(deps.query)
) -> dict[str, Any]:
    limit = q.int("limit", 100, cap=1000)
    offset = q.int("offset", 0) or 0
    order = q.enum("order", ("asc", "desc"), "asc")
    kinds = [k.lower() for k in q.items("kind")]
    error = q.bool("error")
    ids = q.items("ids")
    message_ids = q.items("messageIds")
    if len(ids) > MAX_IDS:
        raise bad_field("ids", "has more than 200 ids", "Too many log IDs requested")
    if len(message_ids) > MAX_IDS:
        raise bad_field("messageIds", "has more than 200 ids", "Too many message IDs requested")
    workblocks = bool(q.bool("includeWorkblocks", False))
    descendants = bool(q.bool("includeDescendants", False))
    timing = bool(q.bool("timing", False))
    runtime = deps.runtime(request)
    rows = await runtime.store.list_logs(row.id, limit=None)
    rows = [r for r in rows if _kind_matches(r, kinds)]
    if error is not None:
        rows = [r for r in rows if _is_error(r) == error]
    if message_ids or ids:
        if message_ids:
            wanted = set(message_ids)
            if workblocks:
                state = deps.state_of(request, row)
                found = await state.get_messages(
                    ids=message_ids, include_workblocks=True, include_silent=True, max_depth=None
                )
                wanted |= {m.id for m in found.messages}
            picked = [r for r in rows if r.message_id in wanted]
        else:
            wanted = set(ids)
            picked = [r for r in rows if r.id in wanted]
        if descendants:
            picked = _with_relatives(rows, picked)
        logs = [_list_row(r, timing) for r in picked]
        return {"logs": logs, "total": len(picked), "hasMore": False}
    total = len(rows)
    if order == "desc":
        rows = rows[::-1]
    page = rows[offset : offset + limit] if limit is not None else rows[offset:]
    return {
        "logs": [_list_row(r, timing) for r in page],
        "total": total,
        "hasMore": offset + len(page) < total,
    }


def _with_relatives(rows: list[LogRow], picked: list[LogRow]) -> list[LogRow]:
    """Add every descendant (via ``parent_log_id``) and every ancestor of the picked rows."""
    by_id = {r.id: r for r in rows}
    keep = {r.id for r in picked}
    for r in picked:
        parent = r.parent_log_id
        while parent is not None and parent in by_id and parent not in keep:
            keep.add(parent)
            parent = by_id[parent].parent_log_id
    changed = True
    while changed:
        changed = False
        for r in rows:
            if r.id not in keep and r.parent_log_id in keep:
                keep.add(r.id)
                changed = True
    return [r for r in rows if r.id in keep]


@router.get("/logs/{log_id}", summary="One log row with its detail")
async def get_log(
    log_id: str, request: Request, row: ThreadRow = Depends(deps.logs_permission)
) -> dict[str, Any]:
    store = deps.runtime(request).store
    found = await store.get_log(row.id, log_id) if deps.storable(log_id) else None
    if found is None:
        raise ApiError(404, "log_not_found", f"Log not found: {log_id}")
    return log_detail(found)


@router.get("/cost", summary="Cost of the thread and its descendants")
async def get_cost(request: Request, row: ThreadRow = Depends(deps.thread_row)) -> dict[str, Any]:
    state = deps.state_of(request, row)
    report = await state.cost()
    return report.to_wire()


@router.get("/subagents", summary="The thread's child registry")
async def get_subagents(
    request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    state = deps.state_of(request, row)
    entries = sorted(await state.get_children(), key=lambda e: e.created_at)
    return {"subagents": [registry_wire(e) for e in entries]}
