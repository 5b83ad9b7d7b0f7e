"""Tool approvals (spec 14 §14.1–§14.5) on both stores: what ran, how often, what was
stored. Real Runtime, real store, scripted model; side effects appended to a file."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conftest import EFFECTS, pay
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, Subagent, hook
from threadloom.errors import (
    ApprovalConflict,
    ApprovalForbidden,
    ApprovalNotFound,
    InvalidArgument,
    ThreadNotFound,
)
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.records import ApprovalDecision, encode_tool_calls


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


async def _park_pay(bench: Any, *calls: Call) -> tuple[Any, str]:
    state = await bench.thread()
    await bench.runtime.send_message(state.thread_id, "go")
    await _parked(bench, state.thread_id)
    return state, state.thread_id


def _script(*calls: Call) -> list[Any]:
    return [Reply.tool_calls(*calls), Reply.text("done"), Reply.text("again")]


async def _messages(state: Any) -> list[Any]:
    return list((await state.get_messages(order="asc", limit=None)).messages)


async def test_c14_003_no_decision_nothing_runs_and_a_continue_parks_again(
    make_bench: Any,
) -> None:
    """C14-003: with no decision nothing runs — not after a while, not on a continue: the
    continued run parks again without a model request."""
    bench = await make_bench(_script(Call("pay", {"amount": 5, "to": "bo"}, id="c1")))
    state, tid = await _park_pay(bench)
    await bench.runtime.continue_thread(tid)
    await _parked(bench, tid)
    assert bench.effect_lines() == []
    assert len(bench.provider.requests) == 1
    assert [a.state for a in await state.get_approvals()] == ["pending"]


async def test_c14_004_approve_must_be_a_boolean_in_python_too(make_bench: Any) -> None:
    """C14-004: ``decide_approval(approve=None)`` or ``"yes"`` → ``InvalidArgument``;
    approving without the hash shown → ``InvalidArgument``; nothing changed."""
    bench = await make_bench(_script(Call("pay", {"amount": 5, "to": "bo"}, id="c1")))
    state, _ = await _park_pay(bench)
    for approve in (None, "yes", 1):
        with pytest.raises(InvalidArgument):
            await state.decide_approval("c1", approve=approve)
    with pytest.raises(InvalidArgument):
        await state.decide_approval("c1", approve=True)
    assert [a.state for a in await state.get_approvals()] == ["pending"]
    assert bench.effect_lines() == []


async def test_c14_005_unknown_call_and_a_call_that_needs_none(make_bench: Any) -> None:
    """C14-005: a decision on an unknown tool call id, or on a call of a tool that needs
    no approval, → ``ApprovalNotFound``; nothing changed."""
    bench = await make_bench(
        _script(
            Call("lookup", {"q": "x"}, id="free"), Call("pay", {"amount": 5, "to": "bo"}, id="c1")
        )
    )
    state, _ = await _park_pay(bench)
    for call_id in ("nope", "free"):
        with pytest.raises(ApprovalNotFound):
            await state.decide_approval(call_id, approve=False)
    assert [a.state for a in await state.get_approvals()] == ["pending"]


async def test_c14_006_two_concurrent_decisions_one_wins(make_bench: Any) -> None:
    """C14-006: two decisions at once (approve and reject) → exactly one is recorded, the
    other gets ``ApprovalConflict``; the tool ran at most once, and once iff approve won."""
    bench = await make_bench(_script(Call("pay", {"amount": 5, "to": "bo"}, id="c1")))
    state, tid = await _park_pay(bench)
    [shown] = await state.get_approvals()
    outcomes = await asyncio.gather(
        state.decide_approval("c1", approve=True, arguments_hash=shown.arguments_hash),
        state.decide_approval("c1", approve=False, reason="no"),
        return_exceptions=True,
    )
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1 and len(lost) == 1 and isinstance(lost[0], ApprovalConflict)
    await bench.runtime.wait_idle(tid, timeout=5)
    expected = ["pay 5 bo"] if won[0].state == "approved" else []
    assert bench.effect_lines() == expected
    [result] = [m for m in await _messages(state) if m.role == "tool"]
    assert result.tool_status == ("success" if expected else "error")


async def test_c14_007_decisions_after_stop_terminate_and_delete(make_bench: Any) -> None:
    """C14-007: stop while parked → the approval is cancelled, its call answered ``Not
    run``, the status ``idle``/``aborted_by_user``; a decision then → ``ApprovalConflict``
    (cancelled). Terminate while parked → the same with ``terminated``. After the thread was
    deleted → ``ThreadNotFound``/``ApprovalNotFound``. Nothing ever ran."""
    bench = await make_bench(
        [Reply.tool_calls(Call("pay", {"amount": 5, "to": "bo"}, id=f"c{i}")) for i in range(3)]
    )
    stopped, tid = await _park_pay(bench)
    await bench.runtime.stop(tid)
    status = await stopped.status()
    assert (status.state, status.reason) == ("idle", "aborted_by_user")
    [approval] = await stopped.get_approvals()
    assert approval.state == "cancelled"
    [result] = [m for m in await _messages(stopped) if m.role == "tool"]
    assert result.tool_status == "error" and result.content.startswith("Not run")
    with pytest.raises(ApprovalConflict):
        await stopped.decide_approval("c0", approve=True, arguments_hash=approval.arguments_hash)

    terminated, tid2 = await _park_pay(bench)
    await bench.runtime.terminate(tid2)
    [approval2] = await terminated.get_approvals()
    assert approval2.state == "cancelled"
    with pytest.raises(ApprovalConflict):
        await terminated.decide_approval(
            "c1", approve=True, arguments_hash=approval2.arguments_hash
        )

    deleted, tid3 = await _park_pay(bench)
    [approval3] = await deleted.get_approvals()
    await bench.runtime.delete_thread(tid3)
    with pytest.raises((ThreadNotFound, ApprovalNotFound)):
        await deleted.decide_approval("c2", approve=True, arguments_hash=approval3.arguments_hash)
    assert bench.effect_lines() == []


async def test_c14_008_arguments_changed_after_they_were_shown(make_bench: Any) -> None:
    """C14-008: the stored call's arguments change after the approval was shown (an edit
    of the message) → the approve names the shown hash and is recorded, but the call does
    not run: its result says the arguments changed; the model goes on."""
    bench = await make_bench(_script(Call("pay", {"amount": 5, "to": "bo"}, id="c1")))
    state, tid = await _park_pay(bench)
    [shown] = await state.get_approvals()
    [issued] = [m for m in await _messages(state) if m.tool_calls]
    call = issued.decoded_tool_calls()[0]
    edited = call.model_copy(
        update={
            "function": call.function.model_copy(update={"arguments": '{"amount":500,"to":"eve"}'})
        }
    )
    await bench.runtime.store.update_message(
        tid, issued.model_copy(update={"tool_calls": encode_tool_calls([edited])})
    )
    await state.decide_approval("c1", approve=True, arguments_hash=shown.arguments_hash)
    await bench.runtime.wait_idle(tid, timeout=5)
    assert bench.effect_lines() == []
    [result] = [m for m in await _messages(state) if m.role == "tool"]
    assert result.tool_status == "error" and "arguments changed" in result.content


async def test_c14_009_restart_between_the_decision_and_the_run(
    make_bench: Any, open_runtime: Any
) -> None:
    """C14-009: the decision is committed and the process stops before the run that goes
    on starts → a new runtime on the same store starts it at start-up: the tool runs
    once."""
    bench = await make_bench(_script(Call("pay", {"amount": 5, "to": "bo"}, id="c1")))
    state, tid = await _park_pay(bench)
    [shown] = await state.get_approvals()
    decision = ApprovalDecision(approve=True, arguments_hash=shown.arguments_hash)
    decided = await bench.runtime.store.decide_approval(tid, "c1", decision)  # no run yet
    assert decided.ready
    defs = bench.runtime.definitions
    await bench.runtime.close(drain=0)
    again = await open_runtime(definitions=defs)
    try:
        await asyncio.sleep(0)
        await again.wait_idle(tid, timeout=5)
        for _ in range(100):
            if bench.effect_lines():
                break
            await asyncio.sleep(0.05)
        await again.wait_idle(tid, timeout=5)
        assert bench.effect_lines() == ["pay 5 bo"]
        status = await (await again.thread(tid)).status()
        assert status.reason == "stop_on_response"
    finally:
        await again.close(drain=0)


async def test_c14_016_partial_decisions_and_calls_that_need_none(make_bench: Any) -> None:
    """C14-016: one response calls ``lookup`` (no approval) and ``pay`` twice → ``lookup``
    runs at once; deciding one ``pay`` keeps the run parked, nothing else runs; deciding
    the second runs the approved one, stores the rejection, and the model goes on with
    every result in call order of decision."""
    bench = await make_bench(
        _script(
            Call("lookup", {"q": "x"}, id="l1"),
            Call("pay", {"amount": 1, "to": "a"}, id="p1"),
            Call("pay", {"amount": 2, "to": "b"}, id="p2"),
        )
    )
    state, tid = await _park_pay(bench)
    assert bench.effect_lines() == ["lookup x"]
    shown = {a.tool_call_id: a for a in await state.get_approvals()}
    await state.decide_approval("p1", approve=True, arguments_hash=shown["p1"].arguments_hash)
    await _parked(bench, tid)
    assert bench.effect_lines() == ["lookup x"]
    assert len(bench.provider.requests) == 1
    await state.decide_approval("p2", approve=False, reason="twice is too much")
    await bench.runtime.wait_idle(tid, timeout=5)
    assert bench.effect_lines() == ["lookup x", "pay 1 a"]
    results = [(m.tool_call_id, m.tool_status) for m in await _messages(state) if m.role == "tool"]
    assert results == [("l1", "success"), ("p1", "success"), ("p2", "error")]
    assert len(bench.provider.requests) == 2


async def test_c14_017_a_message_sent_while_parked_waits(make_bench: Any) -> None:
    """C14-017: a message sent while parked is queued (not delivered, no model request),
    the approval stays pending and the status ``awaiting_approval``; after the decision
    the tool's result is stored before the message, and one model request sees both."""
    bench = await make_bench(_script(Call("pay", {"amount": 5, "to": "bo"}, id="c1")))
    state, tid = await _park_pay(bench)
    await bench.runtime.send_message(tid, "also, hurry")
    await _parked(bench, tid)
    assert len(bench.provider.requests) == 1
    assert [a.state for a in await state.get_approvals()] == ["pending"]
    listed = await _messages(state)
    assert [(m.role, m.status) for m in listed] == [
        ("user", "completed"),
        ("assistant", "completed"),
        ("user", "pending"),
    ], listed
    [shown] = await state.get_approvals()
    await state.decide_approval("c1", approve=True, arguments_hash=shown.arguments_hash)
    await bench.runtime.wait_idle(tid, timeout=5)
    roles = [(m.role, m.content) for m in await _messages(state)]
    assert roles[2:] == [("tool", "paid 5 to bo"), ("user", "also, hurry"), ("assistant", "done")]
    assert len(bench.provider.requests) == 2
    assert bench.effect_lines() == ["pay 5 bo"]


