"""Thread routes (spec 08 §8.3): list, create, owners, get, patch, delete."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic_core import PydanticCustomError
from starlette.convertors import StringConvertor, register_url_convertor

from threadloom.define.registry import Definitions
from threadloom.errors import InvalidField, StoreUnavailable, ThreadloomError
from threadloom.records import normalize_tool_calls
from threadloom.server import deps
from threadloom.server.auth.principal import Principal
from threadloom.server.deps import Query, ServerContext
from threadloom.server.errors import ApiError, Problems, bad_field
from threadloom.server.thread_answers import agent_detail, status_wire, thread_item
from threadloom.server.uploads import (
    Upload,
    check_uploads_fit,
    parse_uploads,
)
from threadloom.store.base import ThreadPatch, ThreadQuery, ThreadRow
from threadloom.thread.files import remove_attachments, write_attachments
from threadloom.wire.messages import message_metadata
from threadloom.wire.problems import problem_of
from threadloom.wire.threads import MAX_DATE_S, NOT_ACCEPTED


class ThreadIdConvertor(StringConvertor):
    """A thread id in ``/api/threads/{id}``: any segment but ``owners``, which is the owner
    facet's own path, so ``PATCH``/``DELETE /api/threads/owners`` are 405s (``Allow: GET,
    HEAD``) rather than a thread lookup of ``owners`` (issue 23 item 10)."""

    regex = "(?!owners$)[^/]+"


register_url_convertor("thread_id", ThreadIdConvertor())
THREAD = "/{id:thread_id}"

router = APIRouter(prefix="/api/threads", tags=["threads"])

OVERLAPS = ("enqueue", "reject", "interrupt")


def origin_of(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host') or request.url.netloc}"


# -- shared validation --------------------------------------------------------------------


def check_tags(value: Any, problems: Problems, field: str = "tags") -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        problems.add(field, "must be an array of strings", "tags must be an array of strings")
        return None
    if not all(isinstance(t, str) for t in value):
        problems.add(field, "must be an array of strings", "All tags must be strings")
        return None
    if len(value) > 50:
        problems.add(field, "must have at most 50 tags")
        return None
    for i, tag in enumerate(value):
        if not 1 <= len(tag) <= 200:
            problems.add(f"{field}[{i}]", "must be 1-200 characters")
            return None
    return tuple(value)


def check_metadata(value: Any, field: str, problems: Problems) -> dict[str, Any] | None:
    """``wire.messages.message_metadata``'s rule; its refusal added to ``problems``."""
    try:
        return message_metadata(value)
    except PydanticCustomError as refusal:
        p = problem_of(refusal, field)
        problems.add(p.field, p.problem, p.message)
        return None


def check_env(value: Any, field: str, problems: Problems) -> dict[str, str] | None:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and k.strip() and isinstance(v, str) for k, v in value.items()
    ):
        problems.add(field, "must be an object of string values")
        return None
    return {k.strip(): v for k, v in value.items()}


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


def check_overlap(value: Any, problems: Problems) -> str | None:
    if value is not None and value not in OVERLAPS:
        problems.add(
            "overlap",
            "must be one of enqueue, reject, interrupt, or null",
            "overlap must be one of enqueue, reject, interrupt, or null",
        )
        return None
    return value if isinstance(value, str) else None


def _arguments_as_text(value: Any) -> Any:
    """Spec 08 §8.3.2: ``function.arguments`` may be an object; it is stored as JSON text."""
    if not isinstance(value, list):
        return value
    out = []
    for call in value:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), dict):
            call = {
                **call,
                "function": {**function, "arguments": json.dumps(function["arguments"])},
            }
        out.append(call)
    return out


class InitialMessage:
    def __init__(self, fields: dict[str, Any], uploads: list[Upload]) -> None:
        self.fields = fields
        self.uploads = uploads


