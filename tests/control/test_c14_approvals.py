"""Tool approvals (spec 14 §14.1–§14.5) on both stores: what ran, how often, what was
stored. Real Runtime, real store, scripted model; side effects appended to a file."""

from __future__ import annotations

from typing import Any

from threadloom.providers.script import Call, Reply


async def _parked(bench: Any, tid: str) -> None:
    await bench.runtime.wait_idle(tid, timeout=5)
    status = await (await bench.runtime.thread(tid)).status()
    assert (status.state, status.reason) == ("idle", "awaiting_approval")


async def test_c14_001_a_call_that_needs_approval_parks_the_run(make_bench: Any) -> None:
    """C14-001: the model calls ``pay`` → the call is stored, no result, the run parks
    ``idle``/``awaiting_approval``; the pending approval names the call, tool, arguments
    and their hash; nothing ran."""
    bench = await make_bench([Reply.tool_calls(Call("pay", {"amount": 5, "to": "bo"}, id="c1"))])
    state = await bench.thread()
    await bench.runtime.send_message(state.thread_id, "pay bo")
    await _parked(bench, state.thread_id)
    [approval] = await state.get_approvals()
    assert (approval.tool_call_id, approval.tool, approval.state) == ("c1", "pay", "pending")
    assert approval.arguments == {"amount": 5, "to": "bo"}
    assert approval.arguments_hash.startswith("sha256:")
    messages = (await state.get_messages(order="asc")).messages
    assert [m.role for m in messages] == ["user", "assistant"]
    assert bench.effect_lines() == []
    assert len(bench.provider.requests) == 1


async def test_c14_002_approve_runs_the_tool_once_and_the_run_goes_on(make_bench: Any) -> None:
    """C14-002: approve with the hash shown → the tool runs once, its result is stored, the
    model is asked again and the run ends normally; the approval records who and when."""
    bench = await make_bench(
        [Reply.tool_calls(Call("pay", {"amount": 5, "to": "bo"}, id="c1")), Reply.text("done")]
    )
    state = await bench.thread()
    await bench.runtime.send_message(state.thread_id, "pay bo")
    await _parked(bench, state.thread_id)
    [shown] = await state.get_approvals()
    decided = await state.decide_approval(
        "c1", approve=True, arguments_hash=shown.arguments_hash, decided_by="ann"
    )
    assert (decided.state, decided.decided_by) == ("approved", "ann")
    await bench.runtime.wait_idle(state.thread_id, timeout=5)
    messages = (await state.get_messages(order="asc")).messages
    assert [(m.role, m.tool_call_id) for m in messages] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("assistant", None),
    ]
    assert messages[2].content == "paid 5 to bo" and messages[2].tool_status == "success"
    assert bench.effect_lines() == ["pay 5 bo"]
    [after] = await state.get_approvals()
    assert after.state == "approved" and after.started_at is not None
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "stop_on_response")
