"""A request stored as a new root at the delta chain's depth cap takes its kept messages'
boundaries from the chain (``bodies._chain_lengths``, one recursive statement): kept
messages from every row of the chain, none kept, and a chain with a row missing (the
request is then stored as plain text, and still reads back exactly). Real ``Runtime``;
raw SQL only to break the chain and to assert the storage."""

from __future__ import annotations

from test_log_request_delta import body, fragment, q, row, storage

from store_probe import probe
from threadloom import Runtime
from threadloom.store.core.bodies import MAX_CHAIN_DEPTH


async def _chain_to_the_cap(runtime: Runtime, tid: str) -> tuple[list[str], list[str]]:
    """Rows at depth 0..64, each adding one message (and the 10th, 20th … dropping one)."""
    messages: list[str] = []
    base: str | None = None
    ids: list[str] = []
    for n in range(MAX_CHAIN_DEPTH + 1):
        keep = len(messages)
        if n % 10 == 9:
            keep -= 1
            messages = messages[:keep]
        messages = [*messages, fragment(n, "m" * (n % 7))]
        stored, _ = await runtime.store.insert_log(tid, row(messages, base, keep))
        ids.append(stored.id)
        base = stored.id
    assert storage(runtime, ids[-1])[1] == MAX_CHAIN_DEPTH  # type: ignore[index]
    return ids, messages


async def test_a_root_at_the_cap_takes_boundaries_from_the_whole_chain(
    runtime: Runtime,
) -> None:
    tid = (await runtime.create_thread("a")).thread_id
    ids, messages = await _chain_to_the_cap(runtime, tid)
    for keep in (len(messages) - 3, len(messages)):
        grown = [*messages[:keep], fragment(1000 + keep)]
        stored, _ = await runtime.store.insert_log(tid, row(grown, ids[-1], keep))
        assert storage(runtime, stored.id) == (None, 0, 0, len(grown), 0, 1)
        lengths = q(runtime, "SELECT lengths FROM log_requests WHERE log_id = ?", stored.id)
        assert lengths == [(str([len(m) for m in grown]),)]
        # a delta on the new root reads back exactly: its boundaries are right
        more = [*grown, fragment(2000 + keep)]
        delta, _ = await runtime.store.insert_log(tid, row(more, stored.id, len(grown)))
        assert storage(runtime, delta.id) == (stored.id, 1, len(grown), len(more), 0, 0)
        got = await runtime.store.get_log(tid, delta.id)
        assert got is not None and got.request_body == body(more)


async def test_a_root_at_the_cap_keeping_nothing(runtime: Runtime) -> None:
    tid = (await runtime.create_thread("a")).thread_id
    ids, _ = await _chain_to_the_cap(runtime, tid)
    fresh = [fragment(5000)]
    stored, _ = await runtime.store.insert_log(tid, row(fresh, ids[-1], 0))
    assert storage(runtime, stored.id) == (None, 0, 0, 1, 0, 1)
    got = await runtime.store.get_log(tid, stored.id)
    assert got is not None and got.request_body == body(fresh)


async def test_a_broken_chain_at_the_cap_stores_plain_text(runtime: Runtime) -> None:
    tid = (await runtime.create_thread("a")).thread_id
    ids, messages = await _chain_to_the_cap(runtime, tid)
    probe(runtime).execute("DELETE FROM log_requests WHERE log_id = ?", (ids[30],))
    grown = [*messages, fragment(9000)]
    stored, _ = await runtime.store.insert_log(tid, row(grown, ids[-1], len(messages)))
    assert storage(runtime, stored.id) is None  # plain text in log_bodies
    got = await runtime.store.get_log(tid, stored.id)
    assert got is not None and got.request_body == body(grown)
