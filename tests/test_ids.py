"""Identifiers (threadloom/records/ids.py): canonical UUID4s, unique, and never shared with a
forked child (the pooled randomness is cleared in the child)."""

from __future__ import annotations

import os
import re
import uuid

from threadloom.records import new_call_id, new_id


def test_new_id_is_a_canonical_uuid4_and_unique() -> None:
    ids = [new_id() for _ in range(50_000)]
    assert len(set(ids)) == len(ids)
    for text in ids[:5_000]:
        parsed = uuid.UUID(text)
        assert str(parsed) == text  # canonical lowercase form
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_new_call_id_is_call_and_32_hex() -> None:
    assert re.fullmatch(r"call_[0-9a-f]{32}", new_call_id())


def test_a_forked_child_does_not_repeat_the_parents_ids() -> None:
    new_id()  # the pool is filled in the parent
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write its next ids and leave at once
        os.close(read)
        os.write(write, " ".join(new_id() for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    os.waitpid(pid, 0)
    parent = [new_id() for _ in range(10)]
    assert len(child) == 10
    assert not set(child) & set(parent)


def test_ids_made_by_many_threads_at_once_are_unique() -> None:
    """Ids are popped from a shared pool that any thread may refill: none is handed out
    twice, none is lost to a refill race."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        batches = list(pool.map(lambda _: [new_id() for _ in range(5_000)], range(8)))
    ids = [i for batch in batches for i in batch]
    assert len(ids) == 40_000
    assert len(set(ids)) == len(ids)
    assert all(uuid.UUID(i).version == 4 for i in ids[::97])
