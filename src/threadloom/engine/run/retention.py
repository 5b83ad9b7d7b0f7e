"""Retention (spec 17 §17.2): the settings that bound what a store keeps, and the pass
that applies them.

Six rules, each off unless set (``RetentionPolicy``, or the ``THREADLOOM_RETENTION_*``
variables): root threads with no activity for N days, terminated threads N days after
their termination, the root threads of a user beyond the newest N, the bodies of log
rows after N days, and the webhook outbox's delivered rows and dead letters after N days
each (never a pending one). A thread rule deletes a root thread with its descendants (the cascade of
``Store.delete_thread``: messages, queue, logs, files, events, approvals, shared state,
children), one transaction per tree, and never a tree with a ``running`` thread or queued
messages. The log-body rule keeps the rows (tokens, cost, timings) and deletes only their
request and response bodies.

A pass (``apply_retention``) runs on one node at a time (``Cluster.exclusive``: on
PostgreSQL a session advisory lock; where one process runs the store, that process);
every runtime that runs its store's threads runs one every ``interval_s`` seconds
(``RetentionSweeper``), and ``threadloom retention`` runs one from the command line. A
dry run reads what a pass would delete and deletes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from threadloom.errors import InvalidArgument
from threadloom.node.cluster import Cluster
from threadloom.store.base import Clock, ExpiryCandidate, ExpiryRule, Store

log = logging.getLogger("threadloom.retention")

DAY_US = 86_400_000_000

_ENV = {
    "inactive_days": "THREADLOOM_RETENTION_INACTIVE_DAYS",
    "terminated_days": "THREADLOOM_RETENTION_TERMINATED_DAYS",
    "threads_per_user": "THREADLOOM_RETENTION_THREADS_PER_USER",
    "log_body_days": "THREADLOOM_RETENTION_LOG_BODY_DAYS",
    "webhook_delivered_days": "THREADLOOM_RETENTION_WEBHOOK_DELIVERED_DAYS",
    "webhook_dead_days": "THREADLOOM_RETENTION_WEBHOOK_DEAD_DAYS",
    "interval_s": "THREADLOOM_RETENTION_INTERVAL_SECONDS",
}

OUTBOX_RULES = {"webhook_delivered_days": "delivered", "webhook_dead_days": "dead"}
"""The outbox rules (spec 17 §17.2.3 rule 7), in the order a pass applies them, with the
state of the rows each prunes; a ``pending`` row is never pruned."""

OnDeleted = Callable[[dict[str, str | None]], Awaitable[None]]
"""Told each tree a pass deleted: ids (deepest first, the root last) with their owners."""


def _days(name: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not (
        isinstance(value, int | float) and value > 0 and math.isfinite(value)
    ):
        raise InvalidArgument(f"retention {name} must be a positive number of days, not {value!r}")


@dataclass(frozen=True)
class RetentionPolicy:
    """What a store keeps (spec 17 §17.2). Every rule defaults to off (``None``): a
    policy that sets none deletes nothing."""

    inactive_days: float | None = None
    """Root threads (with their descendants) whose last activity is older than this go
    (``THREADLOOM_RETENTION_INACTIVE_DAYS``)."""
    terminated_days: float | None = None
    """Root threads terminated longer ago than this go
    (``THREADLOOM_RETENTION_TERMINATED_DAYS``)."""
    threads_per_user: int | None = None
    """Each owner keeps its newest this many root threads; older ones go
    (``THREADLOOM_RETENTION_THREADS_PER_USER``)."""
    log_body_days: float | None = None
    """Log rows older than this lose their request and response bodies; the rows stay
    (``THREADLOOM_RETENTION_LOG_BODY_DAYS``)."""
    interval_s: float | None = 3600.0
    """Seconds between two passes of a runtime's sweeper; ``None``: none (passes run only
    when asked: ``Runtime.apply_retention``, ``threadloom retention``)
    (``THREADLOOM_RETENTION_INTERVAL_SECONDS``)."""
    batch: int = 100
    """Root threads read per page, and log rows stripped per transaction."""
    webhook_delivered_days: float | None = None
    """Webhook outbox rows delivered longer ago than this go
    (``THREADLOOM_RETENTION_WEBHOOK_DELIVERED_DAYS``)."""
    webhook_dead_days: float | None = None
    """Dead webhook deliveries (the dead-letter list) whose last attempt was due longer ago
    than this go; unset, a dead letter stays until it is delivered again or its
    subscription is deleted (``THREADLOOM_RETENTION_WEBHOOK_DEAD_DAYS``)."""

    def __post_init__(self) -> None:
        _days("inactive_days", self.inactive_days)
        _days("terminated_days", self.terminated_days)
        _days("log_body_days", self.log_body_days)
        _days("webhook_delivered_days", self.webhook_delivered_days)
        _days("webhook_dead_days", self.webhook_dead_days)
        per_user = self.threads_per_user
        if per_user is not None and (
            isinstance(per_user, bool) or not isinstance(per_user, int) or per_user < 1
        ):
            raise InvalidArgument(
                f"retention threads_per_user must be a whole number, 1 or more, not {per_user!r}"
            )
        if self.interval_s is not None and not (
            self.interval_s > 0 and math.isfinite(self.interval_s)
        ):
            raise InvalidArgument(
                f"retention interval_s must be a positive number of seconds, not"
                f" {self.interval_s!r}"
            )
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 1:
            raise InvalidArgument(f"retention batch must be 1 or more, not {self.batch!r}")

    @property
    def enabled(self) -> bool:
        """Whether any rule is set."""
        return any(
            v is not None
            for v in (
                self.inactive_days,
                self.terminated_days,
                self.threads_per_user,
                self.log_body_days,
                self.webhook_delivered_days,
                self.webhook_dead_days,
            )
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RetentionPolicy:
        """The policy the ``THREADLOOM_RETENTION_*`` variables give (unset or empty: off;
        ``off`` for the interval: no sweeper)."""
        values: dict[str, Any] = {}
        for name, key in _ENV.items():
            raw = (env.get(key) or "").strip()
            if not raw:
                continue
            if name == "interval_s" and raw.lower() == "off":
                values[name] = None
                continue
            if name == "threads_per_user":
                if not raw.isdigit() or int(raw) < 1:
                    raise InvalidArgument(f"{key} must be a whole number, 1 or more, not {raw!r}")
                values[name] = int(raw)
                continue
            try:
                number = float(raw)
            except ValueError:
                number = float("nan")
            if not (number > 0 and math.isfinite(number)):
                unit = "seconds (or off)" if name == "interval_s" else "days"
                raise InvalidArgument(f"{key} must be a positive number of {unit}, not {raw!r}")
            values[name] = number
        return cls(**values)

    def thread_rules(self, now_us: int) -> list[tuple[str, ExpiryRule]]:
        """The thread rules set, in the order a pass applies them, with their cutoffs."""
        rules: list[tuple[str, ExpiryRule]] = []
        if self.inactive_days is not None:
            cutoff = now_us - round(self.inactive_days * DAY_US)
            rules.append(("inactive_days", ExpiryRule("inactive", before_us=cutoff)))
        if self.terminated_days is not None:
            cutoff = now_us - round(self.terminated_days * DAY_US)
            rules.append(("terminated_days", ExpiryRule("terminated", before_us=cutoff)))
        if self.threads_per_user is not None:
            rules.append(("threads_per_user", ExpiryRule("per_user", keep=self.threads_per_user)))
        return rules


@dataclass
class RuleOutcome:
    """What one rule of a pass deleted (or, in a dry run, would delete)."""

    rule: str
    """The setting: ``inactive_days``, ``terminated_days``, ``threads_per_user`` or
    ``log_body_days``."""
    threads: int = 0
    """Root threads deleted."""
    descendants: int = 0
    """Their descendants, deleted with them."""
    kept_active: int = 0
    """Root threads the rule named but kept: a thread of their tree was running or had
    queued messages (or, in a real pass, changed after the read)."""
    log_rows: int = 0
    """``log_body_days``: log rows whose bodies were deleted."""
    outbox_rows: int = 0
    """``webhook_delivered_days``, ``webhook_dead_days``: webhook outbox rows deleted."""
    ids: list[str] = field(default_factory=list)
    """The root threads deleted, in the order the pass met them."""

    def line(self, dry_run: bool) -> str:
        verb = "would delete" if dry_run else "deleted"
        if self.rule == "log_body_days":
            return f"{self.rule}: {verb} the bodies of {counted(self.log_rows, 'log row')}"
        if self.rule in OUTBOX_RULES:
            return f"{self.rule}: {verb} {counted(self.outbox_rows, 'webhook outbox row')}"
        return (
            f"{self.rule}: {verb} {counted(self.threads, 'thread')} with"
            f" {counted(self.descendants, 'descendant')}; kept {self.kept_active} active"
        )


def counted(n: int, noun: str) -> str:
    """``1 thread``, ``2 threads``, ``0 threads``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