async def test_c14_018_a_rule_decides_per_call_and_fails_closed(make_bench: Any) -> None:
    """C14-018: ``transfer``'s rule asks approval above 100 → 50 runs at once, 500 parks."""
    bench = await make_bench(
        _script(
            Call("transfer", {"amount": 50}, id="t1"), Call("transfer", {"amount": 500}, id="t2")
        )
    )
    state, _ = await _park_pay(bench)
    assert bench.effect_lines() == ["transfer 50"]
    assert [a.tool_call_id for a in await state.get_approvals()] == ["t2"]


async def test_c14_021_a_hook_narrows_who_may_decide(make_bench: Any) -> None:
    """C14-021: a ``before_decide_approval`` hook that answers ``False`` unless ``ann``
    decides → bob's approve is refused (``ApprovalForbidden``), the approval stays pending;
    ann's runs the tool; a hook that raises refuses too (fail closed)."""

    @hook("before_decide_approval", id="only_ann")
    def only_ann(state: Any, approval: Any, decision: Any) -> bool:
        if decision.decided_by == "boom":
            raise RuntimeError("cannot tell")
        return bool(decision.decided_by == "ann")

    bench = await make_bench(
        _script(Call("pay", {"amount": 5, "to": "bo"}, id="c1")), hooks=[only_ann]
    )
    state, tid = await _park_pay(bench)
    [shown] = await state.get_approvals()
    for who in ("bob", "boom"):
        with pytest.raises(ApprovalForbidden):
            await bench.runtime.decide_approval(
                tid, "c1", approve=True, arguments_hash=shown.arguments_hash, decided_by=who
            )
    assert [a.state for a in await bench.runtime.approvals(tid)] == ["pending"]
    await bench.runtime.decide_approval(
        tid, "c1", approve=True, arguments_hash=shown.arguments_hash, decided_by="ann"
    )
    await bench.runtime.wait_idle(tid, timeout=5)
    assert bench.effect_lines() == ["pay 5 bo"]


