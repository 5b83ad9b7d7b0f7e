"""Agent, Side and SessionBinding definitions (spec 04 §4.6): immutable pydantic models.

Construction checks field types only (a bare string is accepted for a session binding);
the shape rules V7–V12 run in ``Definitions.validate()`` so that every problem is reported
at once (§4.2.4). ``max_session_turns=251`` therefore constructs and fails at validation.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from threadloom.define.budget import Budget, budgets_of

#: Agent, prompt, tool and hook names: they may be offered to a model as tool names (§4.2.3).
NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

#: The session bindings of a side, in the order the checks report them.
BINDING_FIELDS: Final = ("session_stop", "session_fail", "session_status")

SideName = Literal["a", "b"]
Problem = tuple[str, str]


class _Definition(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ParentHook(_Definition):
    """A hook every parent of this agent must run (spec 03 §3.3 rule 3)."""

    hook: str
    reason: str = ""
    stage: Literal["before_parent", "after_parent"] = "after_parent"


class SessionBinding(_Definition):
    """A tool whose successful call ends or labels the session (§4.6.3)."""

    name: str
    message_property: str | None = None
    attachments_property: str | None = None


def _binding(value: object) -> object:
    """A bare tool name is the same as ``SessionBinding(name=...)`` (§4.6.3)."""
    return SessionBinding(name=value) if isinstance(value, str) else value


class Side(_Definition):
    """One side of an agent: prompt-backed, or the human side (only a label, §4.6.2)."""

    prompt: str | None = None
    label: str | None = None
    stop_on_response: bool = True
    stop_tool: str | None = None
    stop_tool_response_property: str | None = None
    max_steps: int | None = None
    session_stop: SessionBinding | None = None
    session_fail: SessionBinding | None = None
    session_status: SessionBinding | None = None

    @field_validator(*BINDING_FIELDS, mode="before")
    @classmethod
    def _bindings(cls, value: object) -> object:
        return _binding(value)

    @property
    def is_human(self) -> bool:
        """True when no prompt backs this side."""
        return self.prompt is None

    def non_label_fields(self) -> list[str]:
        """Fields other than ``label`` that differ from their defaults (V7 on a human side)."""
        return [
            field
            for field, info in type(self).model_fields.items()
            if field != "label"
            and getattr(self, field) != info.get_default(call_default_factory=True)
        ]

    def bindings(self) -> list[tuple[str, SessionBinding]]:
        """``(field, binding)`` for each session binding that is set, in field order."""
        found = [(field, getattr(self, field)) for field in BINDING_FIELDS]
        return [(field, binding) for field, binding in found if binding is not None]


class Agent(_Definition):
    """An agent: who acts on each side of its threads, and the hooks its threads run."""

    name: str
    type: Literal["ai_human", "dual_ai"] = "ai_human"
    title: str | None = None
    description: str = ""
    # The spec makes side_a required; it defaults to a bare Side() so that registries
    # holding no prompts at all (threads without an engine) keep working (see registry).
    side_a: Side = Field(default_factory=Side)
    side_b: Side | None = None
    max_session_turns: int = 250
    expose_as_tool: bool = False
    tool_description: str = ""
    overlap: Literal["enqueue", "reject", "interrupt"] = "enqueue"
    max_run_steps: int | None = None
    on_lost: Literal["settle", "resume"] = "settle"
    """What start-up recovery and the sweeper do with a run lost in a crash (spec 16):
    ``settle`` it ``failed``/``execution_lost`` (spec 04 §4.24), or settle it and
    ``resume`` it from the stored history."""
    max_resumes: int = 3
    """Resumes in a row after which a lost run is settled for good (spec 16 §16.5)."""
    hooks: tuple[str, ...] = ()
    parent_hooks: tuple[ParentHook, ...] = ()
    budget: tuple[Budget, ...] = ()
    """The agent's budgets (spec 15 §15.2): one ``Budget`` or several."""

    @field_validator("budget", mode="before")
    @classmethod
    def _budgets(cls, value: object) -> object:
        return budgets_of(value)

    @model_validator(mode="before")
    @classmethod
    def _default_title(cls, data: Any) -> Any:
        """``title`` defaults to the name (§4.6.1)."""
        if (
            isinstance(data, dict)
            and data.get("title") is None
            and isinstance(data.get("name"), str)
        ):
            return {**data, "title": data["name"]}
        return data

    @property
    def display_title(self) -> str:
        """The title shown to people: ``title``, else the name."""
        return self.title or self.name

    def side(self, which: SideName) -> Side | None:
        """The ``Side`` acting as ``which``; the human side b of ``ai_human`` is ``Side()``."""
        if which == "a":
            return self.side_a
        if which == "b":
            if self.side_b is None and self.type == "ai_human":
                return Side()
            return self.side_b
        raise ValueError(f"side must be 'a' or 'b', not {which!r}")

    def prompt_sides(self) -> list[tuple[SideName, Side]]:
        """The sides backed by a prompt, a before b (side b of ``ai_human`` is human)."""
        sides: list[tuple[SideName, Side | None]] = [("a", self.side_a)]
        if self.type == "dual_ai":
            sides.append(("b", self.side_b))
        return [(x, s) for x, s in sides if s is not None and s.prompt is not None]

    def self_problems(self, *, require_prompts: bool = True) -> list[Problem]:
        """Checks that need no other definition: V1, V7, V9, V10, V12 (§4.2.4).

        ``require_prompts=False`` skips "this side must name a prompt" for registries that
        hold no prompt at all (see ``Definitions.validate``).
        """
        where = f'Agent "{self.name}"'
        problems: list[Problem] = []
        if not NAME_PATTERN.fullmatch(self.name):
            problems.append(("V1", f'Agent name "{self.name}" is invalid'))
        problems.extend(
            ("V7", f"{where}: {reason}") for reason in self._shape_problems(require_prompts)
        )
        if not 1 <= self.max_session_turns <= 250:
            problems.append(("V9", f"{where}: max_session_turns must be between 1 and 250"))
        if self.expose_as_tool and not self.tool_description.strip():
            problems.append(("V10", f"{where}: expose_as_tool requires tool_description"))
        for which, side in (("a", self.side_a), ("b", self.side_b)):
            if side is not None and side.max_steps is not None and side.max_steps < 1:
                problems.append(("V12", f"{where}: side {which} max_steps must be >= 1"))
        if self.max_run_steps is not None and self.max_run_steps < 1:
            problems.append(("V12", f"{where}: max_run_steps must be >= 1"))
        if self.max_resumes < 1:
            problems.append(("V12", f"{where}: max_resumes must be >= 1"))
        return problems

    def _shape_problems(self, require_prompts: bool) -> list[str]:
        """Reasons the sides do not match ``type`` (V7, §4.6.1)."""
        reasons: list[str] = []
        if self.side_a.prompt is None and require_prompts:
            reasons.append("side_a must name a prompt")
        if self.type == "ai_human":
            if self.side_b is not None and self.side_b.non_label_fields():
                reasons.append(
                    "side_b of an ai_human agent is the human side and only takes a label"
                )
        elif self.side_b is None:
            reasons.append("a dual_ai agent requires side_b with a prompt")
        elif self.side_b.prompt is None and require_prompts:
            reasons.append("side_b of a dual_ai agent must name a prompt")
        for which, side in (("a", self.side_a), ("b", self.side_b)):
            if side is not None and side.stop_tool_response_property and not side.stop_tool:
                reasons.append(f"side {which} stop_tool_response_property requires stop_tool")
        return reasons
