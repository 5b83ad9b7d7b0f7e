"""The project's agents as tools of an MCP server at ``/mcp`` (``endpoint.py``)."""

from __future__ import annotations

from threadloom.server.mcp.endpoint import install

__all__ = ["install"]
