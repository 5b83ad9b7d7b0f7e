"""LLM request bodies stored as deltas (store/core/bodies.py): every read returns exactly
the ``request_body`` a row was inserted with, whatever the delta and however it is stored.

Real ``Runtime`` on a real SQLite file; raw SQL on the file only to assert the storage."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from typing import Any

import pytest

from store_probe import probe
from threadloom import Runtime
from threadloom.records import LogRow, json_compact, new_id
from threadloom.store.base import RequestDelta
from threadloom.store.core.bodies import MAX_CHAIN_DEPTH
from threadloom.store.sqlite import schema
from threadloom.store.sqlite.store import path_from_url

PREFIX = '{"model":"m","messages":['
SUFFIX = '],"tools":[{"name":"look","parameters":{"type":"object"}}],"_metadata":{"p":"x"}}'


def q(rt: Runtime, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return probe(rt).rows(sql, params)


def fragment(n: int, text: str = "") -> str:
    """One message's JSON text, with commas, brackets, escapes and non-ASCII characters
    (two of them outside the BMP) inside its strings."""
    return json_compact(
        {"role": "user", "content": f'message {n}, [with] {{braces}} "quotes" é🧵𝄞 {text}'}
    )


def body(messages: Sequence[str], suffix: str = SUFFIX) -> str:
    return PREFIX + ",".join(messages) + suffix


def row(
    messages: Sequence[str],
    base: str | None,
    keep: int,
    *,
    suffix: str = SUFFIX,
    fragments: Sequence[str] | None = None,
    whole: Callable[[], str] | None = None,
    length: int | None = None,
    **fields: Any,
) -> LogRow:
    """An LLM row whose request holds ``messages``, described as a delta on ``base``; with
    ``whole`` (and ``length``) the body is given lazily instead of as ``request_body``."""
    own = tuple(messages[keep:] if fragments is None else fragments)
    return LogRow(
        id=new_id(),
        provider="scripted",
        model="m",
        created_at=0,
        is_complete=False,
        endpoint="chat.completions",
        request_body=None if whole is not None else body(messages, suffix),
        request_delta=RequestDelta(base, keep, PREFIX, own, suffix, whole=whole, length=length),
        **fields,
    )


def storage(rt: Runtime, log_id: str) -> tuple[Any, ...] | None:
    """(base_id, depth, keep, count, has its own suffix, has a full body) or None."""
    found = q(
        rt,
        "SELECT r.base_id, r.depth, r.keep, r.count, r.suffix IS NOT NULL,"
        " EXISTS(SELECT 1 FROM log_bodies b WHERE b.log_id = r.log_id AND b.part = 'request')"
        " FROM log_requests r WHERE r.log_id = ?",
        log_id,
    )
    return found[0] if found else None


async def test_chain_of_200_rows_reads_back_every_body_exactly(runtime: Runtime) -> None:
    """Growing histories with a changed tail now and then, a changed suffix now and then,
    retries (nothing new) and roots at the depth cap: each read equals the inserted text,
    and ``list_logs`` (which shares work along the chain) equals ``get_log`` row by row."""
    state = await runtime.create_thread("a")
    tid = state.thread_id
    rng = random.Random(7)
    messages: list[str] = []
    suffix = SUFFIX
    base: str | None = None
    inserted: list[LogRow] = []
    for n in range(200):
        keep = len(messages)
        if n % 10 == 9 and len(messages) > 3:  # the tail changed: drop two, add new ones
            keep = len(messages) - 2
            messages = messages[:keep]
        if n % 25 == 24:
            suffix = SUFFIX.replace('"x"', f'"x{n}"')
        if n % 17 != 16:  # every 17th is a retry: the same messages again
            messages = messages + [fragment(n * 10 + k, "x" * n) for k in range(rng.randint(1, 3))]
        stored, _ = await runtime.store.insert_log(tid, row(messages, base, keep, suffix=suffix))
        assert stored.request_delta is None
        inserted.append(stored)
        base = stored.id
    for stored in inserted:
        again = await runtime.store.get_log(tid, stored.id)
        assert again == stored
    listed = await runtime.store.list_logs(tid, limit=None)
    assert [r.id for r in listed] == [r.id for r in inserted]
    assert listed == inserted
    assert await runtime.store.list_logs(tid, limit=20, offset=150) == inserted[150:170]
    roots = [i for i, r in enumerate(inserted) if storage(runtime, r.id)[1] == 0]  # type: ignore[index]
    assert roots == list(range(0, 200, MAX_CHAIN_DEPTH + 1))
    bodies = q(runtime, "SELECT COUNT(*) FROM log_bodies WHERE part = 'request'")[0][0]
    assert bodies == len(roots)


async def test_depth_cap_starts_a_new_root(runtime: Runtime) -> None:
    """The row whose base is at depth 64 is stored whole (depth 0), and the next row is a
    delta on it."""
    tid = (await runtime.create_thread("a")).thread_id
    messages = [fragment(0)]
    base: str | None = None
    ids = []
    for n in range(MAX_CHAIN_DEPTH + 3):
        keep = len(messages) if base else 0
        messages = [*messages, fragment(n + 1)]
        stored, _ = await runtime.store.insert_log(tid, row(messages, base, keep))
        ids.append(stored.id)
        base = stored.id
    depths = [storage(runtime, i)[1] for i in ids]  # type: ignore[index]
    assert depths == [*range(MAX_CHAIN_DEPTH + 1), 0, 1]
    cap = storage(runtime, ids[MAX_CHAIN_DEPTH + 1])
    assert cap == (None, 0, 0, MAX_CHAIN_DEPTH + 3, 0, 1)  # a root: full body, every boundary
    assert storage(runtime, ids[-1]) == (ids[-2], 1, MAX_CHAIN_DEPTH + 3, MAX_CHAIN_DEPTH + 4, 0, 0)
    for log_id, n in zip(ids, range(len(ids)), strict=True):
        got = await runtime.store.get_log(tid, log_id)
        assert got is not None and got.request_body == body([fragment(k) for k in range(n + 2)])
    # at the cap again, keeping fewer messages than the base has: a root whose boundaries
    # come from the chain; a delta on it keeps some of them
    deepest = ids[MAX_CHAIN_DEPTH]
    shorter = [*[fragment(k) for k in range(30)], fragment(1000)]
    cut, _ = await runtime.store.insert_log(tid, row(shorter, deepest, 30))
    assert storage(runtime, cut.id) == (None, 0, 0, 31, 0, 1)
    child, _ = await runtime.store.insert_log(tid, row([*shorter[:12], fragment(7)], cut.id, 12))
    assert storage(runtime, child.id) == (cut.id, 1, 12, 13, 0, 0)
    for stored in (cut, child):
        assert await runtime.store.get_log(tid, stored.id) == stored


async def test_unusable_bases_store_a_root_that_serves_as_a_base(runtime: Runtime) -> None:
    """A missing base, another thread's row, or a keep beyond the base's messages: the row
    is stored whole with its message boundaries found in its text, and a later delta on it
    reads back exactly."""
    tid = (await runtime.create_thread("a")).thread_id
    other = (await runtime.create_thread("a")).thread_id
    three = [fragment(1), fragment(2), fragment(3)]
    theirs, _ = await runtime.store.insert_log(other, row(three, None, 0))
    ours, _ = await runtime.store.insert_log(tid, row(three, None, 0))
    cases = {
        "missing": (new_id(), 2),
        "other thread": (theirs.id, 2),
        "keep too large": (ours.id, 4),
    }
    for name, (base, keep) in cases.items():
        messages = [fragment(k, name) for k in range(5)]
        stored, _ = await runtime.store.insert_log(tid, row(messages, base, keep))
        assert storage(runtime, stored.id) == (None, 0, 0, 5, 0, 1), name
        got = await runtime.store.get_log(tid, stored.id)
        assert got is not None and got.request_body == stored.request_body, name
        later = [*messages[:3], fragment(9)]
        child, _ = await runtime.store.insert_log(tid, row(later, stored.id, 3))
        assert storage(runtime, child.id) == (stored.id, 1, 3, 4, 0, 0), name
        got = await runtime.store.get_log(tid, child.id)
        assert got is not None and got.request_body == body(later), name


async def test_a_delta_that_does_not_describe_its_body_is_stored_as_text(
    runtime: Runtime,
) -> None:
    """Wrong fragments, a wrong prefix, kept messages not in the text: the body is stored
    as plain text (no delta), and reads back exactly."""
    tid = (await runtime.create_thread("a")).thread_id
    messages = [fragment(1), fragment(2)]
    first, _ = await runtime.store.insert_log(tid, row(messages, None, 0))
    three = [*messages, fragment(3)]
    not_json = row(messages, None, 1, fragments=[])
    unframed = row(messages, None, 0)
    bad = [
        row(three, first.id, 2, fragments=[fragment(3) + " "]),  # one character too long
        row(three, first.id, 1, fragments=[fragment(3)]),  # the text has a message more
        not_json.model_copy(update={"request_body": PREFIX + "x" + SUFFIX}),
        unframed.model_copy(update={"request_body": "[" + body(messages)[1:]}),
    ]
    for case in bad:
        stored, _ = await runtime.store.insert_log(tid, case)
        assert storage(runtime, stored.id) is None
        got = await runtime.store.get_log(tid, stored.id)
        assert got is not None and got.request_body == case.request_body


async def test_a_shared_suffix_is_stored_once(runtime: Runtime) -> None:
    tid = (await runtime.create_thread("a")).thread_id
    first, _ = await runtime.store.insert_log(tid, row([fragment(1)], None, 0))
    same, _ = await runtime.store.insert_log(tid, row([fragment(1), fragment(2)], first.id, 1))
    changed = SUFFIX.replace('"x"', '"y"')
    other, _ = await runtime.store.insert_log(
        tid, row([fragment(1), fragment(2)], same.id, 2, suffix=changed)
    )
    after, _ = await runtime.store.insert_log(
        tid, row([fragment(1), fragment(2), fragment(3)], other.id, 2, suffix=changed)
    )
    assert [storage(runtime, r.id)[4] for r in (same, other, after)] == [0, 1, 0]  # type: ignore[index]
    for stored in (first, same, other, after):
        assert await runtime.store.get_log(tid, stored.id) == stored


async def test_updates_never_rewrite_the_request(runtime: Runtime) -> None:
    """The success, failure and after-tools updates (whatever ``bodies`` they name) leave
    the request as inserted and write no request storage at all; the response is written."""
    tid = (await runtime.create_thread("a")).thread_id
    probe(runtime).script(
        """
        CREATE TABLE request_writes (log_id TEXT);
        CREATE TRIGGER body_update AFTER UPDATE ON log_bodies WHEN old.part = 'request'
            BEGIN INSERT INTO request_writes VALUES (old.log_id); END;
        CREATE TRIGGER body_delete AFTER DELETE ON log_bodies WHEN old.part = 'request'
            BEGIN INSERT INTO request_writes VALUES (old.log_id); END;
        CREATE TRIGGER request_update AFTER UPDATE ON log_requests
            BEGIN INSERT INTO request_writes VALUES (old.log_id); END;
        """,
        """
        CREATE TABLE request_writes (log_id TEXT);
        CREATE FUNCTION note_write() RETURNS trigger LANGUAGE plpgsql AS
            $$BEGIN INSERT INTO request_writes VALUES (OLD.log_id); RETURN NULL; END$$;
        CREATE TRIGGER body_update AFTER UPDATE ON log_bodies FOR EACH ROW
            WHEN (OLD.part = 'request') EXECUTE FUNCTION note_write();
        CREATE TRIGGER body_delete AFTER DELETE ON log_bodies FOR EACH ROW
            WHEN (OLD.part = 'request') EXECUTE FUNCTION note_write();
        CREATE TRIGGER request_update AFTER UPDATE ON log_requests FOR EACH ROW
            EXECUTE FUNCTION note_write();
        """,
    )
    root, _ = await runtime.store.insert_log(tid, row([fragment(1)], None, 0))
    delta, _ = await runtime.store.insert_log(tid, row([fragment(1), fragment(2)], root.id, 1))
    plain = row([fragment(1)], None, 0).model_copy(update={"request_delta": None})
    plain, _ = await runtime.store.insert_log(tid, plain)
    for stored in (root, delta, plain):
        changed = stored.model_copy(update={"request_body": "{}", "response_body": '{"r":1}'})
        await runtime.store.update_log(tid, changed)  # the default: both parts named
        done = changed.model_copy(update={"request_body": None, "is_complete": True})
        await runtime.store.update_log(tid, done, bodies=("request", "response"))
        tools = done.model_copy(update={"tool_results": "[]"})
        await runtime.store.update_log(tid, tools, bodies=())
        got = await runtime.store.get_log(tid, stored.id)
        assert got is not None
        assert got.request_body == stored.request_body
        assert (got.response_body, got.is_complete, got.tool_results) == ('{"r":1}', True, "[]")
    assert q(runtime, "SELECT COUNT(*) FROM request_writes") == [(0,)]


async def test_row_without_delta_is_stored_as_before(runtime: Runtime) -> None:
    tid = (await runtime.create_thread("a")).thread_id
    plain = row([fragment(1)], None, 0).model_copy(
        update={"request_delta": None, "response_body": "{}"}
    )
    stored, _ = await runtime.store.insert_log(tid, plain)
    assert storage(runtime, stored.id) is None
    assert q(
        runtime, "SELECT part, body FROM log_bodies WHERE log_id = ? ORDER BY part", plain.id
    ) == [("request", plain.request_body)]
    # a short response is kept in the row itself (migration 11)
    assert q(runtime, "SELECT response_body FROM logs WHERE id = ?", plain.id) == [("{}",)]
    assert await runtime.store.get_log(tid, stored.id) == stored


async def test_the_delta_is_never_serialised_nor_a_column(runtime: Runtime) -> None:
    with_delta = row([fragment(1)], None, 0)
    assert "request_delta" not in with_delta.model_dump()
    assert "request_delta" not in with_delta.model_dump_json()
    assert "request_delta" not in repr(with_delta)
    columns = probe(runtime).columns("logs")
    assert "request_headers" in columns
    assert "request_delta" not in columns


async def test_deleting_a_thread_deletes_every_body(runtime: Runtime) -> None:
    tid = (await runtime.create_thread("a")).thread_id
    kept = (await runtime.create_thread("a")).thread_id
    messages: list[str] = []
    for side in (tid, kept):
        base = None
        for n in range(MAX_CHAIN_DEPTH + 5):
            keep = len(messages) if base else 0
            messages = [*messages, fragment(n)]
            stored, _ = await runtime.store.insert_log(
                side, row(messages, base, keep, response_body="{}")
            )
            base = stored.id
        messages = []
    await runtime.store.delete_thread(tid)
    rows = MAX_CHAIN_DEPTH + 5  # two roots: the first row and the one past the cap
    expected = {"logs": rows, "log_bodies": 2, "log_requests": rows}  # responses in logs
    for table, count in expected.items():
        assert q(runtime, f"SELECT COUNT(*) FROM {table}") == [(count,)], table
    orphans = q(
        runtime,
        "SELECT COUNT(*) FROM log_requests r WHERE NOT EXISTS"
        " (SELECT 1 FROM logs l WHERE l.id = r.log_id)",
    )
    assert orphans == [(0,)]
    got = await runtime.store.list_logs(kept, limit=None)
    assert len(got) == MAX_CHAIN_DEPTH + 5


@pytest.mark.sqlite_only
async def test_migration_from_version_4_keeps_every_body(db_url: str) -> None:
    """Migration 5 rebuilds log_bodies as a rowid table: the bodies of a database at
    version 4 read back unchanged, and new rows are stored as deltas on the old ones'
    thread."""
    path = path_from_url(db_url)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        assert schema.migrate(conn, upto=4) == 4
        conn.execute(
            "INSERT INTO threads(id, agent_id, origin_agent_id, created_at_us, status_state,"
            " status_since) VALUES ('t1', 'a', 'a', 1, 'idle', 1)"
        )
        conn.execute(
            "INSERT INTO logs(id, thread_id, lseq, provider, model, created_at, is_complete)"
            " VALUES ('old', 't1', 1, 'scripted', 'm', 1, 1)"
        )
        conn.executemany(
            "INSERT INTO log_bodies(log_id, part, body) VALUES ('old', ?, ?)",
            [("request", body([fragment(1)])), ("response", "{}")],
        )
    rt = await Runtime.open(db_url)
    try:
        old = await rt.store.get_log("t1", "old")
        assert old is not None
        assert (old.request_body, old.response_body) == (body([fragment(1)]), "{}")
        first, _ = await rt.store.insert_log("t1", row([fragment(1)], None, 0))
        second, _ = await rt.store.insert_log("t1", row([fragment(1), fragment(2)], first.id, 1))
        assert await rt.store.list_logs("t1") == [old, first, second]
        assert storage(rt, second.id) == (first.id, 1, 1, 2, 0, 0)
        table = q(rt, "SELECT sql FROM sqlite_master WHERE name = 'log_bodies'")[0][0]
        assert "WITHOUT ROWID" not in table
        assert not q(rt, "SELECT name FROM sqlite_master WHERE name LIKE 'log_bodies_old%'")
    finally:
        await rt.close()


class _Whole:
    """A lazy body (``RequestDelta.whole``) that counts how often it is built."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return self.text


