"""Users, API keys, sessions, WebSocket tickets and login attempts of both stores (spec 10).

Keys, session tokens, tickets and the keys of login attempts (a client address, a username)
are stored only as SHA-256 digests; passwords only as KDF strings. The functions below run
inside the store's write transactions and read snapshots (``TxStore``).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from threadloom.errors import LastAdmin, StoreError, UsernameTaken
from threadloom.store.base import (
    ApiKeyRow,
    Clock,
    SessionRow,
    TicketRow,
    UserPatch,
    UserRow,
)
from threadloom.store.core.conn import Conn

T = TypeVar("T")

USER_COLUMNS = (
    "id, username, role, created_at_us, password_hash, permissions, roles, display_name, "
    "email, avatar_url"
)
KEY_COLUMNS = (
    "id, user_id, name, key_prefix, last_five, created_at_us, last_used_at_us, expires_at_us"
)
TOUCH_INTERVAL_US = 60_000_000
TICKET_GRACE_US = 60_000_000
_PROFILE = ("display_name", "email", "avatar_url")


def _user(row: tuple[Any, ...]) -> UserRow:
    permissions = json.loads(row[5]) if row[5] is not None else None
    return UserRow(
        id=row[0],
        username=row[1],
        role=row[2],
        created_at_us=row[3],
        password_hash=row[4],
        permissions=tuple(permissions) if permissions is not None else None,
        roles=tuple(json.loads(row[6] or "[]")),
        display_name=row[7],
        email=row[8],
        avatar_url=row[9],
    )


def _key(row: tuple[Any, ...]) -> ApiKeyRow:
    return ApiKeyRow(*row)


def _json_list(values: tuple[str, ...] | None) -> str | None:
    return None if values is None else json.dumps(list(values))


def _other_admins(conn: Conn, user_id: str) -> int:
    """Admins other than ``user_id``. Where writes of other rows run at once (PostgreSQL),
    the count is taken under the dialect's account lock, so two demotions never each see
    the other admin (write skew)."""
    if conn.sql.lock_accounts is not None:
        conn.execute(conn.sql.lock_accounts)
    row = conn.execute(
        "SELECT COUNT(*) FROM users WHERE role = 'admin' AND id != ?", (user_id,)
    ).fetchone()
    return int(row[0])


# -- writes (conn, clock, *args) -------------------------------------------------------------


def create_user(conn: Conn, clock: Clock, user: UserRow) -> UserRow:
    inserted = conn.execute(
        f"INSERT INTO users({USER_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
        (
            user.id,
            user.username,
            user.role,
            user.created_at_us,
            user.password_hash,
            _json_list(user.permissions),
            json.dumps(list(user.roles)),
            user.display_name,
            user.email,
            user.avatar_url,
        ),
    ).rowcount
    if inserted:
        return user
    # a key is taken: the username (whatever the id), else the id
    if get_user_by_name(conn, user.username) is not None:
        raise UsernameTaken(f"username {user.username!r} already exists")
    raise StoreError(f"a user with id {user.id!r} already exists")


def update_user(conn: Conn, clock: Clock, user_id: str, patch: UserPatch) -> UserRow | None:
    current = get_user(conn, user_id)
    if current is None:
        return None
    sets: list[str] = []
    values: list[Any] = []
    if patch.role is not None and patch.role != current.role:
        if current.role == "admin" and _other_admins(conn, user_id) == 0:
            raise LastAdmin("Cannot demote the last admin")
        sets.append("role = ?")
        values.append(patch.role)
    if patch.set_password:
        sets.append("password_hash = ?")
        values.append(patch.password_hash)
        conn.execute("DELETE FROM sessions WHERE user_id = ?", (user_id,))
        delete_oauth_grants(conn, user_id)
    if patch.set_permissions:
        sets.append("permissions = ?")
        values.append(_json_list(patch.permissions))
    if patch.roles is not None:
        sets.append("roles = ?")
        values.append(json.dumps(list(patch.roles)))
    for name, value in patch.profile.items():
        if name in _PROFILE:
            sets.append(f"{name} = ?")
            values.append(value)
    if sets:
        conn.execute(f"UPDATE users SET {', '.join(sets)} WHERE id = ?", (*values, user_id))
    return get_user(conn, user_id)


def rehash_password(conn: Conn, clock: Clock, user_id: str, old: str, new: str) -> bool:
    """Replace the user's password hash ``old`` by ``new`` (the same password, hashed
    anew), only while it is still ``old``; sessions are kept. Whether it was replaced."""
    cur = conn.execute(
        "UPDATE users SET password_hash = ? WHERE id = ? AND password_hash = ?",
        (new, user_id, old),
    )
    return bool(cur.rowcount)


def delete_user(conn: Conn, clock: Clock, user_id: str) -> bool:
    current = get_user(conn, user_id)
    if current is None:
        return False
    if current.role == "admin" and _other_admins(conn, user_id) == 0:
        raise LastAdmin("Cannot delete the last admin")
    conn.execute("DELETE FROM sessions WHERE user_id = ?", (user_id,))
    conn.execute("DELETE FROM api_keys WHERE user_id = ?", (user_id,))
    delete_oauth_grants(conn, user_id)
    # the user's memory goes with the user (spec 20 §20.6)
    conn.execute("DELETE FROM memory_items WHERE scope = ?", (f"user:{user_id}",))
    conn.execute("DELETE FROM users WHERE id = ?", (user_id,))
    return True


def delete_oauth_grants(conn: Conn, user_id: str) -> None:
    """The user's OAuth codes and tokens (spec 10 §10.15): gone with the user, and with a
    password change as their sessions are."""
    conn.execute("DELETE FROM oauth_codes WHERE user_id = ?", (user_id,))
    conn.execute("DELETE FROM oauth_tokens WHERE user_id = ?", (user_id,))


def create_api_key(conn: Conn, clock: Clock, key: ApiKeyRow, key_digest: str) -> ApiKeyRow:
    conn.execute(
        f"INSERT INTO api_keys({KEY_COLUMNS}, key_digest) VALUES (?,?,?,?,?,?,?,?,?)",
        (
            key.id,
            key.user_id,
            key.name,
            key.key_prefix,
            key.last_five,
            key.created_at_us,
            key.last_used_at_us,
            key.expires_at_us,
            key_digest,
        ),
    )
    return key


def delete_api_key(conn: Conn, clock: Clock, key_id: str) -> bool:
    return conn.execute("DELETE FROM api_keys WHERE id = ?", (key_id,)).rowcount > 0


def delete_api_key_by_digest(conn: Conn, clock: Clock, key_digest: str) -> bool:
    return conn.execute("DELETE FROM api_keys WHERE key_digest = ?", (key_digest,)).rowcount > 0


def touch_api_key(conn: Conn, clock: Clock, key_id: str, used_at_us: int) -> None:
    conn.execute(
        "UPDATE api_keys SET last_used_at_us = ? WHERE id = ?"
        " AND (last_used_at_us IS NULL OR last_used_at_us <= ?)",
        (used_at_us, key_id, used_at_us - TOUCH_INTERVAL_US),
    )


def create_session(conn: Conn, clock: Clock, token_digest: str, session: SessionRow) -> None:
    conn.execute("DELETE FROM sessions WHERE expires_at_us < ?", (clock(),))
    conn.execute(
        "INSERT INTO sessions(token_digest, user_id, created_at_us, expires_at_us)"
        " VALUES (?,?,?,?)",
        (token_digest, session.user_id, session.created_at_us, session.expires_at_us),
    )


def delete_session(conn: Conn, clock: Clock, token_digest: str) -> bool:
    return conn.execute("DELETE FROM sessions WHERE token_digest = ?", (token_digest,)).rowcount > 0


def create_ticket(conn: Conn, clock: Clock, ticket_digest: str, ticket: TicketRow) -> None:
    conn.execute("DELETE FROM auth_tickets WHERE expires_at_us < ?", (clock() - TICKET_GRACE_US,))
    conn.execute(
        "INSERT INTO auth_tickets(ticket_digest, pathname, auth_type, principal_id,"
        " credential_digest, expires_at_us) VALUES (?,?,?,?,?,?)",
        (
            ticket_digest,
            ticket.pathname,
            ticket.auth_type,
            ticket.principal_id,
            ticket.credential_digest,
            ticket.expires_at_us,
        ),
    )


def take_ticket(conn: Conn, clock: Clock, ticket_digest: str) -> TicketRow | None:
    row = conn.execute(
        "DELETE FROM auth_tickets WHERE ticket_digest = ?"
        " RETURNING pathname, auth_type, principal_id, credential_digest, expires_at_us",
        (ticket_digest,),
    ).fetchone()
    return TicketRow(*row) if row is not None else None


ATTEMPTS_KEPT_US = 3_600_000_000
"""Login attempts are kept an hour at most: no attempt window may be longer."""


def take_attempt(
    conn: Conn, clock: Clock, attempt_id: str, windows: list[tuple[str, int, int]]
) -> int:
    """Count one attempt under each ``(key digest, limit, window µs)`` — in all of them, or,
    when one already holds ``limit`` attempts of the last ``window`` µs, in none: 0 when
    counted, else the µs until the fullest has room. Check and count are one step under
    the account lock, so concurrent attempts through any node never all pass a check made
    before any of them was counted (spec 10 §10.11)."""
    if conn.sql.lock_accounts is not None:
        conn.execute(conn.sql.lock_accounts)
    now = clock()
    conn.execute("DELETE FROM auth_attempts WHERE at_us <= ?", (now - ATTEMPTS_KEPT_US,))
    wait = 0
    for key, limit, window_us in windows:
        if window_us > ATTEMPTS_KEPT_US:
            raise StoreError(f"an attempt window may be {ATTEMPTS_KEPT_US} µs at most")
        count, oldest = conn.execute(
            "SELECT COUNT(*), MIN(at_us) FROM auth_attempts WHERE key_digest = ? AND at_us > ?",
            (key, now - window_us),
        ).fetchone()
        if count >= limit:
            wait = max(wait, int(oldest) + window_us - now)
    if wait:
        return wait
    conn.executemany(
        "INSERT INTO auth_attempts(attempt_id, key_digest, at_us) VALUES (?, ?, ?)",
        [(attempt_id, key, now) for key, _, _ in windows],
    )
    return 0


def give_back_attempt(conn: Conn, clock: Clock, attempt_id: str) -> None:
    """Uncount an attempt (a login that succeeded is not counted)."""
    conn.execute("DELETE FROM auth_attempts WHERE attempt_id = ?", (attempt_id,))


# -- reads (conn, *args) ---------------------------------------------------------------------


def get_user(conn: Conn, user_id: str) -> UserRow | None:
    row = conn.execute(f"SELECT {USER_COLUMNS} FROM users WHERE id = ?", (user_id,)).fetchone()
    return _user(row) if row is not None else None


def get_user_by_name(conn: Conn, username: str) -> UserRow | None:
    row = conn.execute(
        f"SELECT {USER_COLUMNS} FROM users WHERE username = ?", (username,)
    ).fetchone()
    return _user(row) if row is not None else None


def list_users(conn: Conn) -> list[UserRow]:
    rows = conn.execute(f"SELECT {USER_COLUMNS} FROM users ORDER BY username").fetchall()
    return [_user(r) for r in rows]


def has_credentials(conn: Conn) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM users) OR EXISTS (SELECT 1 FROM api_keys)"
    ).fetchone()
    return bool(row[0])


def list_api_keys(conn: Conn, user_id: str | None) -> list[ApiKeyRow]:
    if user_id is None:
        rows = conn.execute(
            f"SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at_us, id"
        ).fetchall()
    else:
        rows = conn.execute(
            f"SELECT {KEY_COLUMNS} FROM api_keys WHERE user_id = ? ORDER BY created_at_us, id",
            (user_id,),
        ).fetchall()
    return [_key(r) for r in rows]


def get_api_key(conn: Conn, key_id: str) -> ApiKeyRow | None:
    row = conn.execute(f"SELECT {KEY_COLUMNS} FROM api_keys WHERE id = ?", (key_id,)).fetchone()
    return _key(row) if row is not None else None


def api_key_by_digest(conn: Conn, key_digest: str) -> tuple[ApiKeyRow, UserRow] | None:
    row = conn.execute(
        f"SELECT {KEY_COLUMNS} FROM api_keys WHERE key_digest = ?", (key_digest,)
    ).fetchone()
    if row is None:
        return None
    key = _key(row)
    user = get_user(conn, key.user_id)
    return (key, user) if user is not None else None


def session_by_digest(conn: Conn, token_digest: str) -> tuple[SessionRow, UserRow] | None:
    row = conn.execute(
        "SELECT user_id, created_at_us, expires_at_us FROM sessions WHERE token_digest = ?",
        (token_digest,),
    ).fetchone()
    if row is None:
        return None
    session = SessionRow(*row)
    user = get_user(conn, session.user_id)
    return (session, user) if user is not None else None
