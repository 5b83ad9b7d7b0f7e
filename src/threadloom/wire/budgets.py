"""Budgets and quotas on the wire (spec 15 §15.7): a new thread's ``budget`` (one budget
or several), and the body and answer of a user's quota (``PUT``/``GET``/``DELETE
/api/users/{user_id}/quota``, admins only)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, model_validator

from threadloom.records import Budget, Limits, Spend, UserQuota
from threadloom.records.budget import WINDOW_SECONDS
from threadloom.wire.model import Answer, Body, examples
from threadloom.wire.problems import check, integer_from, refuse

BUDGET_PROBLEM = (
    "must be a budget or a list of budgets ({usd, tokens, requests, scope, warn_at}; at least"
    " one limit)"
)


def _first(error: ValidationError) -> str:
    item = error.errors(include_url=False)[0]
    text = str(item["msg"]).removeprefix("Value error, ")
    where = ".".join(str(part) for part in item["loc"])
    return f"{where} {text}" if where else text


def budget_rule(value: Any) -> list[Budget] | None:
    """A new thread's ``budget``: null, one budget object or a list of at most 16."""
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    if len(items) > 16 or not all(isinstance(item, dict) for item in items):
        raise refuse(BUDGET_PROBLEM)
    try:
        return [Budget.model_validate(item) for item in items]
    except ValidationError as exc:
        raise refuse(f"{BUDGET_PROBLEM}: {_first(exc)}") from None


BudgetField = Annotated[
    Budget | list[Budget] | None,
    check(budget_rule),
    Field(description="Limits of each run, or of the thread's lifetime with its descendants"),
]


MAX_USD = 1e12
MAX_COUNT = 2**53
_count = integer_from(0, MAX_COUNT)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _usd(value: Any) -> float | None:
    if value is not None and (not _number(value) or not 0 <= value <= MAX_USD):
        raise refuse(f"must be a number from 0 to {MAX_USD:.0e} or null")
    return None if value is None else float(value)


def _window(value: Any) -> str:
    if not isinstance(value, str) or value not in WINDOW_SECONDS:
        raise refuse("must be one of hour, day, week, month")
    return str(value)


def _warn_at(value: Any) -> float:
    if not _number(value) or not 0 < value <= 1:
        raise refuse("must be a number greater than 0 and at most 1")
    return float(value)


class QuotaBody(Body):
    """A user's quota: at least one of ``usd``, ``tokens``, ``requests``, over a rolling
    ``window`` (default ``day``)."""

    model_config = examples(
        {"usd": 5.0, "window": "day"}, {"tokens": 1_000_000, "requests": 500, "window": "week"}
    )

    usd: Annotated[float | None, check(_usd)] = Field(None, ge=0, le=MAX_USD)
    tokens: Annotated[int | None, check(_count)] = Field(None, ge=0, le=MAX_COUNT)
    requests: Annotated[int | None, check(_count)] = Field(None, ge=0, le=MAX_COUNT)
    window: Annotated[Literal["hour", "day", "week", "month"], check(_window)] = "day"
    warn_at: Annotated[float, check(_warn_at)] = Field(0.8, gt=0, le=1)

    @model_validator(mode="after")
    def _one_limit(self) -> QuotaBody:
        if self.usd is None and self.tokens is None and self.requests is None:
            raise refuse(
                "must be set: a quota needs at least one of usd, tokens, requests",
                "A quota needs at least one of usd, tokens, requests",
                at="usd",
            )
        return self

    def quota(self, user_id: str) -> UserQuota:
        """The quota this body sets."""
        return UserQuota(
            user_id=user_id,
            usd=self.usd,
            tokens=self.tokens,
            requests=self.requests,
            window=self.window,
            warn_at=self.warn_at,
        )


class SpendAnswer(Answer):
    usd: float
    tokens: int
    requests: int
    unknown_cost: int
    """Successful requests whose cost is unknown (their model has no price)."""


class QuotaAnswer(Answer):
    """A user's quota (``null``: none) and what their threads spent in its window."""

    user_id: str
    quota: dict[str, Any] | None
    spent: SpendAnswer | None


def quota_answer(user_id: str, quota: Limits | None, spent: Spend | None) -> QuotaAnswer:
    return QuotaAnswer(
        user_id=user_id,
        quota=None if quota is None else quota.model_dump(exclude={"user_id"}),
        spent=None
        if spent is None
        else SpendAnswer(
            usd=spent.usd,
            tokens=spent.tokens,
            requests=spent.requests,
            unknown_cost=spent.unknown_cost,
        ),
    )