def check_initial_messages(value: Any, problems: Problems) -> list[InitialMessage]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add("initial_messages", "must be an array", "initial_messages must be an array")
        return []
    if len(value) > 1000:
        problems.add("initial_messages", "must have at most 1000 items")
        return []
    out: list[InitialMessage] = []
    calls_seen: set[str] = set()
    for i, item in enumerate(value):
        at = f"initial_messages[{i}]"
        if not isinstance(item, dict):
            problems.add(at, "must be an object")
            continue
        before = len(problems.items)
        for key in NOT_ACCEPTED:
            if key in item:
                problems.add(f"{at}.{key}", "cannot be set on an initial message")
        role = item.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            problems.add(f"{at}.role", "must be one of system, user, assistant, tool")
        content = item.get("content")
        if content is not None and not isinstance(content, str):
            problems.add(f"{at}.content", "must be a string or null")
            content = None
        uploads = parse_uploads(item.get("attachments"), f"{at}.attachments", problems)
        if role in ("user", "system") and not (content and content.strip()) and not uploads:
            problems.add(f"{at}.content", "must not be blank for a user or system message")
        fields: dict[str, Any] = {"role": role, "content": content}
        name = item.get("name")
        if name is not None:
            if not isinstance(name, str) or len(name) > 255:
                problems.add(f"{at}.name", "must be a string of at most 255 characters")
            fields["name"] = name
        if item.get("tool_calls") is not None:
            if role not in ("user", "assistant"):
                problems.add(f"{at}.tool_calls", "is only allowed on user or assistant items")
            else:
                try:
                    calls = normalize_tool_calls(_arguments_as_text(item["tool_calls"]))
                except (ThreadloomError, ValueError, TypeError) as exc:
                    problems.add(f"{at}.tool_calls", f"is invalid: {exc}")
                else:
                    for call in calls:
                        if call.id in calls_seen:
                            problems.add(f"{at}.tool_calls", f"repeats call id {call.id}")
                        calls_seen.add(call.id)
                    fields["tool_calls"] = calls
        if role == "tool":
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in calls_seen:
                problems.add(f"{at}.tool_call_id", "must name a call of an earlier assistant item")
            fields["tool_call_id"] = call_id
            status = item.get("tool_status")
            if status is not None:
                if status not in ("success", "error"):
                    problems.add(f"{at}.tool_status", "must be success or error")
                fields["tool_status"] = status
        elif item.get("tool_status") is not None:
            problems.add(f"{at}.tool_status", "is only allowed on tool items")
        silent = item.get("silent", False)
        if not isinstance(silent, bool):
            problems.add(f"{at}.silent", "must be a boolean")
        fields["silent"] = silent is True
        metadata = check_metadata(item.get("metadata"), f"{at}.metadata", problems)
        if metadata:
            fields["metadata"] = metadata
        if len(problems.items) == before:
            out.append(InitialMessage(fields, uploads))
    return out


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
        return {"threads": [], "total": 0, "hasMore": False}
    rows, total = await ctx.runtime.store.query_threads(query)
    origin = origin_of(request)
    defs = ctx.runtime.definitions
    return {
        "threads": [thread_item(r, defs, origin) for r in rows],
        "total": total,
        "hasMore": query.offset + len(rows) < total,
    }