def _delegating(provider: ScriptedProvider) -> Definitions:
    """``boss`` delegates to a blocking ``payee`` subagent, a ``dual_ai`` agent whose side a
    may call ``pay``."""
    return Definitions().add(
        Model(name="M", provider=provider, model="scripted-1"),
        Prompt(
            name="BOSS",
            model="M",
            system="Delegate.",
            tools=[Subagent("payee", resumable=False, blocking=True)],
        ),
        Prompt(name="CA", model="M", system="You pay.", tools=["pay"]),
        Prompt(name="CB", model="M", system="You check."),
        Agent(name="boss", side_a=Side(prompt="BOSS"), side_b=Side(label="User")),
        Agent(
            name="payee",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Pays",
            max_session_turns=1,
            side_a=Side(prompt="CA"),
            side_b=Side(prompt="CB"),
        ),
        pay,
    )


async def test_c14_024_a_child_thread_parks_and_its_parent_waits(
    db_url: str, tmp_path: Any
) -> None:
    """C14-024: a blocking subagent's child calls ``pay`` → the child parks
    (``awaiting_approval``) and delivers no session result; the parent's call waits. The
    approval on the child runs ``pay`` once, the child's session ends, and the parent gets
    the result and answers."""

    EFFECTS["file"] = tmp_path / "child-effects.txt"
    provider = ScriptedProvider(
        [
            Reply.tool_calls(Call("payee", {"message": "pay bo"}, id="p1")),
            Reply.tool_calls(Call("pay", {"amount": 5, "to": "bo"}, id="c1")),
            Reply.text("paid"),
            Reply.text("fine"),
            Reply.text("done"),
        ]
    )
    defs = _delegating(provider)
    runtime = await Runtime.open(db_url, definitions=defs)
    try:
        parent = await runtime.create_thread("boss")
        await runtime.send_message(parent.thread_id, "go")
        child_id = None
        for _ in range(200):
            children = await parent.get_children()
            if children:
                child_id = children[0].reference
                child = await runtime.thread(child_id)
                if (await child.status()).reason == "awaiting_approval":
                    break
            await asyncio.sleep(0.02)
        assert child_id is not None
        child = await runtime.thread(child_id)
        assert (await child.status()).reason == "awaiting_approval"
        assert (await parent.status()).state == "running"  # its blocking call waits
        [shown] = await child.get_approvals()
        await child.decide_approval("c1", approve=True, arguments_hash=shown.arguments_hash)
        await runtime.wait_idle(parent.thread_id, timeout=10)
        page = await parent.get_messages(order="asc")
        assert page.messages[-1].content == "done"
        [result] = [m for m in page.messages if m.role == "tool"]
        assert result.tool_status == "success"
        assert (result.content or "").startswith("fine")  # the child session's last word
        assert EFFECTS["file"].read_text().splitlines() == ["pay 5 bo"]
    finally:
        await runtime.close(drain=0)


