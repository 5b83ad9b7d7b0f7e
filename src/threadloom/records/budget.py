"""Budgets and quotas (spec 15): the limits a run, a thread's lifetime or a user's window
may spend, and the spend they are checked against. Plain typed data, no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, model_validator

BudgetScope = Literal["run", "thread"]
QuotaWindow = Literal["hour", "day", "week", "month"]

WINDOW_SECONDS: Final[dict[str, int]] = {
    "hour": 3600,
    "day": 86_400,
    "week": 7 * 86_400,
    "month": 30 * 86_400,
}
"""A quota's window, rolling, in seconds (spec 15 §15.4): ``month`` is 30 days."""

LIMIT_FIELDS: Final = ("usd", "tokens", "requests")


class Limits(BaseModel):
    """Up to three limits, at least one set: USD, tokens and model requests, and the
    share of a limit at which a warning is sent (spec 15 §15.2)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    usd: float | None = None
    tokens: int | None = None
    requests: int | None = None
    warn_at: float = 0.8

    @model_validator(mode="after")
    def _check(self) -> Any:
        if self.usd is None and self.tokens is None and self.requests is None:
            raise ValueError("a budget needs at least one of usd, tokens, requests")
        if self.usd is not None and (not math.isfinite(self.usd) or self.usd < 0):
            raise ValueError("usd must be a number >= 0")
        for name in ("tokens", "requests"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0")
        if not (math.isfinite(self.warn_at) and 0 < self.warn_at <= 1):
            raise ValueError("warn_at must be greater than 0 and at most 1")
        return self

    def limits(self) -> list[tuple[str, float]]:
        """``(dimension, limit)`` for each limit that is set, in ``LIMIT_FIELDS`` order."""
        return [
            (name, float(getattr(self, name)))
            for name in LIMIT_FIELDS
            if getattr(self, name) is not None
        ]


class Budget(Limits):
    """A budget (spec 15 §15.2): the limits of one run (``scope="run"``) or of a thread's
    lifetime counting every descendant thread (``scope="thread"``)."""

    scope: BudgetScope = "run"


class ThreadBudget(Budget):
    """A budget as a thread keeps it (spec 15 §15.3): ``owner`` is the thread whose spend
    (with its descendants') it limits — the thread itself, or the ancestor it was set on."""

    owner: str


class UserQuota(Limits):
    """A user's quota (spec 15 §15.4): the limits of everything the threads of
    ``user_id`` spend over a rolling ``window``."""

    user_id: str
    window: QuotaWindow = "day"


@dataclass
class Spend:
    """What was spent (spec 15 §15.5): the known cost in USD, the tokens, the model
    requests, and how many successful requests had no known cost (never counted as 0)."""

    usd: float = 0.0
    tokens: int = 0
    requests: int = 0
    unknown_cost: int = 0

    def plus(self, other: Spend) -> Spend:
        return Spend(
            self.usd + other.usd,
            self.tokens + other.tokens,
            self.requests + other.requests,
            self.unknown_cost + other.unknown_cost,
        )

    def of(self, dimension: str) -> float:
        """The amount spent in ``dimension`` (``usd``, ``tokens``, ``requests``)."""
        value: float = getattr(self, dimension)
        return value