def lazy_row(
    messages: Sequence[str], base: str | None, keep: int, length: int | None = None
) -> tuple[LogRow, _Whole]:
    """A row that gives its body lazily: ``request_body`` None, ``whole`` and ``length``."""
    whole = _Whole(body(messages))
    size = len(whole.text) if length is None else length
    return row(messages, base, keep, whole=whole, length=size), whole


async def test_a_lazy_body_is_built_only_for_a_root_and_reads_back_exactly(
    runtime: Runtime,
) -> None:
    """A row without ``request_body`` whose delta gives the body lazily: a root builds the
    text once and stores it; a delta row on it never builds it; both read back the text."""
    state = await runtime.create_thread("a")
    tid = state.thread_id
    messages = [fragment(n) for n in range(6)]
    root, root_whole = lazy_row(messages[:4], None, 0)
    stored, _ = await runtime.store.insert_log(tid, root)
    assert root_whole.calls == 1 and stored.request_delta is None
    assert storage(runtime, root.id) == (None, 0, 0, 4, False, True)
    child, child_whole = lazy_row(messages, root.id, 4)
    await runtime.store.insert_log(tid, child)
    assert child_whole.calls == 0  # stored as the two messages it adds
    assert storage(runtime, child.id) == (root.id, 1, 4, 6, False, False)
    for log_id, text in ((root.id, root_whole.text), (child.id, child_whole.text)):
        read = await runtime.store.get_log(tid, log_id)
        assert read is not None and read.request_body == text
    listed = {r.id: r.request_body for r in await runtime.store.list_logs(tid, limit=None)}
    assert listed[child.id] == child_whole.text


async def test_a_lazy_body_whose_length_does_not_add_up_is_stored_as_text(
    runtime: Runtime,
) -> None:
    """A lazy delta whose length disagrees with its base is refused like any delta that
    does not add up: the body is built and stored as plain text, and reads back exactly."""
    state = await runtime.create_thread("a")
    tid = state.thread_id
    messages = [fragment(n) for n in range(5)]
    root, _ = lazy_row(messages[:3], None, 0)
    await runtime.store.insert_log(tid, root)
    wrong, whole = lazy_row(messages, root.id, 3, length=len(body(messages)) + 7)
    await runtime.store.insert_log(tid, wrong)
    assert whole.calls == 1
    assert storage(runtime, wrong.id) is None  # no log_requests row: plain text
    read = await runtime.store.get_log(tid, wrong.id)
    assert read is not None and read.request_body == whole.text
