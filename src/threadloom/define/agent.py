"""Agent and Side definitions (spec 04 §4.6): immutable pydantic models users write."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Definition(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ParentHook(_Definition):
    """A hook every parent of this agent must run (spec 03 §3.3 rule 3)."""

    hook: str
    reason: str = ""
    stage: Literal["before_parent", "after_parent"] = "after_parent"


class Side(_Definition):
    """One side of an agent: prompt-backed, or the human side (only a label)."""

    prompt: str | None = None
    label: str | None = None
    stop_on_response: bool = True
    stop_tool: str | None = None
    stop_tool_response_property: str | None = None
    max_steps: int | None = None


class Agent(_Definition):
    """An agent: who acts on each side of its threads, and the hooks its threads run."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    type: Literal["ai_human", "dual_ai"] = "ai_human"
    title: str | None = None
    description: str = ""
    side_a: Side = Field(default_factory=Side)
    side_b: Side | None = None
    max_session_turns: int = Field(default=250, ge=1, le=250)
    expose_as_tool: bool = False
    tool_description: str = ""
    overlap: Literal["enqueue", "reject", "interrupt"] = "enqueue"
    max_run_steps: int | None = None
    hooks: tuple[str, ...] = ()
    parent_hooks: tuple[ParentHook, ...] = ()

    @property
    def display_title(self) -> str:
        return self.title or self.name
