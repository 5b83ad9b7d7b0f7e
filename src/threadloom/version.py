"""The package's version, in a leaf module: what reports it (``threadloom --version``, the
OpenTelemetry tracer, the MCP client's implementation info) reads it without importing
the package face ``threadloom/__init__.py``, which loads the runtime."""

from __future__ import annotations

__version__ = "0.1.0"
