"""Tool-call approvals in the Python client (spec 14, "Surfaces": C14-030 to C14-033), against
the real server: the calls, their typed errors, the stream's approval frames and the
session's view.

The ``payer`` agent's model calls ``pay`` (needs approval) once for "pay", twice (in one
step) for "pay two", and answers text after the results; ``pay`` appends to ``PAID`` when
it really runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from payer import PAID, payer
from server.conftest import USERS, Api
from threadloom.client import (
    ApprovalConflictError,
    ApprovalNotFoundError,
    AsyncClient,
    Client,
    ConflictError,
    NotFoundError,
)
from threadloom.client.chat import Outcome
from threadloom.client.frames import (
    ApprovalDecidedFrame,
    ApprovalRequestedFrame,
    Frame,
    ThreadStatusFrame,
)
from threadloom.client.models import Approval, ApprovalList
from threadloom.client.reduce import ThreadView


@pytest.fixture
async def pay_api(make_api: Any) -> Api:
    PAID.clear()
    made: Api = await make_api(extra=payer())
    return made


@pytest.fixture
async def alice(pay_api: Api) -> Any:
    async with AsyncClient(pay_api.base, token=pay_api.keys["alice"]) as made:
        yield made


async def parked(api: Api, client: AsyncClient, text: str = "pay") -> str:
    thread = (await client.threads.create("payer")).thread_id
    await client.messages.send(thread, text)
    await api.settle(thread)
    return thread


async def test_c14_030_list_approve_and_reject_through_the_client(
    pay_api: Api, alice: AsyncClient
) -> None:
    """C14-030: ``threads.get`` shows the parked thread's pending approvals (typed
    ``Approval``), ``threads.approvals`` lists them; ``approve`` with the shown hash answers
    the approved approval and the tool runs once; ``reject`` with a reason answers the
    rejected one and its tool never runs — async and blocking clients alike."""
    thread = await parked(pay_api, alice, "pay two")
    detail = await alice.threads.get(thread)
    assert detail.status.reason == "awaiting_approval"
    assert [type(a) for a in detail.approvals] == [Approval, Approval]
    bo, eve = sorted(detail.approvals, key=lambda a: a.arguments["to"])
    assert (bo.tool, bo.arguments, bo.state) == ("pay", {"amount": 5, "to": "bo"}, "pending")
    listed = await alice.threads.approvals(thread)
    assert isinstance(listed, ApprovalList) and listed.pending == 2
    approved = await alice.threads.approve(thread, bo.tool_call_id, bo.arguments_hash)
    assert isinstance(approved, Approval) and approved.state == "approved"
    assert approved.decided_by == USERS["alice"].id

    def reject_blocking() -> Approval:
        with Client(pay_api.base, token=pay_api.keys["alice"]) as sync:
            assert sync.threads.approvals(thread).pending == 1
            return sync.threads.reject(thread, eve.tool_call_id, reason="too much")

    rejected = await asyncio.to_thread(reject_blocking)
    assert (rejected.state, rejected.reason) == ("rejected", "too much")
    await pay_api.settle(thread)
    assert PAID == [(5, "bo")]
    after = await alice.threads.get(thread)
    assert after.approvals == [] and after.status.reason == "stop_on_response"
    states = {a.tool_call_id: a.state for a in (await alice.threads.approvals(thread)).approvals}
    assert states == {bo.tool_call_id: "approved", eve.tool_call_id: "rejected"}


async def test_c14_031_typed_errors_for_unknown_stale_and_repeated_decisions(
    pay_api: Api, alice: AsyncClient
) -> None:
    """C14-031: an unknown tool call → ``ApprovalNotFoundError`` (a ``NotFoundError``,
    404 ``approval_not_found``); a hash that is not the one shown → ``ApprovalConflictError``
    (a ``ConflictError``, 409); a second decision → ``ApprovalConflictError`` whose
    ``state`` is the first decision's; nothing ran but the one approval."""
    thread = await parked(pay_api, alice)
    [shown] = (await alice.threads.get(thread)).approvals
    with pytest.raises(ApprovalNotFoundError) as unknown:
        await alice.threads.reject(thread, "call_nope")
    assert isinstance(unknown.value, NotFoundError)
    assert (unknown.value.status, unknown.value.code) == (404, "approval_not_found")
    with pytest.raises(ApprovalConflictError) as stale:
        await alice.threads.approve(thread, shown.tool_call_id, "sha256:" + "0" * 64)
    assert isinstance(stale.value, ConflictError) and stale.value.status == 409
    await alice.threads.approve(thread, shown.tool_call_id, shown.arguments_hash)
    with pytest.raises(ApprovalConflictError) as again:
        await alice.threads.reject(thread, shown.tool_call_id, reason="changed my mind")
    assert again.value.state == "approved"
    await pay_api.settle(thread)
    assert PAID == [(5, "bo")]