@dataclass
class RetentionReport:
    """One pass of retention."""

    dry_run: bool
    ran: bool = True
    """False when another node held the pass's lock: this one did nothing."""
    outcomes: list[RuleOutcome] = field(default_factory=list)
    seconds: float = 0.0
    memory_items: int = 0
    """Expired items of the memory store removed (spec 20 §20.6; real passes only)."""

    @property
    def threads(self) -> int:
        """Threads deleted (roots and descendants) by every rule."""
        return sum(o.threads + o.descendants for o in self.outcomes)

    def lines(self) -> list[str]:
        """The report as text, one line per rule."""
        if not self.ran:
            return ["retention: another node is running a pass; nothing done"]
        swept = [f"memory: deleted {counted(self.memory_items, 'expired item')}"]
        if not self.outcomes:
            return ["retention: no rule is set; nothing deleted"] + (
                swept if self.memory_items else []
            )
        return [o.line(self.dry_run) for o in self.outcomes] + (swept if self.memory_items else [])

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "ran": self.ran,
            "seconds": round(self.seconds, 3),
            "memory_items": self.memory_items,
            "rules": [
                {
                    "rule": o.rule,
                    "threads": o.threads,
                    "descendants": o.descendants,
                    "kept_active": o.kept_active,
                    "log_rows": o.log_rows,
                    "outbox_rows": o.outbox_rows,
                    "ids": list(o.ids),
                }
                for o in self.outcomes
            ],
        }


