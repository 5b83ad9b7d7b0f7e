"""Spec 06 §6.11: the registry reconciler — on reads of a parent's registry (at most once
per 60 s per parent) and after start-up recovery, open entries follow their children.

Children are made with ``create_thread(parent=…)`` and a seeded registry entry (so that
the reconciler meets children that changed behind their parent's back); child run states
are set through the real store, as the engine would leave them.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from fakes import FakeClock
from pg_support import integrity_errors
from threadloom import Runtime, ThreadState
from threadloom.errors import StoreError, ThreadNotFound
from threadloom.records import QueueEntry, SubagentRegistryEntry, ThreadStatus
from threadloom.store.base import NewThread
from threadloom.thread.family import RECONCILE_EVERY_US

SECOND = 1_000_000


async def add_child(rt: Runtime, parent: ThreadState, status: str = "running") -> str:
    child = await rt.create_thread("child", parent=parent.thread_id)
    await rt.store.upsert_registry_entry(
        parent.thread_id,
        SubagentRegistryEntry(
            reference=child.thread_id,
            relationship="worker",
            owner="a",
            name="W",
            status=status,
            resumable=True,
        ),
    )
    return child.thread_id


async def set_run_state(rt: Runtime, thread_id: str, state: str, reason: str | None) -> None:
    await rt.store.set_status(
        thread_id,
        ThreadStatus(state=state, since=rt.hub.clock(), reason=reason),  # type: ignore[arg-type]
    )


async def statuses(parent: ThreadState) -> dict[str, str]:
    return {e.reference: e.status for e in await parent.get_children()}


async def test_c06_040_deleted_child_entry_becomes_terminated(tmp_path: Path) -> None:
    """C06-040: registry entry ``running`` whose child thread was deleted → the next
    registry read (≥ 60 s after the previous reconciliation) sets it ``terminated``."""
    clock = FakeClock()
    rt = await Runtime.open(f"sqlite:///{tmp_path / 't.db'}", clock=clock)
    try:
        parent = await rt.create_thread("parent")
        child = await add_child(rt, parent)
        await set_run_state(rt, child, "running", None)
        assert await statuses(parent) == {child: "running"}  # reconciled: child is running

        assert await rt.store.delete_thread(child) == [child]
        clock.now += RECONCILE_EVERY_US - 1
        assert await statuses(parent) == {child: "running"}  # within 60 s: not checked

        clock.now += 1
        with rt.events.subscribe(parent.thread_id, kinds=["subagent"]) as sub:
            assert await statuses(parent) == {child: "terminated"}
            frames = sub.drain()
        assert [(f.kind, f.data["entry"]["status"]) for f in frames] == [("subagent", "terminated")]
        assert await statuses(parent) == {child: "terminated"}  # settled: left alone
    finally:
        await rt.close()


async def test_reconciler_rules_for_each_child_state(tmp_path: Path) -> None:
    """§6.11: terminated child → ``terminated``; idle child, empty queue → ``idle`` (a
    ``set_status`` label included); failed child → ``failed``; a running child or one with
    queued entries is left alone; ``idle``/``failed`` entries are never rewritten."""
    clock = FakeClock()
    rt = await Runtime.open(f"sqlite:///{tmp_path / 't.db'}", clock=clock)
    try:
        parent = await rt.create_thread("parent")
        terminated = await add_child(rt, parent)
        labelled_idle = await add_child(rt, parent, status="halfway")
        failed = await add_child(rt, parent)
        running = await add_child(rt, parent)
        queued = await add_child(rt, parent)
        kept_failed = await add_child(rt, parent, status="failed")

        await rt.store.terminate(terminated)
        await set_run_state(rt, failed, "failed", "model_error")
        await set_run_state(rt, running, "running", None)
        await rt.store.enqueue(
            queued,
            QueueEntry(
                id=str(uuid.uuid4()),
                role="user",
                content="more",
                source="parent",
                created_at=0,
            ),
            clear_stop=False,
        )
        # a failed entry whose child is idle again stays failed: only open entries are read
        assert await statuses(parent) == {
            terminated: "terminated",
            labelled_idle: "idle",
            failed: "failed",
            running: "running",
            queued: "running",
            kept_failed: "failed",
        }
    finally:
        await rt.close()


async def test_restart_reconciles_the_entry_of_a_lost_child_run(tmp_path: Path) -> None:
    """§6.11 after start-up recovery: a child whose run was lost settles
    ``failed``/``execution_lost`` and its parent's entry becomes ``failed`` before any
    read (the queued failure message to the parent arrives with session results, C06-039)."""
    url = f"sqlite:///{tmp_path / 't.db'}"
    rt = await Runtime.open(url)
    parent = await rt.create_thread("parent")
    child = await add_child(rt, parent)
    await set_run_state(rt, child, "running", None)
    await rt.close()

    reopened = await Runtime.open(url)
    try:
        (entry,) = await reopened.store.get_registry(parent.thread_id)
        assert entry.status == "failed"
        status = await (await reopened.thread(child)).status()
        assert (status.state, status.reason) == ("failed", "execution_lost")
    finally:
        await reopened.close()


def child_of(parent_id: str, **fields: object) -> tuple[NewThread, SubagentRegistryEntry]:
    new = NewThread(id=str(uuid.uuid4()), agent_id="child", parent_id=parent_id)
    entry = {"relationship": "worker", "owner": "a", "name": "child", "status": "running"}
    return new, SubagentRegistryEntry.model_construct(reference=new.id, **{**entry, **fields})


async def test_create_child_writes_thread_and_entry_together(runtime: Runtime) -> None:
    """§6.6.1 step 3: the child thread and the parent's registry entry are one transaction
    with the parent's ``subagent`` event; a failure in either leaves neither."""
    parent = await runtime.create_thread("parent")
    new, entry = child_of(parent.thread_id)
    row, event = await runtime.store.create_child(new, entry)
    assert (row.id, row.parent_id, row.status.state) == (new.id, parent.thread_id, "idle")
    assert (event.thread_id, event.kind, event.entity_id) == (parent.thread_id, "subagent", new.id)
    (stored,) = await runtime.store.get_registry(parent.thread_id)
    assert (stored.reference, stored.status) == (new.id, "running")
    parent_row = await runtime.store.get_thread(parent.thread_id)
    assert parent_row is not None and parent_row.has_children is True
    child_row = await runtime.store.get_thread(new.id)
    assert child_row is not None and child_row.has_children is False  # runs skip the read

    # the entry violates the registry's CHECK after the thread row was inserted: rolled back
    bad_new, bad_entry = child_of(parent.thread_id, owner="c")
    with pytest.raises(integrity_errors()):
        await runtime.store.create_child(bad_new, bad_entry)
    assert await runtime.store.get_thread(bad_new.id) is None
    assert [e.reference for e in await runtime.store.get_registry(parent.thread_id)] == [new.id]

    orphan_new, orphan_entry = child_of(str(uuid.uuid4()))
    with pytest.raises(ThreadNotFound):
        await runtime.store.create_child(orphan_new, orphan_entry)
    assert await runtime.store.get_thread(orphan_new.id) is None
    mismatched, _ = child_of(parent.thread_id)
    with pytest.raises(StoreError):
        await runtime.store.create_child(mismatched, entry)
    assert await runtime.store.get_thread(mismatched.id) is None
