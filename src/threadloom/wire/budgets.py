"""Budgets and quotas on the wire (spec 15 §15.7): a new thread's ``budget`` (one budget
or several), and the body and answer of a user's quota (``PUT``/``GET``/``DELETE
/api/users/{user_id}/quota``, admins only)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from threadloom.records import Budget, Limits, Spend, UserQuota
from threadloom.records.budget import WINDOW_SECONDS
from threadloom.wire.model import Answer, Body, examples
from threadloom.wire.problems import check, integer_from, refuse

MAX_USD = 1e12
MAX_COUNT = 2**53
MAX_BUDGETS = 16
LIMIT_KEYS = ("usd", "tokens", "requests")
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


def _scope(value: Any) -> str:
    if value not in ("run", "thread"):
        raise refuse("must be run or thread")
    return str(value)


def one_limit(schema: dict[str, Any]) -> None:
    """JSON Schema of "at least one of usd, tokens, requests, not null"."""
    schema["anyOf"] = [
        {"required": [key], "properties": {key: {"not": {"type": "null"}}}} for key in LIMIT_KEYS
    ]


BUDGET_PROBLEM = (
    "must be a budget or a list of at most 16 budgets ({usd, tokens, requests, scope, warn_at};"
    " at least one limit)"
)
_BUDGET_RULES = {
    "usd": _usd,
    "tokens": _count,
    "requests": _count,
    "scope": _scope,
    "warn_at": _warn_at,
}


def _budget(item: dict[str, Any]) -> Budget:
    """One budget of a body: its known keys checked by the rules (others are ignored, spec
    08 §8.1.1 rule 5); at least one limit."""
    fields: dict[str, Any] = {}
    for key, rule in _BUDGET_RULES.items():
        if key in item:
            try:
                fields[key] = rule(item[key])
            except PydanticCustomError as refusal:
                problem = (refusal.context or {}).get("problem", "is invalid")
                raise refuse(f"{BUDGET_PROBLEM}: {key} {problem}") from None
    if all(fields.get(key) is None for key in LIMIT_KEYS):
        raise refuse(f"{BUDGET_PROBLEM}: a budget needs at least one of usd, tokens, requests")
    return Budget(**fields)


def budget_rule(value: Any) -> list[Budget] | None:
    """A new thread's ``budget``: null, one budget object or a list of at most 16."""
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    if len(items) > MAX_BUDGETS or not all(isinstance(item, dict) for item in items):
        raise refuse(BUDGET_PROBLEM)
    return [_budget(item) for item in items]


class BudgetBody(Body):
    """One budget as a request sends it (the schema of ``budget``; spec 15 §15.2)."""

    model_config = examples({"requests": 20}, {"scope": "thread", "usd": 5.0}, extra=one_limit)

    usd: float | None = Field(None, ge=0, le=MAX_USD)
    tokens: int | None = Field(None, ge=0, le=MAX_COUNT)
    requests: int | None = Field(None, ge=0, le=MAX_COUNT)
    scope: Literal["run", "thread"] = "run"
    warn_at: float = Field(0.8, gt=0, le=1)


BudgetField = Annotated[
    BudgetBody | Annotated[list[BudgetBody], Field(max_length=MAX_BUDGETS)] | None,
    check(budget_rule),
    Field(description="Limits of each run, or of the thread's lifetime with its descendants"),
]


class QuotaBody(Body):
    """A user's quota: at least one of ``usd``, ``tokens``, ``requests``, over a rolling
    ``window`` (default ``day``)."""

    model_config = examples(
        {"usd": 5.0, "window": "day"},
        {"tokens": 1_000_000, "requests": 500, "window": "week"},
        extra=one_limit,
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
