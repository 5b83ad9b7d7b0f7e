"""Search tests (spec 08 §8.14) run against the real server of the spec 08 black-box
fixtures (``tests/server/conftest.py``): a real uvicorn on 127.0.0.1 serving a real Runtime,
on both stores."""

from __future__ import annotations

from server.conftest import Api, api, make_api

__all__ = ["Api", "api", "make_api"]
