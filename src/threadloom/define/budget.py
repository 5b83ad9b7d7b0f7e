"""Budgets on agents (spec 15 §15.2): ``Agent(budget=Budget(usd=1.0))`` limits each run of
the agent's threads; ``Budget(scope="thread", ...)`` a thread's whole lifetime, its
descendants' spend counted. The shape itself is a record (``threadloom.records.Budget``):
the same budget is set at thread creation over HTTP."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from threadloom.records import Budget as Budget
from threadloom.records import ThreadBudget


def budgets_of(value: Any) -> Any:
    """An agent's or a new thread's ``budget``: one budget (or its dict), or several, as a
    tuple; anything else is left for pydantic to refuse."""
    if value is None:
        return ()
    if isinstance(value, Budget | dict):
        return (value,)
    if isinstance(value, list):
        return tuple(value)
    return value


def owned(budgets: Iterable[Budget], owner: str) -> tuple[ThreadBudget, ...]:
    """``budgets`` as the thread ``owner`` keeps them (spec 15 §15.3)."""
    return tuple(ThreadBudget(owner=owner, **b.model_dump(exclude={"owner"})) for b in budgets)
