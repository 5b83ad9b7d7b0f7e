"""The search index kept exact while SQLite indexes off the write path (spec 08 §8.14.1
rule 1, migration 27): a stored message waits in the index's backlog, which a search
indexes first and the store's background pass indexes when nobody searches. On both
stores a search finds what was stored before it, as it is then; on SQLite the tests also
read the index and its backlog themselves."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing

import pytest

from threadloom import Agent, Definitions, RetentionPolicy, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.errors import StoreError
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.records import Message, new_id
from threadloom.store import open_store
from threadloom.store.base import Store
from threadloom.store.shapes import NewThread, ThreadQuery, search_terms
from threadloom.store.sqlite import schema
from threadloom.store.sqlite.search_index import INDEXED
from threadloom.store.sqlite.search_index import SQL as MIGRATION_26
from threadloom.store.sqlite.store import SqliteStore, path_from_url


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    opened = await open_store(db_url)  # no claim_runner: no background pass
    yield opened
    await opened.close()


async def found(store: Store, text: str) -> list[tuple[str, int]]:
    """The threads found by ``text``, each with its number of matching messages."""
    hits, total = await store.search_threads(ThreadQuery(), search_terms(text))
    assert total == len(hits)
    return sorted((h.thread.id, h.matches) for h in hits)


async def thread(store: Store, name: str, *texts: str) -> None:
    await store.create_thread(NewThread(id=name, agent_id="chat"))
    for i, text in enumerate(texts):
        role = "user" if i % 2 == 0 else "assistant"
        await store.insert_message(name, Message(id=f"{name}-m{i}", role=role, content=text))


def is_sqlite(db_url: str) -> bool:
    return not db_url.startswith("postgresql")


def raw(db_url: str, sql: str, *params: object) -> list[tuple[object, ...]]:
    """Rows read from the SQLite file on a connection of the test's own."""
    with closing(sqlite3.connect(path_from_url(db_url))) as conn:
        return conn.execute(sql, params).fetchall()


def backlog_ids(db_url: str) -> list[str]:
    return [
        str(r[0])
        for r in raw(
            db_url,
            "SELECT m.id FROM messages_fts_backlog b JOIN messages m ON m.rid = b.rid ORDER BY 1",
        )
    ]


def in_index(db_url: str, word: str) -> list[str]:
    """The messages the FTS5 index itself (not the backlog) finds by ``word``."""
    return [
        str(r[0])
        for r in raw(
            db_url,
            "SELECT m.id FROM messages_fts f JOIN messages m ON m.rid = f.rowid"
            " WHERE messages_fts MATCH ? ORDER BY 1",
            f'"{word}"',
        )
    ]


def index_is_exact(db_url: str) -> None:
    """Once caught up, the index holds exactly the messages it covers: one document per
    such message (FTS5's ``_docsize`` table), none waiting."""
    covered = raw(db_url, f"SELECT rid FROM messages m WHERE {INDEXED.format(r='m')} ORDER BY 1")
    assert raw(db_url, "SELECT id FROM messages_fts_docsize ORDER BY 1") == covered
    assert backlog_ids(db_url) == []


def _defs(answer: str) -> Definitions:
    provider = ScriptedProvider(lambda request: Reply.text(answer))
    return Definitions().add(
        Model(name="M", provider=provider, model="scripted-1"),
        Prompt(name="P", model="M", system="Answer."),
        Agent(name="chat", side_a=Side(prompt="P"), side_b=Side(label="User")),
    )


