"""Full-text search of threads by their messages' text, done by the store (spec 08 §8.14):
the index on both stores, the thread filters combined with it, one hit per thread, paging,
the index following every write (edits, deletions, a thread's deletion with its children —
the cascade retention deletes through, spec 17 §17.2) and filled by its migration."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from threadloom.records import Message, ThreadStatus, new_id
from threadloom.store import open_store
from threadloom.store.base import Store
from threadloom.store.shapes import NewThread, SearchHit, ThreadQuery, search_terms


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    opened = await open_store(db_url)
    yield opened
    await opened.close()


async def thread(store: Store, name: str, *texts: str, **fields: object) -> str:
    agent = str(fields.pop("agent", "chat"))
    await store.create_thread(NewThread(id=name, agent_id=agent, **fields))  # type: ignore[arg-type]
    for i, text in enumerate(texts):
        role = "user" if i % 2 == 0 else "assistant"
        await store.insert_message(name, Message(id=f"{name}-m{i}", role=role, content=text))
    return name


async def search(store: Store, text: str, **filters: object) -> tuple[list[SearchHit], int]:
    return await store.search_threads(ThreadQuery(**filters), search_terms(text))  # type: ignore[arg-type]


async def found(store: Store, text: str, **filters: object) -> list[str]:
    hits, total = await search(store, text, **filters)
    assert total >= len(hits)
    return sorted(h.thread.id for h in hits)


def marked(hit: SearchHit) -> list[str]:
    return [text for text, match in hit.snippet if match]


def plain(hit: SearchHit) -> str:
    return "".join(text for text, _ in hit.snippet)


async def test_c08_200_words_found_in_user_and_assistant_text(store: Store) -> None:
    await thread(store, "t-kettle", "My kettle is broken", "Have you tried descaling the Kettle?")
    await thread(store, "t-toaster", "The toaster burns bread", "Lower the setting.")
    await thread(store, "t-both", "kettle and toaster both broken")
    assert await found(store, "kettle") == ["t-both", "t-kettle"]
    # case-insensitive, every word must appear (in one message)
    assert await found(store, "KETTLE broken") == ["t-both", "t-kettle"]
    assert await found(store, "descaling") == ["t-kettle"]
    assert await found(store, "setting") == ["t-toaster"]
    assert await found(store, "kettle toaster") == ["t-both"]
    assert await found(store, "microwave") == []
    hits, _ = await search(store, "descaling")
    (hit,) = hits
    assert hit.message_id == "t-kettle-m1"
    assert marked(hit) == ["descaling"]
    # an excerpt around the match (its bounds are the store's: PostgreSQL drops the "?")
    assert plain(hit).startswith("Have you tried descaling the Kettle")
    assert hit.matches == 1


async def test_c08_201_phrases_exclusions_and_syntax_as_words(store: Store) -> None:
    await thread(store, "t-red", "the red fox jumps")
    await thread(store, "t-fox-red", "a fox that is red")
    await thread(store, "t-or", "this or that")
    assert await found(store, '"red fox"') == ["t-red"]
    assert await found(store, "red fox") == ["t-fox-red", "t-red"]
    assert await found(store, "fox -jumps") == ["t-fox-red"]
    assert await found(store, 'fox -"red fox"') == ["t-fox-red"]
    # what would be query syntax in either store is only text: never an error
    assert await found(store, "or") == ["t-or"]
    assert await found(store, "this OR nothing") == []
    for text in ('fox AND" NOT (red', "fox*", "fox:red", "NEAR(fox red)", "fox & !red | x"):
        await search(store, text)
    # nothing to look for: no hit, not an error
    assert await search(store, "-fox") == ([], 0)
    assert await search(store, "!!! ---") == ([], 0)
    assert search_terms('a "b c" -d "-e" -"f g" "unclosed') == tuple(
        search_terms('a "b c" -d "-e" -"f g" "unclosed')
    )
    terms = search_terms('a "b  c" -d -"f g" "open')
    assert [(t.text, t.exclude) for t in terms] == [
        ("a", False),
        ("b c", False),
        ("d", True),
        ("f g", True),
        ("open", False),
    ]


async def test_c08_202_what_the_index_holds(store: Store) -> None:
    name = await thread(store, "t-kinds")
    tid = name
    await store.insert_message(tid, Message(id=new_id(), role="system", content="zebra sys"))
    await store.insert_message(
        tid, Message(id=new_id(), role="tool", content="zebra tool", tool_call_id="c1")
    )
    await store.insert_message(
        tid, Message(id=new_id(), role="user", content="zebra quiet", silent=True)
    )
    await store.insert_message(
        tid, Message(id=new_id(), role="assistant", content="zebra inner", depth=1)
    )
    assert await found(store, "zebra") == []
    await store.insert_message(tid, Message(id="t-kinds-u", role="user", content="zebra seen"))
    hits, _ = await search(store, "zebra")
    assert [(h.thread.id, h.message_id) for h in hits] == [("t-kinds", "t-kinds-u")]


async def test_c08_203_one_hit_per_thread_best_message_and_count(store: Store) -> None:
    await thread(
        store,
        "t-many",
        "apple",
        "something else",
        "apple apple apple pie with apple",
        "apple again",
    )
    await thread(store, "t-once", "one apple among many other words in a longer text here")
    hits, total = await search(store, "apple")
    assert total == 2
    assert [h.thread.id for h in hits] == ["t-many", "t-once"]
    many = hits[0]
    assert many.matches == 3
    assert many.message_id == "t-many-m2"  # the best-ranked of its three
    assert hits[0].rank >= hits[1].rank
    assert many.thread.last_message_preview == "apple apple apple pie with apple"  # user text


async def test_c08_204_filters_combine_with_text(store: Store) -> None:
    await thread(store, "t-a1", "invoice overdue", user_id="alice", tags=("billing",))
    await thread(store, "t-a2", "invoice paid", user_id="alice", agent="sales")
    await thread(store, "t-b1", "invoice lost", user_id="bob", tags=("billing", "urgent"))
    await thread(store, "t-b2", "weather today", user_id="bob", tags=("billing",))
    assert await found(store, "invoice") == ["t-a1", "t-a2", "t-b1"]
    assert await found(store, "invoice", user_id="alice") == ["t-a1", "t-a2"]
    assert await found(store, "invoice", user_id="carol") == []
    assert await found(store, "invoice", tags=("billing",)) == ["t-a1", "t-b1"]
    assert await found(store, "invoice", tags=("billing", "urgent")) == ["t-b1"]
    assert await found(store, "invoice", agent_id="sales") == ["t-a2"]
    await store.set_status("t-b1", ThreadStatus(state="failed", since=1))
    assert await found(store, "invoice", states=("idle",)) == ["t-a1", "t-a2"]
    assert await found(store, "invoice", states=("failed", "running")) == ["t-b1"]
    _, total = await search(store, "invoice", user_id="bob", tags=("billing",))
    assert total == 1


async def test_c08_205_paged_with_total(store: Store) -> None:
    for i in range(7):
        await thread(store, f"t-{i}", f"needle number {i}")
    await thread(store, "t-hay", "hay only")
    pages = [await search(store, "needle", limit=3, offset=o) for o in (0, 3, 6, 9)]
    assert [total for _, total in pages] == [7, 7, 7, 7]
    ids = [h.thread.id for hits, _ in pages for h in hits]
    assert sorted(ids) == [f"t-{i}" for i in range(7)]
    assert [len(hits) for hits, _ in pages] == [3, 3, 1, 0]


async def test_c08_206_index_follows_edits_and_deletions(store: Store) -> None:
    await thread(store, "t-edit", "original wording")
    await thread(store, "t-gone", "vanishing words", "more vanishing")
    message = Message(id="t-edit-m0", role="user", content="original wording")
    stored, _ = await store.update_message(
        "t-edit", message.model_copy(update={"content": "revised wording"})
    )
    assert stored.content == "revised wording"
    assert await found(store, "original") == []
    assert await found(store, "revised") == ["t-edit"]
    # a message hidden later leaves the search, shown again comes back
    await store.update_message(
        "t-edit", stored.model_copy(update={"silent": True, "content": "revised wording"})
    )
    assert await found(store, "revised") == []
    await store.update_message("t-edit", stored)
    assert await found(store, "revised") == ["t-edit"]
    # a deleted message
    await store.delete_message("t-gone", "t-gone-m0")
    hits, _ = await search(store, "vanishing")
    assert [(h.thread.id, h.message_id, h.matches) for h in hits] == [("t-gone", "t-gone-m1", 1)]
    # a deleted thread with its children
    await store.create_thread(NewThread(id="t-child", agent_id="chat", parent_id="t-gone"))
    await store.insert_message("t-child", Message(id=new_id(), role="user", content="vanishing"))
    assert await found(store, "vanishing") == ["t-child", "t-gone"]
    await store.delete_thread("t-gone")
    assert await found(store, "vanishing") == []
    assert await found(store, "wording") == ["t-edit"]


async def test_c08_197_a_model_message_found_by_the_text_it_ends_with(db_url: str) -> None:
    """C08-197: a model message stored pending while it streams is found by its final
    text, not by none; one stopped mid-stream by the text it kept; on PostgreSQL the
    vector is a plain column the store writes (migration 21), not a generated one."""
    from threadloom import Agent, Definitions, Runtime, Side
    from threadloom.define import Model, Prompt
    from threadloom.providers.scripted import Reply, ScriptedProvider

    script = [
        Reply.text("persimmon pudding tonight", chunk_size=10, chunk_delay=0.1),
        Reply.text("gooseberry fool perhaps", chunk_size=11, chunk_delay=0.5),
    ]
    defs = Definitions().add(
        Model(name="M", provider=ScriptedProvider(script), model="scripted-1"),
        Prompt(name="P", model="M", system="Answer."),
        Agent(name="chat", side_a=Side(prompt="P"), side_b=Side(label="User")),
    )
    rt = await Runtime.open(db_url, definitions=defs)
    try:
        state = await rt.create_thread("chat")
        tid = state.thread_id
        await rt.send_message(tid, "dessert?")
        await rt.wait_idle(tid, timeout=10)
        assert await found(rt.store, "pudding") == [tid]
        assert await found(rt.store, "tonight") == [tid]
        chunks = rt.events.subscribe(tid, kinds=["message_chunk"])
        await rt.send_message(tid, "another?")
        await chunks.get(timeout=5)
        await rt.stop(tid)
        await rt.wait_idle(tid, timeout=10)
        page = await state.get_messages(limit=10)
        failed = [(m.role, m.content) for m in page.messages if m.status == "failed"]
        assert failed == [("assistant", "gooseberry ")]
        assert await found(rt.store, "gooseberry") == [tid]
        assert await found(rt.store, "fool") == []
    finally:
        await rt.close()
    if db_url.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db_url, autocommit=True) as pg:
            row = pg.execute(
                "SELECT attgenerated FROM pg_attribute"
                " WHERE attrelid = 'messages'::regclass AND attname = 'search'"
            ).fetchone()
        assert row == ("",)


def _undo_search_index(db_url: str) -> None:
    """Put the store back as it was before the search migration, its rows kept: a store of
    the release before it, with messages already written."""
    if db_url.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db_url, autocommit=True) as pg:
            pg.execute("ALTER TABLE messages DROP COLUMN search")
            # 16 adds the column, generated; 21 makes it the store's to write
            pg.execute("DELETE FROM threadloom_migrations WHERE version IN (16, 21)")
        return
    import sqlite3
    from contextlib import closing

    from threadloom.store.sqlite.store import path_from_url

    with closing(sqlite3.connect(path_from_url(db_url))) as conn:
        for trigger in ("insert", "delete", "update"):  # the backlog's (migration 27)
            conn.execute(f"DROP TRIGGER messages_fts_backlog_{trigger}")
        conn.execute("DROP TABLE messages_fts_backlog")
        conn.execute("DROP TABLE messages_fts")
        conn.execute("DELETE FROM threadloom_migrations WHERE version IN (26, 27)")
        conn.commit()


async def test_c08_213_the_migration_indexes_the_messages_already_stored(db_url: str) -> None:
    store = await open_store(db_url)
    try:
        await thread(store, "t-old", "written before the index existed", "quietly stored")
        await store.insert_message(
            "t-old", Message(id=new_id(), role="tool", content="written", tool_call_id="c")
        )
    finally:
        await store.close()
    _undo_search_index(db_url)
    store = await open_store(db_url)  # migrates again: the index is filled
    try:
        hits, total = await search(store, "written")
        assert total == 1
        assert [(h.thread.id, h.message_id, h.matches) for h in hits] == [("t-old", "t-old-m0", 1)]
        assert await found(store, "quietly") == ["t-old"]
        # and kept in step from then on
        await store.insert_message("t-old", Message(id="t-old-new", role="user", content="fresh"))
        assert await found(store, "fresh") == ["t-old"]
    finally:
        await store.close()


async def test_c08_214_threads_retention_deletes_leave_the_index(db_url: str) -> None:
    from threadloom import RetentionPolicy, Runtime

    now = [1_800_000_000_000_000]

    def clock() -> int:
        now[0] += 1
        return now[0]

    rt = await Runtime.open(
        db_url, clock=clock, retention=RetentionPolicy(interval_s=None, inactive_days=30)
    )
    try:
        old = await rt.create_thread("a", user_id="u")
        child = await rt.create_thread("a", user_id="u", parent=old.thread_id)
        await old.inject_message(role="user", content="retained nowhere")
        await child.inject_message(role="user", content="retained nowhere either")
        now[0] += 31 * 86_400_000_000
        kept = await rt.create_thread("a", user_id="u")
        await kept.inject_message(role="user", content="retained here")
        assert await found(rt.store, "retained") == sorted(
            [old.thread_id, child.thread_id, kept.thread_id]
        )
        report = await rt.apply_retention()
        assert [o.ids for o in report.outcomes] == [[old.thread_id]]
        assert await found(rt.store, "retained") == [kept.thread_id]
        assert await found(rt.store, "nowhere") == []
    finally:
        await rt.close()
