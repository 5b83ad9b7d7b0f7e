"""A compaction's model requests (spec 23 §23.2 rule 5): each one sent, priced and written as
an LLM log row of the thread — ``kind`` null, ``endpoint`` ``compaction`` (a summary
request) or ``compaction.native`` (a provider's own compaction call) — so the thread's
cost report, its budgets and the quotas of its user (spec 15, which sum LLM rows) count
what compacting spent, once, on either store. A failed request is written too, as a failed
attempt of no tokens, before its error propagates.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from threadloom.define.model import Model
from threadloom.engine.step.model_call import cut_error, price
from threadloom.errors import ProviderError
from threadloom.providers.types import ProviderRequest, Usage
from threadloom.records import LogRow, json_compact, new_id
from threadloom.thread.hub import ThreadHub

SUMMARY_ENDPOINT = "compaction"
"""The ``endpoint`` of a summary request's LLM row."""
NATIVE_ENDPOINT = "compaction.native"
"""The ``endpoint`` of the LLM row of a provider's own compaction call."""


@dataclass
class Spent:
    """What one compaction's requests used, summed over their rows."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0
    """USD; None as soon as one successful request's price is unknown."""
    rows: list[LogRow] = field(default_factory=list)

    def add(self, row: LogRow) -> None:
        self.rows.append(row)
        self.input_tokens += row.input_tokens or 0
        self.output_tokens += row.output_tokens or 0
        if row.error is not None:
            return
        total = row.cost_total
        self.cost = None if total is None or self.cost is None else self.cost + total


@dataclass
class Requests:
    """Sends one compaction's requests for ``thread_id`` and logs each one."""

    hub: ThreadHub
    thread_id: str
    model: Model
    provider_name: str
    fence: Any = None
    """The lease of the execution that compacts (a threshold compaction in a run)."""
    on_row: Callable[[LogRow], None] | None = None
    """Told of each row written (the run's budget, spec 15 §15.5)."""
    spent: Spent = field(default_factory=Spent)

    async def send(
        self,
        request: ProviderRequest,
        call: Callable[[], Awaitable[tuple[Any, Usage, dict[str, Any]]]],
        *,
        endpoint: str = SUMMARY_ENDPOINT,
    ) -> Any:
        """Run ``call`` (which answers the result, its usage and the response body to log)
        and write its LLM row; the result."""
        started = time.monotonic()
        values: dict[str, Any] = {
            "id": new_id(),
            "kind": None,
            "message_id": None,
            "provider": self.provider_name,
            "model": self.model.name,
            "model_name": self.model.model,
            "endpoint": endpoint,
            "request_body": json_compact(request.model_dump(mode="json", exclude_defaults=True)),
            "message_history_length": len(request.messages),
            "tools_available": 0,
            "standard_agents_router_used": False,
            "created_at": 0,
        }
        try:
            result, usage, body = await call()
        except Exception as exc:
            text = cut_error(str(exc.message if isinstance(exc, ProviderError) else exc))
            code = exc.code if isinstance(exc, ProviderError) else "unknown"
            origin = f"provider:{getattr(exc, 'provider', '') or self.provider_name}"
            await self._write(
                LogRow(
                    **values,
                    error=text,
                    error_type="api_error",
                    error_origin=origin,
                    errors=json_compact([{"message": text, "type": code, "origin": origin}]),
                    latency_ms=int((time.monotonic() - started) * 1000),
                    is_complete=True,
                )
            )
            raise
        cost_input, cost_cached, cost_output, cost_total = price(self.model, usage)
        await self._write(
            LogRow(
                **values,
                response_body=json_compact(body),
                input_tokens=usage.input_tokens,
                cached_tokens=usage.cached_tokens,
                output_tokens=usage.output_tokens,
                reasoning_tokens=usage.reasoning_tokens,
                total_tokens=usage.total_tokens or usage.input_tokens + usage.output_tokens,
                cost_input=cost_input,
                cost_cached=cost_cached,
                cost_output=cost_output,
                cost_total=cost_total,
                latency_ms=int((time.monotonic() - started) * 1000),
                is_complete=True,
            )
        )
        return result

    async def _write(self, row: LogRow) -> None:
        stored = await self.hub.insert_log(self.thread_id, row, fence=self.fence)
        self.spent.add(stored)
        if self.on_row is not None:
            self.on_row(stored)
