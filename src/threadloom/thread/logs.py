"""Application logs (``ThreadState.log``) and the cost report (spec 02 §2.11, spec 01 §1.10)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from threadloom.errors import ThreadNotFound
from threadloom.records import (
    CostReport,
    LogRow,
    ModelAverage,
    ModelCost,
    ThreadCost,
    new_id,
    thread_name,
)
from threadloom.store.base import CostSums
from threadloom.thread.lognorm import build_entry, normalize_log_entry

if TYPE_CHECKING:
    from threadloom.thread.hub import ThreadHub
    from threadloom.thread.state import ThreadState

logger = logging.getLogger("threadloom.log")

MAX_DESCENDANTS = 200


async def log(state: ThreadState, entry: object, fields: Mapping[str, Any]) -> LogRow | None:
    """Store an ``app`` row anchored to the newest top-level message; never raises."""
    hub, tid = state.hub, state.thread_id
    try:
        columns = normalize_log_entry(build_entry(entry, fields))
        row = LogRow(
            id=new_id(), kind="app", provider="app", created_at=0, is_complete=True, **columns
        )
        async with hub.lock(tid):
            stored, event = await state.store.insert_log(tid, row, anchor_newest=True)
            hub.publish_log(tid, event.seq, stored)
        return stored
    except Exception as exc:  # log() never raises (spec 02 §2.11.1)
        logger.warning("log() on thread %s was not stored: %s", tid, exc)
        return None


def _r(value: float) -> float:
    return round(value, 12)


def _thread_cost(
    thread_id: str, agent: str, name: str | None, parent: str | None, root: bool, s: CostSums
) -> ThreadCost:
    return ThreadCost(
        thread_id=thread_id,
        agent_name=agent,
        thread_name=name,
        parent=parent,
        is_root=root,
        total_cost=_r(s.llm_cost + s.app_cost),
        llm_cost=_r(s.llm_cost),
        app_cost=_r(s.app_cost),
        input_cost=_r(s.input_cost),
        cached_cost=_r(s.cached_cost),
        output_cost=_r(s.output_cost),
        router_fee_cost=_r(s.router_fee_cost),
        request_count=s.request_count,
        unpriced_request_count=s.unpriced_count,
    )


async def cost_report(hub: ThreadHub, thread_id: str) -> CostReport:
    """What the thread and its descendants cost (spec 01 §1.10.3, spec 08 §8.7)."""
    root = await hub.store.get_thread(thread_id)
    if root is None:
        raise ThreadNotFound(thread_id)
    descendants = await hub.store.descendants(thread_id, MAX_DESCENDANTS + 1)
    truncated = len(descendants) > MAX_DESCENDANTS
    covered = [root, *descendants[:MAX_DESCENDANTS]]
    summary = await hub.store.cost_summary([t.id for t in covered])
    total = CostSums()
    rows: list[ThreadCost] = []
    for thread in covered:
        sums = summary.threads.get(thread.id, CostSums())
        for key in (
            "llm_cost",
            "app_cost",
            "input_cost",
            "cached_cost",
            "output_cost",
            "router_fee_cost",
            "request_count",
            "message_count",
            "unpriced_count",
        ):
            setattr(total, key, getattr(total, key) + getattr(sums, key))
        is_root = thread is root
        if is_root or sums.request_count > 0 or sums.app_cost > 0:
            rows.append(
                _thread_cost(
                    thread.id,
                    thread.agent_id,
                    thread_name(thread.tags),
                    thread.parent_id,
                    is_root,
                    sums,
                )
            )
    own = summary.threads.get(root.id, CostSums())
    models = [
        ModelCost(
            model_name=name,
            total_cost=_r(s.llm_cost),
            input_cost=_r(s.input_cost),
            cached_cost=_r(s.cached_cost),
            output_cost=_r(s.output_cost),
            router_fee_cost=_r(s.router_fee_cost),
            request_count=s.request_count,
            unpriced_request_count=s.unpriced_count,
            avg_cost_per_request=_r(s.llm_cost / priced)
            if (priced := s.request_count - s.unpriced_count)
            else 0.0,
        )
        for name, s in summary.models.items()
    ]
    models.sort(key=lambda m: (-m.total_cost, m.model_name))
    return CostReport(
        total_cost=_r(total.llm_cost + total.app_cost),
        llm_cost=_r(total.llm_cost),
        app_cost=_r(total.app_cost),
        input_cost=_r(total.input_cost),
        cached_cost=_r(total.cached_cost),
        output_cost=_r(total.output_cost),
        router_fee_cost=_r(total.router_fee_cost),
        own_cost=_r(own.llm_cost + own.app_cost),
        request_count=total.request_count,
        unpriced_request_count=total.unpriced_count,
        message_count=total.message_count,
        avg_cost_per_message=(
            _r(total.llm_cost / total.message_count) if total.message_count else 0.0
        ),
        model_breakdown=models,
        avg_cost_per_message_by_model={
            m.model_name: ModelAverage(
                avg_cost=m.avg_cost_per_request, message_count=m.request_count
            )
            for m in models
        },
        threads=rows,
        truncated=truncated,
    )