async def test_c14_032_the_stream_carries_typed_approval_frames(
    pay_api: Api, alice: AsyncClient
) -> None:
    """C14-032: the thread's stream (read from before the send) carries
    ``ApprovalRequestedFrame`` (state pending) before the parked status, then, after a
    decision, ``ApprovalDecidedFrame`` with the decided approval; both are durable."""
    thread = (await alice.threads.create("payer")).thread_id
    frames: list[Frame] = []

    async def read() -> None:
        async with alice.stream(thread) as stream:
            async for frame in stream:
                frames.append(frame)
                if isinstance(frame, ThreadStatusFrame) and frame.status.reason == (
                    "stop_on_response"
                ):
                    return

    reader = asyncio.create_task(read())
    await alice.messages.send(thread, "pay")
    await pay_api.settle(thread)
    async with asyncio.timeout(10):
        while not any(isinstance(f, ApprovalRequestedFrame) for f in frames):
            await asyncio.sleep(0.02)
    [requested] = [f for f in frames if isinstance(f, ApprovalRequestedFrame)]
    assert requested.durable and requested.data.state == "pending"
    assert requested.tool_call_id == requested.data.tool_call_id
    await alice.threads.approve(thread, requested.tool_call_id, requested.data.arguments_hash)
    async with asyncio.timeout(10):
        await reader
    [decided] = [f for f in frames if isinstance(f, ApprovalDecidedFrame)]
    assert decided.durable and decided.data.state == "approved"
    assert decided.seq > requested.seq
    parked_at = next(
        i
        for i, f in enumerate(frames)
        if isinstance(f, ThreadStatusFrame) and f.status.reason == "awaiting_approval"
    )
    assert frames.index(requested) < parked_at < frames.index(decided)


def pending(count: int) -> Any:
    def done(view: ThreadView) -> bool:
        return len(view.pending_approvals) == count and not view.running

    return done


async def test_c14_033_a_session_shows_pending_approvals_and_decides_them(
    pay_api: Api, alice: AsyncClient
) -> None:
    """C14-033: a session opened on a parked thread shows its pending approvals
    (``view.pending_approvals``, from the thread read); a session that watched the call
    being made shows it from the frames; ``session.approve(id)`` names the hash the view
    shows, ``session.reject`` decides the other; the view follows (states, the messages of
    the parked run are PAUSED) and the run goes on."""
    thread = await parked(pay_api, alice, "pay two")
    async with alice.session(thread) as session:
        view = await session.wait_for(pending(2))
        assert view.status is not None and view.status.reason == "awaiting_approval"
        issued = [m for m in view.messages if m.tool_uses]
        assert issued and issued[-1].delivery.outcome in (Outcome.PAUSED, Outcome.SUCCESS)
    other = (await alice.threads.create("payer")).thread_id
    async with alice.session(other) as watcher:
        await watcher.send("pay two")
        view = await watcher.wait_for(pending(2))
        bo, eve = sorted(view.pending_approvals, key=lambda a: a.arguments["to"])
        with pytest.raises(KeyError):
            await watcher.approve("call_not_shown")
        approved = await watcher.approve(bo.tool_call_id)
        assert approved.state == "approved" and approved.arguments_hash == bo.arguments_hash
        view = await watcher.wait_for(pending(1))
        assert view.approvals[bo.tool_call_id].state == "approved"
        await watcher.reject(eve.tool_call_id, "no")
        view = await watcher.wait_for(
            lambda v: (
                not v.running
                and v.status is not None
                and v.status.reason == "stop_on_response"
                and v.approvals[eve.tool_call_id].state == "rejected"
            )
        )
        results = {c.args["to"]: c.status for c in view.tool_calls.values() if c.args}
        assert results == {"bo": "complete", "eve": "error"}
    assert PAID == [(5, "bo")]
