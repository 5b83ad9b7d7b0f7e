"""Budgets and quotas (spec 15): a run stops before a model request once a limit is reached,
with ``failed`` / ``budget_exceeded`` and an error naming the limit; lifetime budgets count
child threads; user quotas count a user's threads over a window; warnings at a threshold;
models without a price have an unknown cost, never 0. Real Runtime on both stores, the
scripted model with fixed token usage (``make_chat``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
from genai_prices import Usage as CatalogUsage
from genai_prices import calc_price

from fakes import FakeClock
from threadloom import Agent, Budget, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, Subagent, tool
from threadloom.engine.step.model_call import price
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.providers.types import Usage
from threadloom.records import ThreadBudget, UserQuota

USAGE = {"input_tokens": 100, "output_tokens": 50, "total_tokens": 150}
PRICED = {"input_price": 1.0, "output_price": 2.0}  # $0.0002 a request of USAGE


def text(content: str) -> Reply:
    return Reply.text(content, usage=USAGE)


def echo_call(n: int) -> Reply:
    return Reply.tool_calls(Call("echo", {"v": n}, id=f"call_{n}"), usage=USAGE)


async def settle(chat: Any, thread_id: str, message: str = "hi") -> Any:
    await chat.runtime.send_message(thread_id, message)
    await chat.runtime.wait_idle(thread_id, timeout=10)
    return await (await chat.runtime.thread(thread_id)).status()


async def consistent(runtime: Runtime, thread_id: str) -> list[Any]:
    """The thread's messages; asserts nothing is pending and no LLM row is incomplete."""
    state = await runtime.thread(thread_id)
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    assert [m.id for m in page.messages if m.status == "pending"] == []
    logs = await runtime.store.list_logs(thread_id, limit=None)
    assert [row.id for row in logs if not row.is_complete] == []
    assert await runtime.store.list_queue(thread_id) == []
    return list(page.messages)


def requests(chat: Any) -> int:
    return len(chat.provider.requests)


# -- run budgets ---------------------------------------------------------------------------


async def test_c15_001_a_run_stops_at_its_request_limit(make_chat: Any) -> None:
    chat = await make_chat(
        [echo_call(1), echo_call(2), text("never")],
        model=PRICED,
        agent={"budget": Budget(requests=2)},
    )
    state = await chat.thread()
    status = await settle(chat, state.thread_id)
    assert (status.state, status.reason) == ("failed", "budget_exceeded")
    assert status.error is not None
    assert status.error.type == "BudgetExceeded"
    assert status.error.retryable is False
    assert status.error.message == (
        "Budget exceeded: the run's budget allows 2 model requests; 2 model requests spent"
    )
    assert requests(chat) == 2  # the third reply was never requested
    messages = await consistent(chat.runtime, state.thread_id)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]


async def test_c15_002_a_run_stops_at_its_token_limit(make_chat: Any) -> None:
    chat = await make_chat(
        [echo_call(1), echo_call(2), text("never")],
        model=PRICED,
        agent={"budget": Budget(tokens=200)},
    )
    state = await chat.thread()
    status = await settle(chat, state.thread_id)
    assert status.reason == "budget_exceeded"
    assert requests(chat) == 2  # 150 < 200: the second request is made; 300 ≥ 200
    assert status.error.message == (
        "Budget exceeded: the run's budget allows 200 tokens; 300 tokens spent"
    )


async def test_c15_003_a_run_stops_at_its_usd_limit(make_chat: Any) -> None:
    chat = await make_chat(
        [echo_call(1), echo_call(2), text("never")],
        model=PRICED,
        agent={"budget": Budget(usd=0.0003)},
    )
    state = await chat.thread()
    status = await settle(chat, state.thread_id)
    assert status.reason == "budget_exceeded"
    assert requests(chat) == 2
    assert status.error.message == "Budget exceeded: the run's budget allows $0.0003; $0.0004 spent"


async def test_c15_004_the_next_run_has_its_own_run_budget(make_chat: Any) -> None:
    chat = await make_chat(
        [echo_call(1), echo_call(2), echo_call(3), text("answered")],
        model=PRICED,
        agent={"budget": Budget(requests=2)},
    )
    state = await chat.thread()
    assert (await settle(chat, state.thread_id)).reason == "budget_exceeded"
    status = await settle(chat, state.thread_id, "again")
    assert (status.state, status.reason, status.error) == ("idle", "stop_on_response", None)
    assert requests(chat) == 4
    messages = await consistent(chat.runtime, state.thread_id)
    assert messages[-1].content == "answered"


