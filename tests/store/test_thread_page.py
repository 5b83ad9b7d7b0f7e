"""A first read's access check and page in one read (``Store.get_thread_page_wire``, issue
40), on every store: the thread's row and its page of wire records come from one snapshot
(spec 08 §8.1.7 rule 2) — a write committed between the two by another connection is not
in the page — the page is read only when the caller's ``wanted(row)`` says so, and a
missing thread reads no page. On SQLite a small page (at most ``SMALL_PAGE`` messages) is
read on the loop's own connection, a larger one on a reader thread."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest

from threadloom.records import Message, QueueEntry, new_id
from threadloom.store import open_store
from threadloom.store.base import Store
from threadloom.store.core.runner import SMALL_PAGE
from threadloom.store.shapes import NewThread, ThreadRow

THREAD = "t-page"
PAGE: dict[str, Any] = dict(limit=100, offset=0, order="desc", include_silent=False, max_depth=0)


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    opened = await open_store(db_url)
    yield opened
    await opened.close()


async def _seed(store: Store, messages: int = 3, queued: bool = True) -> None:
    await store.create_thread(NewThread(id=THREAD, agent_id="chat", user_id="u-1"))
    for i in range(messages):
        await store.insert_message(THREAD, Message(id=new_id(), role="user", content=f"m{i}"))
    if queued:
        entry = QueueEntry(id=new_id(), role="user", content="queued", source="api", created_at=0)
        await store.enqueue(THREAD, entry, clear_stop=False)


def _raw_write(db_url: str) -> Callable[[str], None]:
    """A statement committed at once by a connection of its own (another writer)."""

    def run(sql: str) -> None:
        if db_url.startswith("sqlite"):
            with sqlite3.connect(db_url.removeprefix("sqlite:///")) as conn:
                conn.execute(sql)
            return
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(sql)

    return run


async def test_c08_192_the_row_and_the_page_are_one_read(store: Store, db_url: str) -> None:
    await _seed(store)
    row = await store.get_thread(THREAD)
    page = await store.read_page_wire(THREAD, **PAGE)
    assert row is not None and page is not None and page[1] == 4
    seen: list[ThreadRow] = []

    def wanted(found: ThreadRow) -> bool:
        seen.append(found)
        return True

    assert await store.get_thread_page_wire(THREAD, wanted=wanted, **PAGE) == (row, page)
    assert seen == [row]
    # another writer commits after the row was read and before the page is: the row and
    # the page are one snapshot's (the total counts the thread row's top-level count) —
    # SQLite's transaction, the row's; PostgreSQL reads them without one, sees the
    # snapshot moved and reads both again in one, after the change (C08-195)
    write = _raw_write(db_url)
    bump = f"UPDATE threads SET top_visible_count = top_visible_count + 5 WHERE id = '{THREAD}'"
    asked: list[ThreadRow] = []

    def wanted_after_a_write(found: ThreadRow) -> bool:
        asked.append(found)
        if len(asked) == 1:
            write(bump)
        return True

    both = await store.get_thread_page_wire(THREAD, wanted=wanted_after_a_write, **PAGE)
    later = await store.read_page_wire(THREAD, **PAGE)
    assert later is not None and later[1] == page[1] + 5
    if db_url.startswith("sqlite"):
        assert both == (row, page) and asked == [row]
    else:
        assert both == (await store.get_thread(THREAD), later) and len(asked) == 2


async def test_c08_192_a_page_is_read_only_when_wanted(store: Store) -> None:
    await _seed(store)
    row = await store.get_thread(THREAD)
    assert await store.get_thread_page_wire(THREAD, wanted=lambda found: False, **PAGE) == (
        row,
        None,
    )
    called: list[ThreadRow] = []
    missing = await store.get_thread_page_wire("t-none", wanted=called.append, **PAGE)  # type: ignore[arg-type]
    assert missing == (None, None) and called == []


async def test_c08_192_a_page_naming_a_subagent_is_left_to_the_records(store: Store) -> None:
    await _seed(store)
    child = Message(id=new_id(), role="assistant", content="child", subagent_id="child-ref")
    await store.insert_message(THREAD, child)
    row, page = await store.get_thread_page_wire(THREAD, wanted=lambda found: True, **PAGE)
    assert row is not None and row.id == THREAD and page is None


@pytest.mark.sqlite_only
async def test_sqlite_reads_a_small_page_on_the_loop(store: Store) -> None:
    await _seed(store, messages=SMALL_PAGE + 5)
    readers: dict[int | None, str] = {}

    def on(limit: int | None) -> Callable[[ThreadRow], bool]:
        def wanted(found: ThreadRow) -> bool:
            readers[limit] = threading.current_thread().name
            return True

        return wanted

    for limit in (1, SMALL_PAGE, SMALL_PAGE + 1, None):
        page = {**PAGE, "limit": limit}
        _, found = await store.get_thread_page_wire(THREAD, wanted=on(limit), **page)
        assert found is not None and found == await store.read_page_wire(THREAD, **page)
        assert len(found[0]) == min(limit or SMALL_PAGE + 6, SMALL_PAGE + 6)
    loop = threading.current_thread().name
    assert readers[1] == readers[SMALL_PAGE] == loop
    assert readers[SMALL_PAGE + 1].startswith("threadloom-sqlite-r")
    assert readers[None].startswith("threadloom-sqlite-r")


def _rereads(store: Store) -> int:
    """Reads a store ran again in one transaction (a store whose reads are always one: 0)."""
    return int(getattr(store, "rereads", 0))


@pytest.mark.parametrize("order", ["desc", "asc"])
async def test_c08_195_no_write_of_the_thread_between_is_one_read(
    store: Store, db_url: str, order: str
) -> None:
    """A commit elsewhere in the database (another thread's row) between the row and the
    page does not make the read run again."""
    await _seed(store)
    await store.create_thread(NewThread(id="t-other", agent_id="chat"))
    page = {**PAGE, "order": order}
    write = _raw_write(db_url)
    asked: list[ThreadRow] = []

    def wanted(found: ThreadRow) -> bool:
        asked.append(found)
        write("UPDATE threads SET tags = '[\"x\"]' WHERE id = 't-other'")
        return True

    before = _rereads(store)
    row, found = await store.get_thread_page_wire(THREAD, wanted=wanted, **page)
    assert asked == [row] and _rereads(store) == before
    assert found == await store.read_page_wire(THREAD, **page)
    assert found is not None and found[1] == 4 and len(found[0]) == 4  # 3 stored, 1 queued


async def test_c08_195_an_empty_thread_is_one_read(store: Store) -> None:
    await store.create_thread(NewThread(id=THREAD, agent_id="chat", user_id="u-1"))
    before = _rereads(store)
    row, found = await store.get_thread_page_wire(THREAD, wanted=lambda found: True, **PAGE)
    assert row is not None and found == ([], 0) and _rereads(store) == before


@pytest.mark.parametrize("order", ["desc", "asc"])
@pytest.mark.parametrize("queued", [True, False])
async def test_c08_195_a_write_of_the_thread_between_reads_again(
    store: Store, db_url: str, order: str, queued: bool
) -> None:
    """A message stored between the row and the page: on a store that reads them without
    a transaction, the read runs again in one, the check asked again — the row and the
    page both hold the message (the queue part first in ``desc``, the stored part first
    in ``asc``); on one that reads them in a transaction, neither does."""
    await _seed(store, queued=queued)
    page = {**PAGE, "order": order}
    row = await store.get_thread(THREAD)
    expected = await store.read_page_wire(THREAD, **page)
    assert row is not None and expected is not None
    asked: list[ThreadRow] = []
    added = Message(id=new_id(), role="user", content="between")

    def wanted(found: ThreadRow) -> bool:
        asked.append(found)
        if len(asked) == 1:  # another writer of the thread, on a loop of its own
            writer = threading.Thread(target=asyncio.run, args=(_insert(db_url, added),))
            writer.start()
            writer.join()
        return True

    before = _rereads(store)
    found_row, found = await store.get_thread_page_wire(THREAD, wanted=wanted, **page)
    after_row = await store.get_thread(THREAD)
    after = await store.read_page_wire(THREAD, **page)
    assert after is not None and after[1] == expected[1] + 1
    if db_url.startswith("sqlite"):
        assert (found_row, found) == (row, expected) and len(asked) == 1
    else:
        assert (found_row, found) == (after_row, after) and len(asked) == 2
        assert _rereads(store) == before + 1


async def _insert(db_url: str, message: Message) -> None:
    other = await open_store(db_url)
    try:
        await other.insert_message(THREAD, message)
    finally:
        await other.close()
