"""What a running execution exposes to its tools and hooks (spec 04 §4.16.1).

``ExecutionState`` is the ``execution`` of an in-flow ThreadState. The engine owns and
mutates it; tools and hooks read it. Its ``message_history`` is live (spec 02 §2.3.5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from threadloom.records import ToolCall
from threadloom.thread.history import MessageHistory

Side = Literal["a", "b"]


@dataclass(eq=False)
class ExecutionState:
    """One run of the engine on one thread (a nested sub-prompt gets its own)."""

    run_id: str
    current_side: Side
    prompt: str | None
    prompt_path: tuple[str, ...]
    depth: int
    message_history: MessageHistory
    step_count: int = 0
    side_step_counts: dict[str, int] = field(default_factory=lambda: {"a": 0, "b": 0})
    current_tool_call: ToolCall | None = None
    parent_id: str | None = None
    prompt_hooks: Sequence[str] = ()
    root_message_id: str | None = None
    # Requests made in-flow, read by the loop at its checkpoints.
    stop_session_result: str | None = None
    stop_session_requested: bool = False
    terminate_requested: bool = False
    parent_notifications: list[dict[str, Any]] = field(default_factory=list)
    queued_calls: list[ToolCall] = field(default_factory=list)
    """Calls added by ``queue_tool`` during the current step (run after the model's)."""
    step: Any = None
    """The step running now (the engine's ``StepEnv``), for ``invoke_tool``."""

    @property
    def prompt_name(self) -> str | None:
        return self.prompt

    def record_parent_notification(self, content: str) -> None:
        """``notify_parent`` during a tool call: the call's stored result carries it."""
        call = self.current_tool_call
        self.parent_notifications.append(
            {
                "content": content,
                "tool_call_id": call.id if call else None,
                "tool_name": call.function.name if call else None,
            }
        )