# -- lifetime budgets and children --------------------------------------------------------


@tool
def done(summary: str) -> str:
    """Finish the task with a summary."""
    return "Done."


WORKER = (
    Prompt(name="WA", model="M", system="You are the worker.", tools=["done"]),
    Prompt(name="WB", model="M", system="You review the worker."),
    Agent(
        name="worker",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Works on one task",
        side_a=Side(prompt="WA", session_stop="done"),
        side_b=Side(prompt="WB"),
    ),
    done,
)


class Router:
    """The worker's requests take the child's replies, the others the parent's."""

    def __init__(self, parent: list[Reply], child: list[Reply]) -> None:
        self.parent, self.child = list(parent), list(child)

    def __call__(self, request: Any) -> Reply:
        system = request.messages[0].text if request.messages else ""
        script = self.child if "worker" in system else self.parent
        return script.pop(0) if script else text("ok")


def create_call() -> Reply:
    args = {"agent": "worker", "name": "W1", "message": "do it", "attachments": []}
    return Reply.tool_calls(Call("subagent_create", args, id="call_create"), usage=USAGE)


async def settle_family(chat: Any, *thread_ids: str) -> None:
    for _ in range(4):
        for thread_id in thread_ids:
            await chat.runtime.wait_idle(thread_id, timeout=10)
        await asyncio.sleep(0.02)


async def test_c15_005_a_lifetime_budget_counts_a_childs_spend(make_chat: Any) -> None:
    chat = await make_chat(None, model=PRICED, prompt={"tools": [Subagent("worker")]}, extra=WORKER)
    chat.provider.reset(
        Router(
            [create_call(), text("started"), text("got it")],
            [Reply.tool_calls(Call("done", {"summary": "42"}, id="call_done"), usage=USAGE)],
        )
    )
    state = await chat.thread(budget=Budget(scope="thread", requests=3))
    parent = state.thread_id
    await chat.runtime.send_message(parent, "go")
    (entry,) = await _registry(chat, parent)
    child = entry.reference
    await settle_family(chat, child, parent)
    child_row = await chat.runtime.store.get_thread(child)
    assert child_row.budgets == (
        ThreadBudget(owner=parent, scope="thread", requests=3),
    )  # the parent's lifetime budget, owned by the parent
    status = await settle(chat, parent, "more")  # the limit is reached whatever the order
    assert (status.state, status.reason) == ("failed", "budget_exceeded")
    assert status.error.message == (
        f"Budget exceeded: the lifetime budget of thread {parent} allows 3 model requests;"
        " 3 model requests spent"
    )
    spend = await chat.runtime.thread_spend(parent)
    assert spend.requests == 3 and spend.tokens == 450
    assert (await chat.runtime.thread_spend(child)).requests == 1
    await consistent(chat.runtime, parent)


async def _registry(chat: Any, parent: str) -> list[Any]:
    for _ in range(200):
        entries = await chat.runtime.store.get_registry(parent)
        if entries:
            return list(entries)
        await asyncio.sleep(0.02)
    raise AssertionError("no child was created")


async def test_c15_011_a_child_keeps_the_parent_agents_lifetime_budget(make_chat: Any) -> None:
    chat = await make_chat(
        None,
        model=PRICED,
        prompt={"tools": [Subagent("worker")]},
        agent={"budget": [Budget(requests=50), Budget(scope="thread", tokens=10_000)]},
        extra=WORKER,
    )
    chat.provider.reset(
        Router(
            [create_call(), text("started"), text("got it")],
            [Reply.tool_calls(Call("done", {"summary": "42"}, id="call_done"), usage=USAGE)],
        )
    )
    state = await chat.thread(budget=Budget(requests=7))
    await chat.runtime.send_message(state.thread_id, "go")
    (entry,) = await _registry(chat, state.thread_id)
    await settle_family(chat, entry.reference, state.thread_id)
    child_row = await chat.runtime.store.get_thread(entry.reference)
    assert child_row.budgets == (
        ThreadBudget(owner=state.thread_id, scope="thread", tokens=10_000),
    )  # not the agent's run budget, not the thread's run budget
    parent_row = await chat.runtime.store.get_thread(state.thread_id)
    assert parent_row.budgets == (ThreadBudget(owner=state.thread_id, requests=7),)
    made = await chat.runtime.create_thread("chat", parent=state.thread_id)  # the Python API
    assert (await chat.runtime.store.get_thread(made.thread_id)).budgets == (
        ThreadBudget(owner=state.thread_id, scope="thread", tokens=10_000),
    )
    assert (await chat.runtime.thread(state.thread_id)).thread_id == state.thread_id
    status = await (await chat.runtime.thread(state.thread_id)).status()
    assert status.state == "idle"


