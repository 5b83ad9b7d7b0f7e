"""The spend budgets and quotas count (spec 15 §15.1, §15.3, §15.4), on both stores: a
thread's lifetime with its descendants, a user's threads since a time, the budgets a new
thread keeps from its parent, and quotas set, replaced and removed. Real Runtime."""

from __future__ import annotations

from threadloom import Runtime
from threadloom.records import LogRow, Spend, ThreadBudget, UserQuota, new_id
from threadloom.store.base import NewThread


def llm(tokens: int, cost: float | None, *, error: str | None = None) -> LogRow:
    return LogRow(
        id=new_id(),
        kind=None,
        provider="scripted",
        model="M",
        endpoint="chat.completions",
        created_at=0,
        is_complete=True,
        total_tokens=tokens if error is None else None,
        cost_total=cost,
        error=error,
    )


def runtime_row() -> LogRow:
    return LogRow(
        id=new_id(),
        kind=None,
        provider="system",
        model="Step 1, Side a",
        created_at=0,
        is_complete=True,
        error="boom",
        error_type="step_execution_error",
        error_origin="runtime",
    )


async def test_c15_014_spend_of_a_thread_tree_and_of_a_user(runtime: Runtime) -> None:
    store = runtime.store
    root = (await runtime.create_thread("a", user_id="u")).thread_id
    child = (await runtime.create_thread("a", user_id="u", parent=root)).thread_id
    grandchild = (await runtime.create_thread("a", user_id="u", parent=child)).thread_id
    other = (await runtime.create_thread("a", user_id="v")).thread_id
    await store.insert_log(root, llm(100, 0.25))
    await store.insert_log(root, runtime_row())  # not a model request
    await store.insert_log(child, llm(50, None))  # unknown cost: counted apart, never 0
    await store.insert_log(child, llm(0, None, error="rate limited"))  # a failed request
    late, _ = await store.insert_log(grandchild, llm(10, 0.5))
    await store.insert_log(other, llm(1000, 9.0))

    assert await store.thread_spend(root) == Spend(usd=0.75, tokens=160, requests=4, unknown_cost=1)
    assert await store.thread_spend(child) == Spend(usd=0.5, tokens=60, requests=3, unknown_cost=1)
    assert await store.thread_spend(grandchild) == Spend(usd=0.5, tokens=10, requests=1)
    assert await store.thread_spend(new_id()) == Spend()
    assert await store.user_spend("u", 0) == Spend(usd=0.75, tokens=160, requests=4, unknown_cost=1)
    assert await store.user_spend("u", late.created_at) == Spend(usd=0.5, tokens=10, requests=1)
    assert await store.user_spend("v", 0) == Spend(usd=9.0, tokens=1000, requests=1)
    assert await store.user_spend("nobody", 0) == Spend()


async def test_c15_014_a_child_keeps_its_ancestors_lifetime_budgets(runtime: Runtime) -> None:
    store = runtime.store
    root_id = new_id()
    lifetime = ThreadBudget(owner=root_id, scope="thread", usd=2.0)
    per_run = ThreadBudget(owner=root_id, requests=4)
    root = await store.create_thread(
        NewThread(id=root_id, agent_id="a", budgets=(lifetime, per_run))
    )
    assert root.budgets == (lifetime, per_run)
    own = ThreadBudget(owner="c", scope="thread", tokens=10)
    child = await store.create_thread(
        NewThread(id=new_id(), agent_id="a", parent_id=root_id, budgets=(own,))
    )
    assert child.budgets == (own, lifetime)  # its own, then the ancestor's lifetime budget
    grandchild = await store.create_thread(NewThread(id=new_id(), agent_id="a", parent_id=child.id))
    assert grandchild.budgets == (own, lifetime)
    assert (await store.get_thread(grandchild.id)).budgets == (own, lifetime)  # type: ignore[union-attr]
    plain = await store.create_thread(NewThread(id=new_id(), agent_id="a"))
    assert plain.budgets == ()


async def test_c15_014_quotas_are_set_replaced_and_removed(runtime: Runtime) -> None:
    store = runtime.store
    assert await store.list_user_quotas() == []
    daily = UserQuota(user_id="u", usd=5.0)
    await store.set_user_quota("u", daily)
    await store.set_user_quota("v", UserQuota(user_id="v", requests=3, window="hour"))
    assert await store.get_user_quota("u") == daily
    weekly = UserQuota(user_id="u", tokens=1000, window="week", warn_at=0.5)
    await store.set_user_quota("u", weekly)
    assert await store.get_user_quota("u") == weekly
    assert [q.user_id for q in await store.list_user_quotas()] == ["u", "v"]
    await store.set_user_quota("u", None)
    assert await store.get_user_quota("u") is None
    assert [q.user_id for q in await store.list_user_quotas()] == ["v"]
