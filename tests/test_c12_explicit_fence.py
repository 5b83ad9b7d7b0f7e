"""Spec 12 §12.3.3: an execution's writes of its thread are checked against its lease, the
fence passed explicitly (``Store.fenced``, ``ThreadState.fence``). On SQLite there is no
lease and ``fenced`` is the store itself; on PostgreSQL a write under a fence that is not
the thread's lease writes nothing and raises ``LeaseLost``, and writes of other threads
under it are not checked."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from threadloom import Runtime
from threadloom.errors import LeaseLost
from threadloom.records import new_id
from threadloom.store.base import Fence, Lease, NewThread
from threadloom.thread.state import ThreadState


@dataclass
class _Holder:
    """Holds a fence as a run does (``Run.fence``)."""

    fence: Fence | None


async def test_a_write_under_a_fence_that_is_not_the_lease_writes_nothing(
    runtime: Runtime,
) -> None:
    row = await runtime.store.create_thread(NewThread(id=new_id(), agent_id="a"))
    other = await runtime.store.create_thread(NewThread(id=new_id(), agent_id="a"))
    assert row is not None and other is not None
    store = runtime.store
    assert store.fenced(None) is store
    stale = Fence(row.id, Lease("a node that lost it", 99))
    holder = _Holder(stale)
    fenced = ThreadState(runtime.hub, row, fenced_by=holder)
    assert fenced.fence is stale
    if runtime.store.kind == "sqlite":
        assert store.fenced(stale) is store  # no leases: nothing is checked
        await fenced.inject_message(role="user", content="written")
        return
    with pytest.raises(LeaseLost):
        await fenced.inject_message(role="user", content="not written")
    assert (await ThreadState(runtime.hub, row).get_messages()).messages == []
    # another thread's write under the same fence is not checked
    await ThreadState(runtime.hub, other, fenced_by=holder).inject_message(
        role="user", content="the other thread"
    )
    # the holder's fence is read at each write: released, the writes are no execution's
    holder.fence = None
    assert fenced.fence is None
    await fenced.inject_message(role="user", content="written after the release")
    page = await ThreadState(runtime.hub, row).get_messages()
    assert [m.content for m in page.messages] == ["written after the release"]