async def test_c08_187_a_stored_message_is_found_by_the_next_search(
    store: Store, db_url: str
) -> None:
    """C08-187 (the store): stored, then found at once; on SQLite it waited in the backlog."""
    await thread(store, "t-jam", "apricot jam recipe", "stir the apricot slowly")
    await store.insert_message(
        "t-jam", Message(id="t-jam-tool", role="tool", content="apricot", tool_call_id="c")
    )
    if is_sqlite(db_url):
        assert backlog_ids(db_url) == ["t-jam-m0", "t-jam-m1"]  # the tool result is not
        assert in_index(db_url, "apricot") == []
    assert await found(store, "apricot") == [("t-jam", 2)]
    if is_sqlite(db_url):
        assert in_index(db_url, "apricot") == ["t-jam-m0", "t-jam-m1"]
        index_is_exact(db_url)
    # each message stored after a search is found by the next one
    for i in range(3):
        await store.insert_message("t-jam", Message(id=new_id(), role="user", content=f"fig {i}"))
        assert await found(store, "fig") == [("t-jam", i + 1)]
    assert await store.catch_up_search() == 0  # nothing left to index


async def test_c08_187_a_send_and_its_run_are_found_by_the_next_search(db_url: str) -> None:
    """C08-187 (a runtime): the message a send stores and the run's answer."""
    rt = await Runtime.open(db_url, definitions=_defs("quince marmalade it is"))
    try:
        state = await rt.create_thread("chat")
        await rt.send_message(state.thread_id, "what goes with quince?")
        await rt.wait_idle(state.thread_id)
        assert await found(rt.store, "quince") == [(state.thread_id, 2)]
        assert await found(rt.store, "marmalade") == [(state.thread_id, 1)]
        other = await rt.create_thread("chat")
        await other.inject_message(role="user", content="quince paste")
        assert await found(rt.store, "paste") == [(other.thread_id, 1)]
    finally:
        await rt.close()


async def test_c08_188_edits_and_deletions_before_and_after_indexing(
    store: Store, db_url: str
) -> None:
    """C08-188: writes to messages still in the backlog, then to indexed ones."""
    await thread(store, "t-edit", "original plum wording", "plum hidden later")
    await thread(store, "t-del", "doomed cherry", "kept cherry")
    await thread(store, "t-gone", "vanishing damson")
    # no search between these writes: every message is still in the backlog (SQLite)
    m0 = Message(id="t-edit-m0", role="user", content="original plum wording")
    await store.update_message("t-edit", m0.model_copy(update={"content": "revised plum text"}))
    m1 = Message(id="t-edit-m1", role="assistant", content="plum hidden later")
    await store.update_message("t-edit", m1.model_copy(update={"silent": True}))
    await store.delete_message("t-del", "t-del-m0")
    await store.delete_thread("t-gone")
    if is_sqlite(db_url):
        assert backlog_ids(db_url) == ["t-del-m1", "t-edit-m0", "t-edit-m1"]
    assert await found(store, "original") == []
    assert await found(store, "revised") == [("t-edit", 1)]
    assert await found(store, "plum") == [("t-edit", 1)]
    assert await found(store, "hidden") == []
    assert await found(store, "doomed") == []
    assert await found(store, "cherry") == [("t-del", 1)]
    assert await found(store, "damson") == []
    if is_sqlite(db_url):
        index_is_exact(db_url)
    # the same writes to messages already indexed
    edited = m0.model_copy(update={"content": "first edit"})
    await store.update_message("t-edit", edited)
    await store.update_message("t-edit", edited.model_copy(update={"content": "second edit"}))
    await store.update_message("t-edit", m1.model_copy(update={"silent": False}))
    assert await found(store, "revised") == []
    assert await found(store, "first") == []
    assert await found(store, "second") == [("t-edit", 1)]
    assert await found(store, "hidden") == [("t-edit", 1)]
    await store.delete_message("t-edit", "t-edit-m0")
    await store.delete_message("t-del", "t-del-m1")
    assert await found(store, "second") == []
    assert await found(store, "cherry") == []
    assert await found(store, "hidden") == [("t-edit", 1)]
    if is_sqlite(db_url):
        index_is_exact(db_url)


async def _until(check: object, what: str) -> None:
    for _ in range(400):
        if check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"never: {what}")