# -- the stop leaves a consistent thread -------------------------------------------------------


async def test_c15_008_a_reached_lifetime_budget_refuses_each_next_run(make_chat: Any) -> None:
    chat = await make_chat([echo_call(1), text("one"), text("never")], model=PRICED)
    state = await chat.thread(budget=Budget(scope="thread", requests=2))
    tid = state.thread_id
    first = await settle(chat, tid)
    assert (first.state, first.reason) == ("idle", "stop_on_response")
    second = await settle(chat, tid, "second")
    assert (second.state, second.reason) == ("failed", "budget_exceeded")
    assert second.error.type == "BudgetExceeded"
    third = await settle(chat, tid, "third")
    assert (third.state, third.reason) == ("failed", "budget_exceeded")
    assert requests(chat) == 2  # neither later send reached the model
    messages = await consistent(chat.runtime, tid)
    assert [m.content for m in messages if m.role == "user"] == ["hi", "second", "third"]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "user", "user"]


# -- user quotas -------------------------------------------------------------------------------


@pytest.fixture
async def quota_chat(db_url: str) -> AsyncIterator[Callable[..., Any]]:
    opened: list[Runtime] = []

    async def make(script: Sequence[Reply]) -> tuple[Runtime, ScriptedProvider, FakeClock]:
        provider = ScriptedProvider(list(script))
        clock = FakeClock()
        defs = Definitions().add(
            Model(name="M", provider=provider, model="scripted-1", **PRICED),
            Prompt(name="P", model="M", system="You are P."),
            Agent(name="chat", side_a=Side(prompt="P"), side_b=Side(label="Customer")),
        )
        runtime = await Runtime.open(db_url, definitions=defs, clock=clock)
        opened.append(runtime)
        return runtime, provider, clock

    yield make
    for runtime in opened:
        await runtime.close(drain=0)


async def _send(runtime: Runtime, thread_id: str, text_: str = "hi") -> Any:
    await runtime.send_message(thread_id, text_)
    await runtime.wait_idle(thread_id, timeout=10)
    return await (await runtime.thread(thread_id)).status()


async def test_c15_006_a_user_quota_counts_every_thread_of_the_user(
    quota_chat: Callable[..., Any],
) -> None:
    runtime, provider, clock = await quota_chat([text(f"r{i}") for i in range(10)])
    await runtime.set_user_quota("u", UserQuota(user_id="u", requests=2, window="day"))
    one = (await runtime.create_thread("chat", user_id="u")).thread_id
    two = (await runtime.create_thread("chat", user_id="u")).thread_id
    other = (await runtime.create_thread("chat", user_id="v")).thread_id
    assert (await _send(runtime, one)).reason == "stop_on_response"
    clock.now += 1_000_000
    assert (await _send(runtime, two)).reason == "stop_on_response"
    stopped = await _send(runtime, one, "third")
    assert (stopped.state, stopped.reason) == ("failed", "budget_exceeded")
    assert stopped.error.message == (
        "Budget exceeded: the daily quota of user u allows 2 model requests; 2 model requests spent"
    )
    assert (await _send(runtime, other)).reason == "stop_on_response"  # v has no quota
    assert len(provider.requests) == 3
    quota, spent = await runtime.user_quota("u")
    assert quota == UserQuota(user_id="u", requests=2) and spent.requests == 2
    clock.now += 86_400 * 1_000_000  # a day later the first two are out of the window
    again = await _send(runtime, two, "next day")
    assert (again.state, again.reason) == ("idle", "stop_on_response")
    await runtime.set_user_quota("u", None)
    assert await runtime.user_quota("u") == (None, None)


