"""API keys (spec 10 §10.5.7) and user administration (§10.5.8)."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from threadloom import errors as E
from threadloom.server import deps
from threadloom.server.auth.accounts import (
    issue_api_key,
    key_json,
    new_user,
    seconds,
    user_json,
)
from threadloom.server.auth.passwords import hash_password_async
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import ApiError
from threadloom.server.routing import Router
from threadloom.store.base import UserPatch
from threadloom.wire.auth import ApiKey, ApiKeyCreated, ApiKeyList, CreateApiKey, Success
from threadloom.wire.budgets import QuotaBody, quota_answer
from threadloom.wire.users import CreateUser, PatchUser, User, UserAnswer, UserList

keys = Router(prefix="/api/api-keys", tags=["auth"])
users = Router(prefix="/api/users", tags=["users"])

USER_NOT_FOUND = ApiError(404, "not_found", "User not found")
_PROFILE = ("display_name", "email", "avatar_url")


def _invalidate(request: Request) -> None:
    invalidate = getattr(deps.context(request).credentials, "invalidate", None)
    if callable(invalidate):
        invalidate()


# -- API keys --------------------------------------------------------------------------------


@keys.get("", summary="The caller's API keys (admins: ?all=true for every key)")
async def list_keys(request: Request, who: Principal = Depends(deps.principal)) -> dict[str, Any]:
    every = deps.Query(request).bool("all", False) and who.is_admin
    if not every and not who.has_user_row:
        return ApiKeyList(keys=[]).to_wire()
    rows = await deps.runtime(request).store.list_api_keys(None if every else who.id)
    return ApiKeyList(keys=[ApiKey.model_validate(key_json(r)) for r in rows]).to_wire()


@keys.post("", summary="Create an API key (shown once)")
async def create_key(request: Request, who: Principal = Depends(deps.principal)) -> JSONResponse:
    body = await deps.body_of(request, CreateApiKey)
    name, days, user_id = body.name, body.expires_in_days, body.user_id
    store = deps.runtime(request).store
    if user_id is None or user_id == who.id:
        if not who.has_user_row:
            raise ApiError(400, "invalid_request", "user_id is required for this credential")
        owner = who.id
    else:
        if not who.is_admin:
            raise ApiError(403, "forbidden", "Forbidden: only admins create keys for others")
        if await store.get_user(user_id) is None:
            raise USER_NOT_FOUND
        owner = user_id
    issued = await issue_api_key(store, owner, name.strip(), days)
    _invalidate(request)
    row = issued.row
    created = ApiKeyCreated(
        key=issued.key,
        id=row.id,
        name=row.name,
        key_prefix=row.key_prefix,
        last_five=row.last_five,
        user_id=row.user_id,
        created_at=seconds(row.created_at_us),
        expires_at=seconds(row.expires_at_us),
    )
    return JSONResponse(
        created.to_wire(),
        status_code=201,
        headers={"Cache-Control": "no-store"},
    )


@keys.delete("/{key_id}", summary="Delete an API key")
async def delete_key(
    key_id: str, request: Request, who: Principal = Depends(deps.principal)
) -> dict[str, Any]:
    store = deps.runtime(request).store
    row = await store.get_api_key(key_id) if deps.storable(key_id) else None
    if row is None or (not who.is_admin and row.user_id != who.id):
        raise ApiError(404, "not_found", "API key not found")
    await store.delete_api_key(key_id)
    deps.credentials_revoked(request)
    return Success(success=True).to_wire()


# -- users (admin) ---------------------------------------------------------------------------


def _user_fields(body: PatchUser) -> dict[str, Any]:
    """The fields a create or patch body names (a ``null`` included), permissions and
    roles without repeats."""
    named = body.model_fields_set & set(PatchUser.model_fields)
    out = {name: getattr(body, name) for name in named}
    if out.get("permissions") is not None:
        out["permissions"] = tuple(dict.fromkeys(out["permissions"]))
    if "roles" in out:
        out["roles"] = tuple(dict.fromkeys(out["roles"]))
    return out


@users.get("", summary="Every user (admin)")
async def list_users(request: Request, who: Principal = Depends(deps.admin)) -> dict[str, Any]:
    rows = await deps.runtime(request).store.list_users()
    return UserList(users=[User.model_validate(user_json(r)) for r in rows]).to_wire()


@users.post("", summary="Create a user (admin)")
async def create_user(request: Request, who: Principal = Depends(deps.admin)) -> JSONResponse:
    body = await deps.body_of(request, CreateUser)
    username = body.username
    fields = _user_fields(body)
    password = fields.get("password")
    user = new_user(
        username,
        fields.get("role") or "user",
        password_hash=await hash_password_async(password) if password else None,
        permissions=fields.get("permissions"),
        roles=fields.get("roles") or (),
        **{k: fields[k] for k in _PROFILE if k in fields},
    )
    try:
        created = await deps.runtime(request).store.create_user(user)
    except E.UsernameTaken:
        raise ApiError(409, "conflict", "Username already exists") from None
    _invalidate(request)
    answer = UserAnswer(user=User.model_validate(user_json(created)))
    return JSONResponse(answer.to_wire(), status_code=201)


@users.patch("/{user_id}", summary="Change a user (admin)")
async def patch_user(
    user_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    fields = _user_fields(await deps.body_of(request, PatchUser))
    store = deps.runtime(request).store
    if not deps.storable(user_id) or await store.get_user(user_id) is None:
        raise USER_NOT_FOUND
    password = fields.get("password")
    patch = UserPatch(
        set_password="password" in fields,
        password_hash=await hash_password_async(password) if password else None,
        role=fields.get("role"),
        set_permissions="permissions" in fields,
        permissions=fields.get("permissions"),
        roles=fields.get("roles"),
        profile={k: fields[k] for k in _PROFILE if k in fields},
    )
    try:
        updated = await store.update_user(user_id, patch)
    except E.LastAdmin:
        raise ApiError(409, "conflict", "Cannot demote the last admin") from None
    if updated is None:
        raise USER_NOT_FOUND
    deps.credentials_revoked(request)  # sessions, role or permissions may have changed
    return UserAnswer(user=User.model_validate(user_json(updated))).to_wire()


@users.delete("/{user_id}", summary="Delete a user (admin)")
async def delete_user(
    user_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    if not deps.storable(user_id):
        raise USER_NOT_FOUND
    try:
        deleted = await deps.runtime(request).store.delete_user(user_id)
    except E.LastAdmin:
        raise ApiError(409, "conflict", "Cannot delete the last admin") from None
    if not deleted:
        raise USER_NOT_FOUND
    _invalidate(request)
    deps.credentials_revoked(request)
    return Success(success=True).to_wire()


# -- quotas (admin, spec 15 §15.4) ----------------------------------------------------------


async def _quota_user(request: Request, user_id: str) -> str:
    """The id of an existing user (quotas over HTTP are set on accounts), else 404."""
    if not deps.storable(user_id) or await deps.runtime(request).store.get_user(user_id) is None:
        raise USER_NOT_FOUND
    return user_id


@users.get("/{user_id}/quota", summary="A user's quota and spend in its window (admin)")
async def get_user_quota(
    user_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    quota, spent = await deps.runtime(request).user_quota(await _quota_user(request, user_id))
    return quota_answer(user_id, quota, spent).to_wire()


@users.put("/{user_id}/quota", summary="Set a user's quota (admin)")
async def set_user_quota(
    user_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    body = await deps.body_of(request, QuotaBody)
    runtime = deps.runtime(request)
    quota = body.quota(await _quota_user(request, user_id))
    await runtime.set_user_quota(user_id, quota)
    _, spent = await runtime.user_quota(user_id)
    return quota_answer(user_id, quota, spent).to_wire()


@users.delete("/{user_id}/quota", summary="Remove a user's quota (admin)")
async def delete_user_quota(
    user_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    await deps.runtime(request).set_user_quota(await _quota_user(request, user_id), None)
    return quota_answer(user_id, None, None).to_wire()