async def apply_retention(
    store: Store,
    cluster: Cluster,
    policy: RetentionPolicy,
    clock: Clock,
    *,
    dry_run: bool = False,
    on_deleted: OnDeleted | None = None,
) -> RetentionReport:
    """One pass of ``policy`` over ``store`` (a dry run deletes nothing). A real pass runs
    only where this node holds the cluster's ``retention`` lock (``ran`` False
    otherwise); a dry run reads and needs no lock."""
    started = time.perf_counter()
    report = RetentionReport(dry_run=dry_run)
    if not policy.enabled:
        if not dry_run:  # the memory store's expired items go whatever the rules
            async with cluster.exclusive("retention") as held:
                if held:
                    report.memory_items = await _sweep_memory(store, policy.batch)
        return report
    if dry_run:
        await _pass(store, policy, clock, report, None)
    else:
        async with cluster.exclusive("retention") as held:
            if not held:
                report.ran = False
                return report
            await _pass(store, policy, clock, report, on_deleted)
            report.memory_items = await _sweep_memory(store, policy.batch)
    report.seconds = time.perf_counter() - started
    return report


async def _sweep_memory(store: Store, batch: int) -> int:
    """Remove the memory store's expired items, ``batch`` per transaction (spec 20
    §20.6); how many."""
    removed = 0
    while True:
        gone = await store.delete_expired_memory(batch)
        removed += gone
        if gone < batch:
            return removed
        await asyncio.sleep(0)


