"""The budgets of a run (spec 15): which limits it runs under, what they had spent when it
began, what it spends as it goes, the warning at a limit's threshold and the stop before a
model request once a limit is reached.

A run whose agent, thread and user have no budget reads nothing and checks nothing
(``open_budget`` returns ``None``). With one, the spend a limit counts is read once when
the run begins — a thread's lifetime from its LLM rows and its descendants', a user's
window from their threads' — and each model request of the run is added as it completes
(``RunBudget.spent``); only a lifetime limit of a thread that has children is read again
before each step, since its children spend while it runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from threadloom.define.budget import owned
from threadloom.records import Budget, LogRow, Spend, StatusError, ThreadBudget, UserQuota
from threadloom.records.budget import WINDOW_SECONDS, Limits
from threadloom.store.base import Store, ThreadRow

QUOTA_REFRESH_S: Final = 30.0
"""How long the user quotas read from the store are used before they are read again (an
admin's change made through another process reaches runs here within this time)."""

UNITS: Final = {"usd": "", "tokens": " tokens", "requests": " model requests"}
WINDOW_NAMES: Final = {"hour": "hourly", "day": "daily", "week": "weekly", "month": "monthly"}


class Quotas:
    """The user quotas (spec 15 §15.4), read from the store at most once per
    ``QUOTA_REFRESH_S``: a run of a user without a quota then reads nothing for them."""

    def __init__(self) -> None:
        self._quotas: dict[str, UserQuota] | None = None
        self._read_at = 0.0

    async def of(self, store: Store, user_id: str) -> UserQuota | None:
        now = time.monotonic()
        if self._quotas is None or now - self._read_at > QUOTA_REFRESH_S:
            self._quotas = {q.user_id: q for q in await store.list_user_quotas()}
            self._read_at = now
        return self._quotas.get(user_id)

    def changed(self, user_id: str, quota: UserQuota | None) -> None:
        """A quota this process set (or removed): used from the next run on."""
        if self._quotas is None:
            return
        if quota is None:
            self._quotas.pop(user_id, None)
        else:
            self._quotas[user_id] = quota


def amount(dimension: str, value: float) -> str:
    """``$0.25``, ``1,200 tokens``, ``3 model requests``."""
    if dimension == "usd":
        return f"${value:.6g}"
    return f"{int(value):,}{UNITS[dimension]}"


@dataclass
class Limit:
    """One budget or quota a run is checked against (spec 15 §15.5)."""

    scope: str
    """``run``, ``thread`` (a thread's lifetime, descendants included) or ``user``."""
    limits: Limits
    owner: str | None = None
    """The thread (``thread``) or the user (``user``) whose spend is counted."""
    base: Spend = field(default_factory=Spend)
    """What was spent when the limit was read (nothing for ``run``)."""
    added: Spend = field(default_factory=Spend)
    """What this run spent since."""
    warned: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        if self.scope == "run":
            return "the run's budget"
        if self.scope == "thread":
            return f"the lifetime budget of thread {self.owner}"
        window = getattr(self.limits, "window", "day")
        return f"the {WINDOW_NAMES[window]} quota of user {self.owner}"

    def total(self) -> Spend:
        return self.base.plus(self.added)


class RunBudget:
    """The limits of one run and what it spends under them."""

    def __init__(self, limits: list[Limit], thread_id: str, publish: Callable[..., None]) -> None:
        self.limits = limits
        self.thread_id = thread_id
        self.publish = publish
        self.unsent: list[dict[str, Any]] = []
        """Warnings not yet written to the webhook outbox (``send_warnings``, spec 19)."""

    def spent(self, row: LogRow) -> None:
        """A model request of this run completed (or failed) with the LLM row ``row``."""
        tokens = row.total_tokens or 0
        cost = row.cost_total
        unknown = cost is None and row.is_complete and row.error is None
        for limit in self.limits:
            added = limit.added
            added.requests += 1
            added.tokens += tokens
            if cost is not None:
                added.usd += cost
            elif unknown:
                added.unknown_cost += 1
                if limit.limits.usd is not None and "unknown" not in limit.warned:
                    limit.warned.add("unknown")
                    self._warning(limit, "usd", f"The cost of model {row.model} is unknown")
        self._warnings()

    async def send_warnings(self, store: Store) -> None:
        """Write the warnings published since the last call to the webhook outbox as
        ``budget.warning`` events (spec 19 §19.2): before the next model request, and when
        the run ends."""
        unsent, self.unsent = self.unsent, []
        for data in unsent:
            await store.emit_webhook("budget.warning", data)

    async def check(self, store: Store, has_children: bool) -> StatusError | None:
        """Before a model request: the error of the first limit reached, else ``None``
        (with the warnings of the limits past their threshold sent)."""
        if self.unsent:
            await self.send_warnings(store)
        if has_children:
            for limit in self.limits:
                if limit.scope == "thread" and limit.owner is not None:
                    limit.base, limit.added = await store.thread_spend(limit.owner), Spend()
        for limit in self.limits:
            spent = limit.total()
            for dimension, value in limit.limits.limits():
                if spent.of(dimension) >= value:
                    return self._exceeded(limit, dimension, value, spent)
        self._warnings()
        return None

    def _exceeded(self, limit: Limit, dimension: str, value: float, spent: Spend) -> StatusError:
        text = (
            f"Budget exceeded: {limit.name} allows {amount(dimension, value)};"
            f" {amount(dimension, spent.of(dimension))} spent"
        )
        if dimension == "usd" and spent.unknown_cost:
            text += f"; {spent.unknown_cost} requests of unknown cost are not counted"
        return StatusError(type="BudgetExceeded", message=text, retryable=False)

    def _warnings(self) -> None:
        for limit in self.limits:
            spent = limit.total()
            for dimension, value in limit.limits.limits():
                if dimension in limit.warned:
                    continue
                if spent.of(dimension) >= value * limit.limits.warn_at:
                    limit.warned.add(dimension)
                    self._warning(limit, dimension, None)

    def _warning(self, limit: Limit, dimension: str, note: str | None) -> None:
        spent = limit.total()
        value = getattr(limit.limits, dimension)
        text = note or (
            f"Budget warning: {amount(dimension, spent.of(dimension))} spent of the"
            f" {amount(dimension, value)} {limit.name} allows"
        )
        if note is None and dimension == "usd" and spent.unknown_cost:
            text += f" ({spent.unknown_cost} requests of unknown cost not counted)"
        warning = {
            "budget": limit.name,
            "scope": limit.scope,
            "owner": limit.owner,
            "dimension": dimension,
            "spent": spent.of(dimension),
            "limit": value,
            "threshold": limit.limits.warn_at,
            "unknown_cost": spent.unknown_cost,
            "message": text,
        }
        self.publish("budget_warning", **warning)
        self.unsent.append({"thread_id": self.thread_id, **warning})


def lifetime_budgets(budgets: Iterable[Budget], owner: str) -> tuple[ThreadBudget, ...]:
    """The ``thread``-scope ones of ``budgets`` (an agent's) as a descendant of ``owner``
    keeps them (spec 15 §15.3)."""
    return owned((b for b in budgets if b.scope == "thread"), owner)


async def open_budget(
    agent: Any,
    row: ThreadRow,
    store: Store,
    quotas: Quotas,
    clock: Callable[[], int],
    publish: Callable[..., None],
) -> RunBudget | None:
    """The budget of a run of ``row`` by ``agent``: ``None`` when no limit applies (then
    nothing was read but, for a thread of a user, the quotas at most every
    ``QUOTA_REFRESH_S``)."""
    own = getattr(agent, "budget", ())
    quota = await quotas.of(store, row.user_id) if row.user_id is not None else None
    if not own and not row.budgets and quota is None:
        return None
    limits: list[Limit] = []
    lifetimes: dict[str, Spend] = {}
    for budget in (*own, *row.budgets):
        owner = getattr(budget, "owner", row.id)
        if budget.scope == "run":
            limits.append(Limit("run", budget))
            continue
        if owner not in lifetimes:
            lifetimes[owner] = await store.thread_spend(owner)
        limits.append(Limit("thread", budget, owner, lifetimes[owner]))
    if quota is not None and row.user_id is not None:
        since = clock() - WINDOW_SECONDS[quota.window] * 1_000_000
        limits.append(Limit("user", quota, row.user_id, await store.user_spend(row.user_id, since)))
    return RunBudget(limits, row.id, publish)
