"""The Runtime: owns live threads (the execution loop joins it with the engine issue)."""

from __future__ import annotations

from threadloom.engine.run.runtime import Runtime

__all__ = ["Runtime"]
