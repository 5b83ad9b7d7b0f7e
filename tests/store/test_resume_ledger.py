"""The store's side of spec 16 on both stores: recorded tool starts (the effect ledger) and
the settlement of a lost run that resumes, with its count of resumes in a row. Real
``Runtime`` on a real store; the lost run is made by writing a ``running`` status."""

from __future__ import annotations

from dataclasses import replace

from threadloom import Runtime
from threadloom.records import (
    Approval,
    ApprovalDecision,
    Message,
    ThreadStatus,
    ToolCall,
    ToolCallFunction,
    arguments_hash,
    encode_tool_calls,
    new_id,
)
from threadloom.store.base import LOST_RUN


def _call(call_id: str, name: str = "charge", arguments: str = '{"amount":1}') -> ToolCall:
    return ToolCall(id=call_id, function=ToolCallFunction(name=name, arguments=arguments))


async def _model_message(rt: Runtime, tid: str, calls: list[ToolCall], depth: int = 0) -> Message:
    message = Message(
        id=new_id(),
        role="assistant",
        content=None,
        tool_calls=encode_tool_calls(calls),
        prompt="P",
        depth=depth,
    )
    stored, _ = await rt.store.insert_message(tid, message)
    return stored


async def test_record_tool_starts_keeps_an_approval_and_lists_consumed_ones(
    runtime: Runtime,
) -> None:
    tid = (await runtime.create_thread("a")).thread_id
    calls = [_call("c1"), _call("c2", "fetch", "not json"), _call("c3", "pay", '{"to":"bo"}')]
    message = await _model_message(runtime, tid, calls)
    pending = Approval(
        thread_id=tid,
        tool_call_id="c3",
        message_id=message.id,
        tool="pay",
        arguments={"to": "bo"},
        arguments_hash=arguments_hash({"to": "bo"}),
        state="pending",
        requested_at=0,
    )
    await runtime.store.request_approvals(tid, [pending])

    await runtime.store.record_tool_starts(tid, message.id, calls)

    starts = await runtime.store.tool_starts(tid)
    assert set(starts) == {"c1", "c2"}  # the approval's row is kept: not started
    (approval,) = await runtime.store.list_approvals(tid)
    assert (approval.state, approval.started_at) == ("pending", None)
    decision = ApprovalDecision(approve=True, arguments_hash=approval.arguments_hash)
    await runtime.store.decide_approval(tid, "c3", decision)
    assert await runtime.store.consume_approval(tid, "c3") is not None
    assert set(await runtime.store.tool_starts(tid)) == {"c1", "c2", "c3"}
    await runtime.store.record_tool_starts(tid, message.id, [])  # nothing to record


async def test_a_resumable_settlement_leaves_top_level_calls_and_counts(
    runtime: Runtime,
) -> None:
    tid = (await runtime.create_thread("a")).thread_id
    store = runtime.store
    lost = replace(LOST_RUN, resume_limit=2)

    async def lose() -> None:
        await store.set_status(tid, ThreadStatus(state="running", since=store.clock(), reason=None))  # type: ignore[attr-defined]

    await lose()
    await _model_message(runtime, tid, [_call("top")])
    await _model_message(runtime, tid, [_call("nested")], depth=1)
    first = await store.settle_resumable(tid, lost)
    assert first.resume == 1 and first.events[-1].kind == "status"
    history = await store.top_level_history(tid)
    assert not [m for m in history if m.role == "tool"]  # the top-level call stays open
    row = await store.get_thread(tid)
    assert row is not None
    assert (row.status.state, row.status.reason) == ("failed", "execution_lost")
    assert row.status.error is not None and row.status.error.type == "ExecutionLost"
    await lose()
    assert (await store.settle_resumable(tid, lost)).resume == 2
    await lose()
    await _model_message(runtime, tid, [_call("again")])
    final = await store.settle_resumable(tid, lost)  # the count reached the limit
    assert final.resume == 0 and final.events
    row = await store.get_thread(tid)
    assert row is not None and row.status.error is not None
    assert row.status.error.type == "ResumesExhausted"
    assert "after 2 resumes in a row (max_resumes 2)" in row.status.error.message
    answered = [m for m in await store.top_level_history(tid) if m.role == "tool"]
    assert [(m.tool_call_id, m.tool_status) for m in answered] == [("again", "error")]
    await lose()  # the count went back to 0: resumed again
    assert (await store.settle_resumable(tid, lost)).resume == 1
    await store.clear_resumes(tid)
    await lose()
    assert (await store.settle_resumable(tid, lost)).resume == 1
    assert (await store.settle_resumable(tid, lost)).events == []  # not running: nothing


async def test_a_stopped_threads_lost_run_is_settled_for_good(runtime: Runtime) -> None:
    tid = (await runtime.create_thread("a")).thread_id
    store = runtime.store
    await store.set_status(tid, ThreadStatus(state="running", since=store.clock(), reason=None))  # type: ignore[attr-defined]
    await _model_message(runtime, tid, [_call("c1")])
    await store.set_stopped(tid, True)
    settled = await store.settle_resumable(tid, replace(LOST_RUN, resume_limit=3))
    assert settled.resume == 0 and settled.events
    row = await store.get_thread(tid)
    assert row is not None and row.status.error is not None
    assert row.status.error.type == "ExecutionLost"  # the reason's own (spec 01 §1.7.4)
    answered = [m for m in await store.top_level_history(tid) if m.role == "tool"]
    assert [m.content for m in answered] == [LOST_RUN.tool_result_text]
