"""Client tests run against the real server of the spec 08 black-box fixtures
(``tests/server/conftest.py``): a real uvicorn on 127.0.0.1 serving a real Runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from server.conftest import Api, api, make_api
from threadloom.client import AsyncClient

__all__ = ["Api", "api", "make_api"]


@pytest.fixture
async def client(api: Api) -> AsyncIterator[AsyncClient]:
    """An ``AsyncClient`` authenticated as alice."""
    async with AsyncClient(api.base, token=api.keys["alice"]) as made:
        yield made
