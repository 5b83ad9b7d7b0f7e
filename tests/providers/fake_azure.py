"""A local fake of Azure OpenAI's data-plane routes (spec 05 §5.12.1).

The OpenAI fake with Azure's rules in front, as Azure documents them: Chat Completions only
at ``/openai/deployments/{deployment}/chat/completions``, the Responses API at
``/openai/responses``, both with an ``api-version`` query parameter (missing → 404
"Resource not found", Azure's answer), authenticated by an ``api-key`` header or an Entra
ID ``Authorization: Bearer`` token (missing or wrong → 401 with Azure's error body).
Accepted requests get the next queued response in the OpenAI shapes (Azure streams the
same chunks and events).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from fake_openai import FakeOpenAIServer, JSONResponse, Recorded

API_KEY = "azure-key-fake"
_ROUTES = (
    re.compile(r"^/openai/deployments/(?P<deployment>[^/]+)/chat/completions$"),
    re.compile(r"^/openai/responses$"),
)


class FakeAzureOpenAI(FakeOpenAIServer):
    """``async with FakeAzureOpenAI() as fake``; ``fake.endpoint`` is the resource
    endpoint (``AZURE_OPENAI_ENDPOINT``); ``tokens`` are the Entra ID tokens it accepts."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: set[str] = set()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def refuse(self, request: Recorded) -> JSONResponse | None:
        url = urlsplit(request.path)
        if not any(route.match(url.path) for route in _ROUTES):
            return JSONResponse(404, {"error": {"code": "404", "message": "Resource not found"}})
        if not parse_qs(url.query).get("api-version"):
            return JSONResponse(404, {"error": {"code": "404", "message": "Resource not found"}})
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        if request.headers.get("api-key") == API_KEY or bearer in self.tokens:
            return None
        message = (
            "Access denied due to invalid subscription key or wrong API endpoint. Make sure"
            " to provide a valid key for an active subscription and use a correct regional"
            " API endpoint for your resource."
        )
        return JSONResponse(401, {"error": {"code": "401", "message": message}})