async def _parked_child(runtime: Runtime, parent: Any) -> Any:
    for _ in range(200):
        children = await parent.get_children()
        if children:
            child = await runtime.thread(children[0].reference)
            if (await child.status()).reason == "awaiting_approval":
                return child
        await asyncio.sleep(0.02)
    raise AssertionError("the child did not park")


async def test_c14_025_a_cascading_stop_cancels_a_parked_childs_approval(
    db_url: str, tmp_path: Any
) -> None:
    """C14-025: the parent of a child parked for approval is stopped with ``cascade`` →
    the child's approval is cancelled and its call answered ``Not run``; a later decision
    is refused; ``pay`` never ran."""
    EFFECTS["file"] = tmp_path / "cascade-effects.txt"
    provider = ScriptedProvider(
        [
            Reply.tool_calls(Call("payee", {"message": "pay bo"}, id="p1")),
            Reply.tool_calls(Call("pay", {"amount": 5, "to": "bo"}, id="c1")),
        ]
    )
    runtime = await Runtime.open(db_url, definitions=_delegating(provider))
    try:
        parent = await runtime.create_thread("boss")
        await runtime.send_message(parent.thread_id, "go")
        child = await _parked_child(runtime, parent)
        [shown] = await child.get_approvals()
        await runtime.stop(parent.thread_id, cascade=True)
        [after] = await child.get_approvals()
        assert after.state == "cancelled"
        with pytest.raises(ApprovalConflict):
            await child.decide_approval("c1", approve=True, arguments_hash=shown.arguments_hash)
        results = [m for m in (await child.get_messages(order="asc")).messages if m.role == "tool"]
        assert [r.content for r in results] == [
            "Not run: the call was not approved before the run ended (aborted_by_user)."
        ]
        assert not EFFECTS["file"].exists()
    finally:
        await runtime.close(drain=0)