# -- warnings and unknown cost ---------------------------------------------------------------


async def test_c15_007_a_warning_frame_at_the_threshold(make_chat: Any) -> None:
    chat = await make_chat(
        [echo_call(1), echo_call(2), echo_call(3), text("done")],
        model=PRICED,
        agent={"budget": Budget(requests=5, warn_at=0.4)},
    )
    state = await chat.thread()
    sub = chat.runtime.events.subscribe(state.thread_id, kinds=["telemetry"])
    status = await settle(chat, state.thread_id)
    assert status.reason == "stop_on_response"  # 4 requests of 5
    warnings = [e.data for e in sub.drain() if e.data["type"] == "budget_warning"]
    sub.close()
    assert len(warnings) == 1
    (warning,) = warnings
    assert {k: warning[k] for k in ("scope", "owner", "dimension", "spent", "limit")} == {
        "scope": "run",
        "owner": None,
        "dimension": "requests",
        "spent": 2,
        "limit": 5,
    }
    assert warning["threshold"] == 0.4
    assert warning["budget"] == "the run's budget"
    assert warning["message"] == (
        "Budget warning: 2 model requests spent of the 5 model requests the run's budget allows"
    )


async def test_c15_009_an_unpriced_model_has_an_unknown_cost(make_chat: Any) -> None:
    chat = await make_chat(
        [echo_call(1), echo_call(2), echo_call(3), text("never")],
        agent={"budget": Budget(usd=0.0001, requests=3)},
    )
    state = await chat.thread()
    sub = chat.runtime.events.subscribe(state.thread_id, kinds=["telemetry"])
    status = await settle(chat, state.thread_id)
    warnings = [e.data for e in sub.drain() if e.data["type"] == "budget_warning"]
    sub.close()
    assert status.reason == "budget_exceeded"
    assert "allows 3 model requests" in status.error.message  # the USD amount never reached
    assert requests(chat) == 3
    logs = await chat.runtime.store.list_logs(state.thread_id, limit=None)
    assert [row.cost_total for row in logs if row.kind is None] == [None, None, None]
    unknown = [w for w in warnings if w["message"] == "The cost of model M is unknown"]
    assert len(unknown) == 1 and unknown[0]["dimension"] == "usd"
    spend = await chat.runtime.thread_spend(state.thread_id)
    assert (spend.usd, spend.requests, spend.unknown_cost) == (0.0, 3, 3)


def test_c15_010_models_without_prices_are_priced_from_the_catalog() -> None:
    model = Model(name="mini", provider="openai", model="gpt-4o-mini")
    usage = Usage(input_tokens=1000, cached_tokens=100, output_tokens=500, total_tokens=1500)
    cost_input, cost_cached, cost_output, total = price(model, usage)
    expected = calc_price(
        CatalogUsage(input_tokens=1000, cache_read_tokens=100, output_tokens=500),
        model_ref="gpt-4o-mini",
        provider_id="openai",
    )
    assert total == pytest.approx(float(expected.total_price), rel=1e-9)
    assert cost_input is not None and cost_cached is not None and cost_output is not None
    assert cost_input + cost_cached == pytest.approx(float(expected.input_price), rel=1e-9)
    assert cost_output == pytest.approx(float(expected.output_price), rel=1e-9)
    # the model's own prices win; an unknown model, or a provider the catalog does not name,
    # has no price at all
    own = Model(name="own", provider="openai", model="gpt-4o-mini", input_price=1, output_price=1)
    assert price(own, usage)[3] == pytest.approx(0.0015)
    assert price(Model(name="x", provider="openai", model="no-such-model-1"), usage) == (
        None,
        None,
        None,
        None,
    )
    assert price(Model(name="s", provider="scripted", model="gpt-4o-mini"), usage)[3] is None


def test_c15_015_budgets_are_checked_when_made() -> None:
    for bad in ({}, {"usd": -1}, {"tokens": 1, "warn_at": 0}, {"requests": 1, "scope": "x"}):
        with pytest.raises(ValueError):
            Budget(**bad)
    one = Agent(name="a", budget=Budget(usd=1))
    assert one.budget == (Budget(usd=1),)
    two = Agent(name="b", budget=[Budget(usd=1), {"scope": "thread", "tokens": 5}])
    assert two.budget == (Budget(usd=1), Budget(scope="thread", tokens=5))
