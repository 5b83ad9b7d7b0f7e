"""Requests whose target reaches the server byte for byte: httpx resolves ``.``/``..``
segments before sending, httpcore does not."""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpcore
import httpx

if TYPE_CHECKING:
    from conftest import Api


async def raw_request(
    api: Api,
    method: str,
    target: str,
    body: bytes | None = None,
    content_type: str | None = None,
    user: str = "alice",
) -> tuple[int, dict[str, str], bytes]:
    """``method target`` sent byte for byte: status, headers (lower-case keys), body."""
    base = httpx.URL(api.base)
    url = httpcore.URL(scheme=b"http", host=base.host.encode(), port=base.port, target=target)
    headers = [(b"Authorization", f"Bearer {api.keys[user]}".encode())]
    if content_type is not None:
        headers.append((b"Content-Type", content_type.encode()))
    async with httpcore.AsyncConnectionPool() as pool:
        response = await pool.request(method, url, headers=headers, content=body)
        found = {k.decode().lower(): v.decode("latin-1") for k, v in response.headers}
        return response.status, found, response.content
