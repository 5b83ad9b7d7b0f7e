"""API keys (spec 10 §10.5.7) and user administration (§10.5.8)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from threadloom import errors as E
from threadloom.server import deps
from threadloom.server.auth.accounts import (
    KNOWN_PERMISSIONS,
    ROLES,
    issue_api_key,
    key_json,
    new_user,
    seconds,
    user_json,
)
from threadloom.server.auth.passwords import hash_password_async
from threadloom.server.auth.principal import Principal
from threadloom.server.errors import ApiError, Problems
from threadloom.store.base import UserPatch
from threadloom.wire.users import APP_ROLE, MIN_PASSWORD_LENGTH, USERNAME

keys = APIRouter(prefix="/api/api-keys", tags=["auth"])
users = APIRouter(prefix="/api/users", tags=["users"])

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
        return {"keys": []}
    rows = await deps.runtime(request).store.list_api_keys(None if every else who.id)
    return {"keys": [key_json(r) for r in rows]}


@keys.post("", summary="Create an API key (shown once)")
async def create_key(request: Request, who: Principal = Depends(deps.principal)) -> JSONResponse:
    body = await deps.json_object(request)
    problems = Problems()
    name = body.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        problems.add("name", "must be a string of 1 to 100 characters")
    days = body.get("expires_in_days")
    if days is not None:
        days = problems.integer(days, "expires_in_days", 1, 3650)
    user_id = body.get("user_id")
    if user_id is not None and not isinstance(user_id, str):
        problems.add("user_id", "must be a string")
    problems.raise_if_any()
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
    assert isinstance(name, str)
    issued = await issue_api_key(store, owner, name.strip(), days)
    _invalidate(request)
    row = issued.row
    return JSONResponse(
        {
            "key": issued.key,
            "id": row.id,
            "name": row.name,
            "key_prefix": row.key_prefix,
            "last_five": row.last_five,
            "user_id": row.user_id,
            "created_at": seconds(row.created_at_us),
            "expires_at": seconds(row.expires_at_us),
        },
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
    return {"success": True}


# -- users (admin) ---------------------------------------------------------------------------


def _check_user_fields(body: dict[str, Any], problems: Problems) -> dict[str, Any]:
    """The validated optional fields shared by create and patch (only those present)."""
    out: dict[str, Any] = {}
    if "password" in body:
        password = body["password"]
        if password is not None and (
            not isinstance(password, str) or len(password) < MIN_PASSWORD_LENGTH
        ):
            problems.add(
                "password",
                f"must be at least {MIN_PASSWORD_LENGTH} characters",
                f"Password must be at least {MIN_PASSWORD_LENGTH} characters",
            )
        out["password"] = password
    if "role" in body:
        if body["role"] not in ROLES:
            problems.add("role", "must be one of admin, user, api")
        out["role"] = body["role"]
    if "permissions" in body:
        permissions = body["permissions"]
        if permissions is not None and (
            not isinstance(permissions, list)
            or any(p not in KNOWN_PERMISSIONS for p in permissions)
        ):
            problems.add("permissions", "must be null or a list of known permissions (logs)")
        else:
            out["permissions"] = (
                tuple(dict.fromkeys(permissions)) if permissions is not None else None
            )
    if "roles" in body:
        roles = body["roles"]
        if (
            not isinstance(roles, list)
            or len(roles) > 64
            or any(not isinstance(r, str) or not APP_ROLE.match(r) for r in roles)
        ):
            problems.add(
                "roles", "must be at most 64 strings of 1-128 characters of [A-Za-z0-9._:/-]"
            )
        else:
            out["roles"] = tuple(dict.fromkeys(roles))
    for name in _PROFILE:
        if name in body:
            value = body[name]
            if value is not None and (not isinstance(value, str) or len(value) > 2048):
                problems.add(name, "must be a string or null")
            out[name] = value
    return out


@users.get("", summary="Every user (admin)")
async def list_users(request: Request, who: Principal = Depends(deps.admin)) -> dict[str, Any]:
    rows = await deps.runtime(request).store.list_users()
    return {"users": [user_json(r) for r in rows]}


@users.post("", summary="Create a user (admin)")
async def create_user(request: Request, who: Principal = Depends(deps.admin)) -> JSONResponse:
    body = await deps.json_object(request)
    problems = Problems()
    username = body.get("username")
    if not isinstance(username, str) or not USERNAME.match(username):
        problems.add("username", "must be 1-64 characters of [A-Za-z0-9._-]")
    fields = _check_user_fields(body, problems)
    problems.raise_if_any()
    assert isinstance(username, str)
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
    return JSONResponse({"user": user_json(created)}, status_code=201)


@users.patch("/{user_id}", summary="Change a user (admin)")
async def patch_user(
    user_id: str, request: Request, who: Principal = Depends(deps.admin)
) -> dict[str, Any]:
    body = await deps.json_object(request)
    problems = Problems()
    fields = _check_user_fields(body, problems)
    problems.raise_if_any()
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
    return {"user": user_json(updated)}


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
    return {"success": True}
