"""The engine's tunables (spec 04 §4.1.2): every one is a ``Runtime.open`` option."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineOptions:
    """Tunables of the loop (spec 04 §4.1.2); every one is a ``Runtime.open`` option."""

    max_run_steps: int = 250
    first_chunk_timeout_s: float = 120.0
    stall_timeout_s: float = 45.0
    drain_seconds: float = 30.0
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 60.0
    max_subagent_depth: int = 8
    """Threads nest at most this many levels below a root thread (spec 06 §6.1)."""
    pending_hold_s: float = 0.02
    """How long a model request may run before its pending message is committed; an
    answer that comes sooner is stored with it in one commit (``engine/step/pending.py``).
    0 commits every pending message before its request is sent."""
