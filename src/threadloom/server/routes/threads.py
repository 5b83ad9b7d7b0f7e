"""Thread routes (spec 08 §8.3): list, create, owners, get, patch, delete."""

from __future__ import annotations

from typing import Any, cast

from fastapi import Depends, Request
from starlette.convertors import StringConvertor, register_url_convertor

from threadloom.define.budget import Budget
from threadloom.define.registry import Definitions
from threadloom.engine.run.runtime import Runtime
from threadloom.errors import InvalidField, StoreUnavailable
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.deps import Query, ServerContext
from threadloom.server.errors import ApiError, bad_field
from threadloom.server.routing import Router
from threadloom.server.thread_answers import agent_detail, status_wire, thread_answer
from threadloom.server.uploads import check_uploads_fit, uploads_of
from threadloom.store.base import ThreadPatch, ThreadQuery, ThreadRow
from threadloom.thread.files import remove_attachments, write_attachments
from threadloom.wire.approvals import ApprovalItem
from threadloom.wire.threads import (
    MAX_DATE_S,
    CreateThread,
    Owner,
    OwnerList,
    PatchThread,
    ThreadCreated,
    ThreadDeleted,
    ThreadDetail,
    ThreadFields,
    ThreadList,
    ThreadStats,
    ThreadUpdated,
)


class ThreadIdConvertor(StringConvertor):
    """A thread id in ``/api/threads/{id}``: any segment but ``owners``, which is the owner
    facet's own path, so ``PATCH``/``DELETE /api/threads/owners`` are 405s (``Allow: GET,
    HEAD``) rather than a thread lookup of ``owners`` (issue 23 item 10)."""

    regex = "(?!owners$)[^/]+"


register_url_convertor("thread_id", ThreadIdConvertor())
THREAD = "/{id:thread_id}"

router = Router(prefix="/api/threads", tags=["threads"])