@router.post("", summary="Create a thread")
async def create_thread(
    request: Request, who: Principal = Depends(deps.principal)
) -> dict[str, Any]:
    ctx = deps.context(request)
    body = await deps.json_object(request, ctx.settings.max_upload_bytes)
    problems = Problems()
    agent_id = body.get("agent_id")
    if agent_id is None:
        problems.add("agent_id", "is required", "Missing required field: agent_id")
    elif not isinstance(agent_id, str) or not agent_id:
        problems.add("agent_id", "must be a string", "agent_id must be a string")
        agent_id = None
    tags = check_tags(body.get("tags"), problems)
    owner: str | None = who.owner_id
    if "user_id" in body:
        user_id = body["user_id"]
        if user_id is not None and not isinstance(user_id, str):
            problems.add("user_id", "must be a string or null")
        owner = user_id
    arguments = body.get("arguments")
    if arguments is None:  # null is absent (§8.3.2): a client may send every key, nulls too
        arguments = body.get("data")
    elif body.get("data") is not None:
        problems.add("arguments", "conflicts with data", "Use either arguments or data, not both")
    if arguments is not None and not isinstance(arguments, dict):
        problems.add("arguments", "must be an object", "arguments must be an object")
        arguments = None
    initial = check_initial_messages(body.get("initial_messages"), problems)
    env: dict[str, str] | None = None
    env_value = body.get("env", body.get("tenvs"))
    if env_value is not None:
        env = check_env(env_value, "env", problems)
    env_types = body.get("env_types")
    if env_types is not None and not isinstance(env_types, dict):
        problems.add("env_types", "must be an object")
        env_types = None
    properties = body.get("properties")
    if properties is not None and not isinstance(properties, dict):
        problems.add("properties", "must be an object")
    overlap = check_overlap(body.get("overlap"), problems)
    problems.raise_if_any()
    if owner != who.owner_id and not who.is_admin:
        raise ApiError(403, "forbidden", "Forbidden: cannot create a thread for another user")
    assert isinstance(agent_id, str)
    runtime = ctx.runtime
    groups = [(f"initial_messages[{i}].attachments", m.uploads) for i, m in enumerate(initial)]
    await check_uploads_fit(runtime.hub, [g for g in groups if g[1]])
    state = await runtime.create_thread(
        agent_id, user_id=owner, tags=tags or (), arguments=arguments, overlap=overlap
    )
    ids: list[str] = []
    try:
        if env or properties:
            await runtime.store.update_thread(
                state.thread_id,
                ThreadPatch(
                    replace_env=env is not None,
                    env=env,
                    env_types=env_types,
                    properties=properties,
                    set_properties=properties is not None,
                ),
            )
        for item in initial:
            fields = dict(item.fields)
            refs = await write_attachments(state, item.uploads)
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
    return {
        "threadId": row.id,
        "agent_id": row.agent_id,
        "message": "Thread created successfully",
        "initialMessageIds": ids,
        "thread": thread_item(row, runtime.definitions, origin_of(request)),
    }


@router.get("/owners", summary="Owner facet for the thread list")
async def owners(request: Request, who: Principal = Depends(deps.principal)) -> dict[str, Any]:
    store = deps.runtime(request).store
    if not who.is_admin and not who.has_user_row:
        return {"owners": []}
    rows = await store.thread_owners(None if who.is_admin else who.id)
    return {
        "owners": [
            {
                "user_id": r.user_id,
                "username": None,
                "display_name": None,
                "email": None,
                "thread_count": r.thread_count,
            }
            for r in rows
        ]
    }


@router.get(THREAD, summary="A thread with its agent, stats and run status")
async def get_thread(request: Request, row: ThreadRow = Depends(deps.thread_row)) -> dict[str, Any]:
    runtime = deps.runtime(request)
    stats = await runtime.store.thread_stats(row.id)
    agent = runtime.definitions.agent(row.agent_id)
    return {
        "thread": {
            "id": row.id,
            "agent_id": row.agent_id,
            "origin_agent_id": row.origin_agent_id,
            "user_id": row.user_id,
            "tags": list(row.tags),
            "parent": row.parent_id,
            "terminated": row.terminated,
            "created_at": row.created_at_us // 1_000_000,
            "arguments": dict(row.arguments),
            "overlap": row.overlap,
            "orphaned": agent is None,
        },
        "agent": agent_detail(agent, origin_of(request)),
        "stats": {
            "message_count": stats.message_count,
            "log_count": stats.log_count,
            "queued_count": stats.queued_count,
        },
        "status": status_wire(row),
        "seq": row.event_seq,
    }