@pytest.mark.sqlite_only
async def test_c08_189_the_background_pass_indexes_the_backlog(db_url: str) -> None:
    """C08-189: no search; the running store's pass indexes what was written, and passes
    only after writes."""
    opened = await SqliteStore.open(db_url, index_every_s=0.02)
    try:
        await opened.claim_runner()  # the process that runs the threads: the pass starts
        await thread(opened, "t-bg", "walnut loaf", "walnut butter")
        await _until(
            lambda: opened.backlog_pass.passes >= 1 and backlog_ids(db_url) == [],
            "a pass emptied the backlog",
        )
        assert in_index(db_url, "walnut") == ["t-bg-m0", "t-bg-m1"]
        index_is_exact(db_url)
        await asyncio.sleep(0.1)  # a pass that was ending has ended
        passes = opened.backlog_pass.passes
        await asyncio.sleep(0.2)  # ten intervals without a write
        assert opened.backlog_pass.passes == passes
        await opened.insert_message("t-bg", Message(id="t-bg-m2", role="user", content="pecan"))
        await _until(lambda: opened.backlog_pass.passes > passes, "a pass after the write")
        assert in_index(db_url, "pecan") == ["t-bg-m2"]
    finally:
        await opened.close()


def _back_to_migration_26(db_url: str) -> None:
    """The file as the release of migration 26 leaves it: its three triggers, no backlog,
    every covered message in the index (as it was caught up), 27 not recorded."""
    with closing(sqlite3.connect(path_from_url(db_url))) as conn:
        assert conn.execute("SELECT count(*) FROM messages_fts_backlog").fetchone() == (0,)
        for trigger in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER messages_fts_backlog_{trigger}")
        conn.execute("DROP TABLE messages_fts_backlog")
        for statement in schema.statements(MIGRATION_26):
            conn.execute(statement)  # the triggers again; the index is not filled twice
        conn.execute("DELETE FROM threadloom_migrations WHERE version = 27")
        conn.commit()


@pytest.mark.sqlite_only
async def test_c08_190_migration_27_converts_an_indexed_database(db_url: str) -> None:
    """C08-190: a database at 26 with indexed messages, migrated by this release."""
    opened = await open_store(db_url)
    try:
        await thread(opened, "t-old", "hazelnut praline", "hazelnut spread")
        await thread(opened, "t-old2", "chestnut puree")
        assert await opened.catch_up_search() == 3
    finally:
        await opened.close()
    _back_to_migration_26(db_url)
    triggers = "SELECT name FROM sqlite_schema WHERE type = 'trigger' ORDER BY 1"
    assert [r[0] for r in raw(db_url, triggers)] == [
        "messages_fts_delete",
        "messages_fts_insert",
        "messages_fts_update",
    ]
    opened = await open_store(db_url)  # migration 27
    try:
        assert [r[0] for r in raw(db_url, triggers)] == [
            "messages_fts_backlog_delete",
            "messages_fts_backlog_insert",
            "messages_fts_backlog_update",
        ]
        assert raw(db_url, "SELECT max(version) FROM threadloom_migrations") == [(27,)]
        assert backlog_ids(db_url) == []
        index_is_exact(db_url)
        assert await found(opened, "hazelnut") == [("t-old", 2)]
        m0 = Message(id="t-old-m0", role="user", content="hazelnut praline")
        await opened.update_message("t-old", m0.model_copy(update={"content": "almond praline"}))
        await opened.delete_message("t-old2", "t-old2-m0")
        await opened.insert_message("t-old2", Message(id=new_id(), role="user", content="new fig"))
        assert await found(opened, "hazelnut") == [("t-old", 1)]
        assert await found(opened, "almond") == [("t-old", 1)]
        assert await found(opened, "chestnut") == []
        assert await found(opened, "fig") == [("t-old2", 1)]
        index_is_exact(db_url)
    finally:
        await opened.close()