def origin_of(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host') or request.url.netloc}"


# -- shared rules ---------------------------------------------------------------------


def refuse_orphaned(defs: Definitions, row: ThreadRow) -> None:
    """409 ``agent_not_found`` naming the agent when the served project has no agent of
    this thread's name (spec 08 §8.1.9): no run of it could start here, so a send or a
    continue would wait forever. Nothing is stored."""
    if defs.agent(row.agent_id) is None:
        raise ApiError(
            409,
            "agent_not_found",
            f"Agent not found: {row.agent_id} (the served project has no agent of this"
            " thread; reassign it with PATCH agent_id or serve the project that has it)",
            extra={"agent_id": row.agent_id},
        )


# -- routes --------------------------------------------------------------------------------


@router.get("", summary="List threads")
async def list_threads(
    request: Request,
    who: Principal = Depends(deps.principal),
    q: Query = Depends(deps.query),
) -> dict[str, Any]:
    ctx: ServerContext = deps.context(request)
    limit = q.int("limit", 50, cap=1000)
    offset = q.int("offset", 0)
    start = q.int("startDate", maximum=MAX_DATE_S)
    end = q.int("endDate", maximum=MAX_DATE_S)
    parent = q.raw("parent") or None
    user_filter = q.raw("user_id") or None
    tag = q.raw("tag")
    query = ThreadQuery(
        user_id=user_filter if who.is_admin else who.id,
        agent_id=q.raw("agent_id") or None,
        include_children=bool(q.bool("include_children", False)),
        parent_id=None if parent in (None, "none") else parent,
        roots_only=parent == "none",
        search=q.raw("search") or None,
        tags=(tag,) if tag else (),
        created_from_us=start * 1_000_000 if start is not None else None,
        created_to_us=end * 1_000_000 + 999_999 if end is not None else None,
        executing=q.bool("executing"),
        terminated=q.bool("terminated"),
        states=tuple(q.enum_list("status", ("idle", "running", "failed"))),
        sort=q.enum("sort", ("activity", "created", "oldest"), "activity") or "activity",
        limit=limit if limit is not None else 50,
        offset=offset or 0,
    )
    if not who.is_admin and not who.has_user_row:
        return ThreadList(threads=[], total=0, hasMore=False).to_wire()
    rows, total = await ctx.runtime.store.replica().query_threads(query)
    origin = origin_of(request)
    defs = ctx.runtime.definitions
    return ThreadList(
        threads=[thread_answer(r, defs, origin) for r in rows],
        total=total,
        hasMore=query.offset + len(rows) < total,
    ).to_wire()


@router.post("", summary="Create a thread")
async def create_thread(
    request: Request, who: Principal = Depends(deps.principal)
) -> dict[str, Any]:
    ctx = deps.context(request)
    body = await deps.body_of(request, CreateThread, ctx.settings.max_upload_bytes)
    owner = body.user_id if "user_id" in body.model_fields_set else who.owner_id
    if owner != who.owner_id and not who.is_admin:
        raise ApiError(403, "forbidden", "Forbidden: cannot create a thread for another user")
    initial = [(m.stored, uploads_of(m.attachments)) for m in body.initial_messages or ()]
    env, properties = body.env, body.properties
    runtime = ctx.runtime
    groups = [(f"initial_messages[{i}].attachments", ups) for i, (_, ups) in enumerate(initial)]
    await check_uploads_fit(runtime.hub, [g for g in groups if g[1]])
    state = await runtime.create_thread(
        body.agent_id,
        user_id=owner,
        tags=tuple(body.tags or ()),
        arguments=body.arguments,
        overlap=body.overlap,
        # the field's rule (wire.budgets.budget_rule) made the body's budgets Budgets
        budget=cast("list[Budget] | None", body.budget),
    )
    ids: list[str] = []
    try:
        if env or properties:
            await runtime.store.update_thread(
                state.thread_id,
                ThreadPatch(
                    replace_env=env is not None,
                    env=env,
                    env_types=body.env_types,
                    properties=properties,
                    set_properties=properties is not None,
                ),
            )
        for fields, uploads in initial:
            refs = await write_attachments(state, uploads)
            if refs:
                fields["attachments"] = refs
            try:
                stored = await state.inject_message(fields)
            except BaseException:
                await remove_attachments(state, refs)
                raise
            ids.append(stored.id)
    except BaseException:
        await runtime.delete_thread(state.thread_id)
        raise
    row = await runtime.store.get_thread(state.thread_id)
    assert row is not None
    return ThreadCreated(
        threadId=row.id,
        agent_id=row.agent_id,
        message="Thread created successfully",
        initialMessageIds=ids,
        thread=thread_answer(row, runtime.definitions, origin_of(request)),
    ).to_wire()


@router.get("/owners", summary="Owner facet for the thread list")
async def owners(request: Request, who: Principal = Depends(deps.principal)) -> dict[str, Any]:
    store = deps.runtime(request).store
    if not who.is_admin and not who.has_user_row:
        return OwnerList(owners=[]).to_wire()
    rows = await store.thread_owners(None if who.is_admin else who.id)
    return OwnerList(
        owners=[
            Owner(
                user_id=r.user_id,
                username=None,
                display_name=None,
                email=None,
                thread_count=r.thread_count,
            )
            for r in rows
        ]
    ).to_wire()


async def pending_approvals(runtime: Runtime, row: ThreadRow) -> list[ApprovalItem]:
    """A parked thread's pending approvals (spec 14 §14.3); read only when it is parked."""
    if row.status.reason != "awaiting_approval":
        return []
    found = await runtime.store.list_approvals(row.id)
    return [ApprovalItem.of(a) for a in found if a.state == "pending"]


@router.get(THREAD, summary="A thread with its agent, stats and run status")
async def get_thread(request: Request, row: ThreadRow = Depends(deps.thread_row)) -> dict[str, Any]:
    runtime = deps.runtime(request)
    stats = await runtime.store.thread_stats(row.id)
    agent = runtime.definitions.agent(row.agent_id)
    return ThreadDetail(
        thread=ThreadFields(
            id=row.id,
            agent_id=row.agent_id,
            origin_agent_id=row.origin_agent_id,
            user_id=row.user_id,
            tags=list(row.tags),
            parent=row.parent_id,
            terminated=row.terminated,
            created_at=row.created_at_us // 1_000_000,
            arguments=dict(row.arguments),
            overlap=row.overlap,
            orphaned=agent is None,
            forked_from_thread_id=row.forked_from_thread_id,
            forked_from_message_id=row.forked_from_message_id,
        ),
        agent=agent_detail(agent, origin_of(request)),
        stats=ThreadStats(
            message_count=stats.message_count,
            log_count=stats.log_count,
            queued_count=stats.queued_count,
        ),
        status=status_wire(row),  # every key set: answered whole
        seq=row.event_seq,
        approvals=await pending_approvals(runtime, row),
    ).to_wire()


@router.patch(
    THREAD,
    summary="Update tags, agent, variables or overlap policy",
)
async def patch_thread(
    request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    runtime = deps.runtime(request)
    body = await deps.body_of(request, PatchThread)
    try:
        updated = await runtime.update_thread(
            row.id,
            ThreadPatch(
                tags=tuple(body.tags) if body.tags is not None else None,
                set_overlap=body.sets_overlap,
                overlap=body.overlap,
                replace_env=body.replaces_env,
                env=body.env,
                env_types=body.env_types,
                env_set=body.env_patch or {},
                env_type_set=body.env_type_patch or {},
                env_delete=tuple(body.env_delete or ()),
                agent_id=body.agent_id,
            ),
        )
    except InvalidField as exc:
        raise bad_field(exc.field, exc.problem, str(exc)) from None
    return ThreadUpdated(
        id=updated.id,
        agent_id=updated.agent_id,
        user_id=updated.user_id,
        tags=list(updated.tags),
        env_types=updated.env_types,
        created_at=updated.created_at_us // 1_000_000,
        overlap=updated.overlap,
    ).to_wire()


@router.delete(THREAD, summary="Delete a thread and its descendants")
async def delete_thread(
    request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    try:
        deleted = await deps.runtime(request).delete_thread(row.id)
    except (ApiError, StoreUnavailable):
        raise  # the store unreachable: 503, to be tried again (not a failed delete)
    except Exception:
        error = ApiError(500, "internal_error", "Internal server error", extra={"threadId": row.id})
        raise error from None
    return ThreadDeleted(
        success=True,
        threadId=row.id,
        deletedThreadIds=deleted,
        deletedCount=len(deleted),
        message="Thread and subthreads deleted successfully",
    ).to_wire()
