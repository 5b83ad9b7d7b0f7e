"""Start-up refusal rules of spec 10 §10.1 (exit code 2 before listening).

``threadloom serve`` opens its store with :func:`open_checked_store` before binding: the
store is claimed for the process, then :func:`check_startup` applies the rules — a
server on a non-loopback address with no credential at all (no user row, no API key, no
``THREADLOOM_ADMIN_TOKEN``) refuses to start, and the message says how to create one.
"""

from __future__ import annotations

from threadloom.server.settings import ServerSettings, SettingsError, is_loopback_host
from threadloom.store import open_store
from threadloom.store.base import Store

NO_CREDENTIAL = """refusing to listen on {host}: it is not a loopback address and no credential \
is configured, so anyone who can reach it could use the API.
Create an admin and a key first (same --store as the server):
  threadloom users create admin --role admin --password-stdin
  threadloom keys create admin --name first-key
or set THREADLOOM_ADMIN_TOKEN to a secret of at least 32 characters.
To try it on this machine only, listen on 127.0.0.1."""


def _listen_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


async def startup_refusal(settings: ServerSettings, store: Store) -> str | None:
    """Why this server must not start, or None."""
    try:
        settings.check()
    except SettingsError as exc:
        return str(exc)
    if is_loopback_host(_listen_host(settings.host)) or settings.admin_token is not None:
        return None
    if await store.has_credentials():
        return None
    return NO_CREDENTIAL.format(host=settings.host)


async def check_startup(settings: ServerSettings, store: Store | None = None) -> None:
    """Raise ``SettingsError`` (exit code 2) when the server must not start. Opens the
    store named by ``settings.store`` for the check when none is given."""
    opened = store if store is not None else await open_store(settings.store)
    try:
        problem = await startup_refusal(settings, opened)
    finally:
        if store is None:
            await opened.close()
    if problem is not None:
        raise SettingsError(problem)


async def open_checked_store(settings: ServerSettings) -> Store:
    """The store of ``settings``, claimed for this process (a second process on an SQLite
    file is refused: ``StoreLocked``, spec 12 §12.1 rule 4) and checked (``check_startup``);
    closed again when the server must not start. The server's Runtime then opens on it."""
    replica: dict[str, object] = {}
    if settings.read_url is not None:  # a PostgreSQL store's (``ServerSettings.check``)
        replica = {"read_url": settings.read_url, "read_wait_s": settings.read_wait_ms / 1000}
    store = await open_store(
        settings.store, node_id=settings.node_id, node_ttl_s=settings.node_ttl_s, **replica
    )
    try:
        await store.claim_runner()
        await check_startup(settings, store)
    except BaseException:
        await store.close()
        raise
    return store
