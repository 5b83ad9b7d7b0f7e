"""The package's version, in a leaf module: what reports it (``threadloom --version``, the
OpenTelemetry tracer, the MCP client's implementation info) reads it from here, below every
room; the package face re-exports it."""

from __future__ import annotations

__version__ = "0.1.0"
