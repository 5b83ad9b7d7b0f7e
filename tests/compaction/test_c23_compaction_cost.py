"""What compacting costs (spec 23 §23.2 rule 5, spec 15): each summary request is an LLM
log row of the thread, so the thread's cost report, its lifetime budget, a run's budget and
its user's spend count a compaction's cost once. Real runtimes with the scripted model on
every store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_c23_compaction import PAD, answer, definitions, is_compaction, opened, seed, turn

from threadloom import Agent, Budget, Definitions, Side
from threadloom.define import Model, Prompt, tool
from threadloom.errors import ProviderError
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.providers.types import ProviderRequest

__all__ = ["opened"]  # the fixture, used by name


def compaction_rows(rows: list[Any]) -> list[Any]:
    return [r for r in rows if r.endpoint == "compaction"]


async def test_c23_031_a_compactions_cost_is_in_the_thread_cost_once(
    opened: Callable[..., Any],
) -> None:
    """C23-031: each summary request is an LLM row (``endpoint`` ``compaction``, no message,
    its tokens and priced cost); the cost report, ``Store.thread_spend`` and
    ``Store.user_spend`` count the record's cost once, beside the turns'."""
    provider = ScriptedProvider(answer, max_records=None)
    runtime = await opened(definitions(provider, context_window=400))
    state = await runtime.create_thread("chat", user_id="alice")
    for n in range(12):
        await state.inject_message(role="user", content=f"u{2 * n:04d}{PAD}")
        await state.inject_message(role="assistant", content=f"a{2 * n:04d}{PAD}")
    thread_id = state.thread_id
    await turn(runtime, thread_id, "u0024 first")
    before = await state.cost()
    spent_before = await runtime.store.thread_spend(thread_id)
    record = await state.compact(keep_messages=2)
    summaries = [r for r in provider.requests if is_compaction(r)]
    assert len(summaries) >= 2  # a 400-token window: the transcript goes in chunks
    rows = compaction_rows(await runtime.store.list_logs(thread_id, limit=None))
    assert len(rows) == len(summaries)
    assert all(r.kind is None and r.message_id is None and r.model == "M" for r in rows)
    assert all(r.error is None and r.is_complete for r in rows)
    assert sum(r.input_tokens for r in rows) == record.input_tokens
    assert sum(r.output_tokens for r in rows) == record.output_tokens
    assert record.cost is not None and record.cost > 0
    assert sum(r.cost_total for r in rows) == pytest.approx(record.cost)
    after = await state.cost()
    assert after.total_cost == pytest.approx(before.total_cost + record.cost)
    assert after.request_count == before.request_count + len(rows)
    assert after.message_count == before.message_count  # the rows name no message
    spent = await runtime.store.thread_spend(thread_id)
    assert spent.usd == pytest.approx(spent_before.usd + record.cost)
    assert spent.requests == spent_before.requests + len(rows)
    user = await runtime.store.user_spend("alice", 0)
    assert user.usd == pytest.approx(spent.usd) and user.requests == spent.requests
    await turn(runtime, thread_id, "u0026 second")  # the record is not summed a second time
    last = [r for r in await runtime.store.list_logs(thread_id, limit=None) if r.endpoint][-1]
    assert (await state.cost()).total_cost == pytest.approx(after.total_cost + last.cost_total)


async def test_c23_032_a_failed_summary_request_is_logged_and_stores_no_record(
    opened: Callable[..., Any],
) -> None:
    """C23-032: a summary request the provider refuses → the error propagates, no record is
    stored, and its LLM row is written as a failed attempt (an error, no tokens, no cost),
    which the spend counts as a request."""

    def failing(request: ProviderRequest) -> Reply:
        if is_compaction(request):
            return Reply.error("overloaded", code="server_error")
        return answer(request)

    provider = ScriptedProvider(failing, max_records=None)
    runtime = await opened(definitions(provider))
    thread_id = await seed(runtime, 4)
    state = await runtime.thread(thread_id)
    with pytest.raises(ProviderError):
        await state.compact(keep_messages=2)
    assert await state.compactions() == []
    [row] = compaction_rows(await runtime.store.list_logs(thread_id, limit=None))
    assert row.error is not None and "overloaded" in row.error and row.is_complete
    assert row.cost_total is None and not row.input_tokens
    spent = await runtime.store.thread_spend(thread_id)
    assert spent.requests == 1 and spent.usd == 0 and spent.unknown_cost == 0


async def test_c15_016_a_thread_budget_counts_its_compactions(
    opened: Callable[..., Any],
) -> None:
    """C15-016: a thread's lifetime budget counts what its compactions spent: once a
    compaction's cost reaches it, the next run stops ``budget_exceeded`` before any model
    request."""
    provider = ScriptedProvider(answer, max_records=None)
    runtime = await opened(definitions(provider))
    state = await runtime.create_thread("chat", budget=Budget(scope="thread", usd=0.0001))
    for n in range(30):
        await state.inject_message(role="user", content=f"u{2 * n:04d}{PAD}")
        await state.inject_message(role="assistant", content=f"a{2 * n:04d}{PAD}")
    record = await state.compact(keep_messages=2)
    assert record.cost is not None and record.cost >= 0.0001
    asked = provider.request_count
    await turn(runtime, state.thread_id, "u0060 more")
    status = await state.status()
    assert (status.state, status.reason) == ("failed", "budget_exceeded")
    assert provider.request_count == asked


@tool
def echo(v: int) -> str:
    """Echo v."""
    return f"echo {v}"


async def test_c15_017_a_runs_budget_counts_a_threshold_compaction(
    opened: Callable[..., Any],
) -> None:
    """C15-017: a threshold compaction inside a run spends from the run's budget: with
    ``Budget(requests=2)`` a run whose first step compacts (one summary request) and calls a
    tool (one request) stops ``budget_exceeded`` before its second step's request."""

    def script(request: ProviderRequest) -> Reply:
        if is_compaction(request):
            return answer(request)
        if request.messages[-1].role == "tool":
            return Reply(content="done")
        return Reply.tool_calls(Call("echo", {"v": 1}, id="call_1"))

    provider = ScriptedProvider(script, max_records=None)
    defs = Definitions().add(
        Model(
            name="M",
            provider=provider,
            model="scripted-1",
            input_price=1.0,
            output_price=2.0,
            context_window=2000,
            compact_at=0.5,
        ),
        Prompt(name="P", model="M", system="You are P.", tools=["echo"]),
        Agent(
            name="chat",
            side_a=Side(prompt="P", label="Agent"),
            side_b=Side(label="User"),
            budget=Budget(requests=2),
        ),
        echo,
    )
    runtime = await opened(defs)
    thread_id = await seed(runtime, 40)
    await turn(runtime, thread_id, "u0080 go")
    state = await runtime.thread(thread_id)
    [record] = await state.compactions()
    assert record.trigger == "threshold"
    status = await state.status()
    assert (status.state, status.reason) == ("failed", "budget_exceeded")
    asked = [r for r in provider.requests if not is_compaction(r)]
    assert len(asked) == 1  # the tool call's request; the one after the tool was never sent