async def _pass(
    store: Store,
    policy: RetentionPolicy,
    clock: Clock,
    report: RetentionReport,
    on_deleted: OnDeleted | None,
) -> None:
    now = clock()
    gone: set[str] = set()
    """Roots an earlier rule of this pass deleted (a dry run: counted): counted once."""
    for name, rule in policy.thread_rules(now):
        outcome = RuleOutcome(name)
        report.outcomes.append(outcome)
        if rule.kind == "per_user":
            for owner in await store.expiry_owners(rule.keep):
                await _apply_rule(
                    store,
                    replace(rule, user_id=owner),
                    policy.batch,
                    report,
                    outcome,
                    gone,
                    on_deleted,
                )
        else:
            await _apply_rule(store, rule, policy.batch, report, outcome, gone, on_deleted)
    if policy.log_body_days is not None:
        outcome = RuleOutcome("log_body_days")
        report.outcomes.append(outcome)
        before = now - round(policy.log_body_days * DAY_US)
        if report.dry_run:  # the rows of threads that stay: the others go with them
            outcome.log_rows = await store.count_log_bodies(before)
            roots = sorted(gone)
            for start in range(0, len(roots), 500):
                outcome.log_rows -= await store.count_log_bodies(before, roots[start : start + 500])
        else:
            after: str | None = None
            while True:
                chunk = await store.strip_log_bodies(before, after, policy.batch)
                outcome.log_rows += chunk.rows
                if chunk.cursor is None:
                    break
                after = chunk.cursor
                await asyncio.sleep(0)  # what else waits for the loop runs between two
    for name, state in OUTBOX_RULES.items():
        days = getattr(policy, name)
        if days is None:
            continue
        outcome = RuleOutcome(name)
        report.outcomes.append(outcome)
        before = now - round(days * DAY_US)
        if report.dry_run:
            outcome.outbox_rows = await store.count_settled_webhooks(state, before)
            continue
        while True:
            pruned = await store.prune_settled_webhooks(state, before, policy.batch)
            outcome.outbox_rows += pruned
            if pruned < policy.batch:
                break
            await asyncio.sleep(0)


async def _apply_rule(
    store: Store,
    rule: ExpiryRule,
    batch: int,
    report: RetentionReport,
    outcome: RuleOutcome,
    gone: set[str],
    on_deleted: OnDeleted | None,
) -> None:
    """Page through the roots ``rule`` names, deleting (or counting) each inactive one."""
    after: tuple[int, int, str] | None = None
    rank = 0  # per_user: the owner's roots met so far, newest first
    while True:
        page = await store.expiry_page(rule, after, batch)
        for found in page:
            if found.id in gone:
                continue
            if rule.kind == "per_user":
                rank += 1
                if rank <= rule.keep:
                    continue
            await _expire(store, rule, found, report, outcome, gone, on_deleted)
        if len(page) < batch:
            return
        after = page[-1].key


async def _expire(
    store: Store,
    rule: ExpiryRule,
    found: ExpiryCandidate,
    report: RetentionReport,
    outcome: RuleOutcome,
    gone: set[str],
    on_deleted: OnDeleted | None,
) -> None:
    if found.active:
        outcome.kept_active += 1
        return
    if report.dry_run:
        deleted = found.threads
    else:
        owners = await store.delete_expired(rule, found.id)
        if not owners:
            outcome.kept_active += 1
            return
        deleted = len(owners)
        if on_deleted is not None:
            await on_deleted(owners)
        await asyncio.sleep(0)
    gone.add(found.id)
    outcome.threads += 1
    outcome.descendants += deleted - 1
    outcome.ids.append(found.id)


class RetentionSweeper:
    """A runtime's background passes: one every ``policy.interval_s`` seconds (with up
    to a tenth of it as jitter, so several nodes' passes spread), the first one interval
    after the start. Each pass that ran is logged at INFO, one line (``log_report``)."""

    def __init__(
        self,
        store: Store,
        cluster: Cluster,
        policy: RetentionPolicy,
        clock: Clock,
        on_deleted: OnDeleted | None = None,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.policy = policy
        self.clock = clock
        self.on_deleted = on_deleted
        self.passes = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        interval = self.policy.interval_s
        if self.policy.enabled and interval is not None and self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(interval), name="threadloom-retention"
            )

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval * random.uniform(0.9, 1.1))
            try:
                report = await apply_retention(
                    self.store, self.cluster, self.policy, self.clock, on_deleted=self.on_deleted
                )
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed pass is tried again at the next interval
                log.exception("retention pass failed")
                continue
            self.passes += 1
            log_report(report)


def log_report(report: RetentionReport) -> None:
    """One INFO line for a pass that ran: what each rule deleted, and how long it took."""
    if not report.ran or not report.outcomes:
        return
    log.info(
        "retention%s: %s (%.3f s)",
        " dry run" if report.dry_run else "",
        "; ".join(report.lines()),
        report.seconds,
    )


__all__ = [
    "RetentionPolicy",
    "RetentionReport",
    "RetentionSweeper",
    "RuleOutcome",
    "apply_retention",
    "log_report",
]