@router.patch(
    THREAD,
    summary="Update tags, agent, variables or overlap policy",
)
async def patch_thread(
    request: Request, row: ThreadRow = Depends(deps.thread_row)
) -> dict[str, Any]:
    runtime = deps.runtime(request)
    body = await deps.json_object(request)
    problems = Problems()
    tags = check_tags(body.get("tags"), problems) if "tags" in body else None
    agent_id = body.get("agent_id")
    if agent_id is not None and not isinstance(agent_id, str):
        problems.add("agent_id", "must be a string", "agent_id must be a string")
        agent_id = None
    replace_env = "env" in body or "tenvs" in body
    env: dict[str, str] | None = None
    if replace_env:
        value = body.get("env", body.get("tenvs"))
        if value is not None:
            env = check_env(value, "env", problems)
    env_types = body.get("env_types")
    if env_types is not None and (not isinstance(env_types, dict) or not replace_env):
        problems.add("env_types", "must be an object given together with env")
    env_set: dict[str, str] = {}
    if "env_patch" in body:
        patch = body["env_patch"]
        if not isinstance(patch, dict):
            problems.add("env_patch", "must be an object", "env_patch must be an object")
        else:
            for key, value in patch.items():
                if not key.strip():
                    problems.add(
                        "env_patch",
                        "keys must be non-empty strings",
                        "env_patch keys must be non-empty strings",
                    )
                elif not isinstance(value, str):
                    problems.add(f"env_patch.{key}", "must be a string")
                else:
                    env_set[key.strip()] = value
    type_set: dict[str, str] = {}
    if "env_type_patch" in body:
        patch = body["env_type_patch"]
        if not isinstance(patch, dict):
            problems.add("env_type_patch", "must be an object", "env_type_patch must be an object")
        else:
            for key, value in patch.items():
                if not key.strip():
                    problems.add(
                        "env_type_patch",
                        "keys must be non-empty strings",
                        "env_type_patch keys must be non-empty strings",
                    )
                else:
                    type_set[key.strip()] = "text" if value == "text" else "secret"
    deletes: tuple[str, ...] = ()
    if "env_delete" in body:
        value = body["env_delete"]
        if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
            problems.add(
                "env_delete",
                "must be an array of strings",
                "env_delete must be an array of strings",
            )
        elif not all(k.strip() for k in value):
            problems.add(
                "env_delete",
                "entries must be non-empty strings",
                "env_delete entries must be non-empty strings",
            )
        else:
            deletes = tuple(k.strip() for k in value)
    set_overlap = "overlap" in body
    overlap = check_overlap(body.get("overlap"), problems) if set_overlap else None
    problems.raise_if_any()
    effective = (
        tags is not None
        or agent_id is not None
        or replace_env
        or env_set
        or type_set
        or deletes
        or set_overlap
    )
    if not effective:
        raise bad_field("body", "has no field to update", "No valid fields to update")
    try:
        updated = await runtime.update_thread(
            row.id,
            ThreadPatch(
                tags=tags,
                set_overlap=set_overlap,
                overlap=overlap,
                replace_env=replace_env,
                env=env,
                env_types=env_types if isinstance(env_types, dict) else None,
                env_set=env_set,
                env_type_set=type_set,
                env_delete=deletes,
                agent_id=agent_id,
            ),
        )
    except InvalidField as exc:
        raise bad_field(exc.field, exc.problem, str(exc)) from None
    return {
        "id": updated.id,
        "agent_id": updated.agent_id,
        "user_id": updated.user_id,
        "tags": list(updated.tags),
        "env_types": updated.env_types,
        "created_at": updated.created_at_us // 1_000_000,
        "overlap": updated.overlap,
    }


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
    return {
        "success": True,
        "threadId": row.id,
        "deletedThreadIds": deleted,
        "deletedCount": len(deleted),
        "message": "Thread and subthreads deleted successfully",
    }
