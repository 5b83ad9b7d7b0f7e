"""The AG-UI endpoint, ``POST /api/agui/{agent}`` (``routes.py``; docs/interop.md).

The route is declared here and its implementation imported at its first request, so a
server that is never asked pays nothing for the ``ag-ui-protocol`` package (the
``threadloom[agui]`` extra); without the package the route answers 501 saying what to
install.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from threadloom.server.errors import ApiError
from threadloom.server.routing import Router

router = Router(tags=["ag-ui"])


@router.post(
    "/api/agui/{agent}",
    summary="Run an agent with the AG-UI protocol (RunAgentInput in, AG-UI events out)",
)
async def agui_run(agent: str, request: Request) -> Any:
    try:
        from threadloom.server.agui.routes import run_agent
    except ImportError:
        raise ApiError(
            501,
            "not_implemented",
            "The AG-UI endpoint needs the AG-UI protocol package: pip install 'threadloom[agui]'",
        ) from None
    return await run_agent(agent, request)


def install(app: FastAPI) -> None:
    """Serve ``POST /api/agui/{agent}`` on ``app``."""
    app.include_router(router)