async def test_c08_191_imports_forks_and_retention(db_url: str) -> None:
    """C08-191: an imported thread and a fork are found by the next search; retention
    deleting threads whose messages wait in the backlog leaves none found."""
    now = [1_800_000_000_000_000]

    def clock() -> int:
        now[0] += 1
        return now[0]

    rt = await Runtime.open(
        db_url,
        definitions=_defs("unused"),
        clock=clock,
        retention=RetentionPolicy(interval_s=None, inactive_days=30),
    )
    try:
        source = await rt.create_thread("chat", user_id="u")
        await source.inject_message(role="user", content="saffron bun")
        await source.inject_message(role="assistant", content="saffron tea")
        doc = await rt.export_thread(source.thread_id)
        imported = (await rt.import_thread(doc, ids="new")).root
        page = await source.get_messages(limit=10, order="asc")
        fork = await rt.fork_thread(source.thread_id, page.messages[0].id, content="saffron rice")
        assert await found(rt.store, "saffron") == sorted(
            [(source.thread_id, 2), (imported, 2), (fork.row.id, 1)]
        )
        assert await found(rt.store, "rice") == [(fork.row.id, 1)]
        # retention of threads whose messages were never searched for
        old = await rt.create_thread("chat", user_id="u")
        child = await rt.create_thread("chat", user_id="u", parent=old.thread_id)
        await old.inject_message(role="user", content="sorrel soup")
        await child.inject_message(role="user", content="sorrel salad")
        now[0] += 31 * 86_400_000_000
        kept = await rt.create_thread("chat", user_id="u")
        await kept.inject_message(role="user", content="sorrel pie")
        report = await rt.apply_retention()
        gone = {i for o in report.outcomes for i in o.ids}
        assert old.thread_id in gone and kept.thread_id not in gone
        assert await found(rt.store, "sorrel") == [(kept.thread_id, 1)]
        if is_sqlite(db_url):
            index_is_exact(db_url)
    finally:
        await rt.close()


@pytest.mark.sqlite_only
async def test_c08_189_the_pass_interval_from_the_environment(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C08-189: ``THREADLOOM_SEARCH_INDEX_SECONDS`` sets the pass's interval; ``off``
    runs none (a search still finds everything); a bad value is refused, naming it."""
    for bad in ("soon", "0", "-1", "inf"):
        monkeypatch.setenv("THREADLOOM_SEARCH_INDEX_SECONDS", bad)
        with pytest.raises(StoreError, match="THREADLOOM_SEARCH_INDEX_SECONDS must be"):
            await SqliteStore.open(db_url)
    monkeypatch.setenv("THREADLOOM_SEARCH_INDEX_SECONDS", "0.5")
    opened = await SqliteStore.open(db_url)
    assert opened.backlog_pass.every_s == 0.5
    await opened.close()
    monkeypatch.setenv("THREADLOOM_SEARCH_INDEX_SECONDS", "off")
    opened = await SqliteStore.open(db_url)
    try:
        await opened.claim_runner()
        await thread(opened, "t-off", "cashew brittle")
        await asyncio.sleep(0.3)
        assert opened.backlog_pass.passes == 0
        assert backlog_ids(db_url) == ["t-off-m0"]
        assert await found(opened, "cashew") == [("t-off", 1)]
        assert backlog_ids(db_url) == []
    finally:
        await opened.close()


@pytest.mark.sqlite_only
def test_the_pass_ends_with_the_loop_that_ran_it(db_url: str) -> None:
    """A store that runs threads opened under one ``asyncio.run`` and closed under
    another (as the command line's tests do): its pass ended with the first loop, and the
    close still closes (the messages it stored are found by the next store)."""

    async def opened() -> SqliteStore:
        store = await SqliteStore.open(db_url)
        await store.claim_runner()
        await thread(store, "t-loop", "lychee sorbet")
        return store

    store = asyncio.run(opened())
    asyncio.run(store.close())

    async def reopened() -> list[tuple[str, int]]:
        again = await open_store(db_url)
        try:
            return await found(again, "lychee")
        finally:
            await again.close()

    assert asyncio.run(reopened()) == [("t-loop", 1)]
