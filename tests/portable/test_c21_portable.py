"""Threads that move (spec 21): a thread tree exported to a versioned file and imported
into another store as history — on SQLite and PostgreSQL, with a real run's messages,
reasoning, log rows and cost, a child thread, files, shared state."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pg_support import create_schema, drop_schema, require_postgres, schema_url
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt, tool
from threadloom.errors import FormatTooNew, PortableFormatError, ThreadBusy, ThreadExists
from threadloom.providers.script import Call, Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.records import SubagentRegistryEntry, ThreadStatus
from threadloom.records.portable import VERSION, parse_export, version_for
from threadloom.store import open_store
from threadloom.store.base import NewFile, NewThread, StateChange, Store
from threadloom.store.fork import fork_thread
from threadloom.store.portable import export_thread, import_thread


@tool
def echo(v: Any = None) -> str:
    """Echo the value back."""
    return f"echo {v}"


def _definitions(provider: ScriptedProvider) -> Definitions:
    return Definitions().add(
        Model(name="M", provider=provider, model="scripted-1", input_price=1.0, output_price=2.0),
        Prompt(name="P", model="M", system="You are P.", tools=["echo"]),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="Customer")),
        echo,
    )


async def _rich_thread(url: str) -> str:
    """A thread with a real run (reasoning with provider details, a tool call, priced
    requests), an app log with a cost, a file with a thumbnail, a link, a directory, a
    shared state, and a child thread with its registry entry and a message."""
    provider = ScriptedProvider(
        [
            Reply(
                reasoning_content="think",
                reasoning_details=[{"type": "reasoning.text", "text": "think", "signature": "s1"}],
                tool_calls=[Call("echo", {"v": 1})],
                usage={"input_tokens": 1000, "output_tokens": 500},
            ),
            Reply.text("Done ✓", usage={"input_tokens": 1200, "output_tokens": 30}),
        ]
    )
    runtime = await Runtime.open(url, definitions=_definitions(provider))
    try:
        state = await runtime.create_thread("chat", user_id="u1", tags=("name:moving",))
        tid = state.thread_id
        await runtime.send_message(tid, "Hello")
        await runtime.wait_idle(tid, timeout=10)
        await state.log(name="lookup", message="app work", cost=0.25, data={"k": [1, 2]})
        store = runtime.store
        await store.write_file(
            tid,
            NewFile(path="/docs/a.bin", mime_type="application/octet-stream"),
            bytes(range(256)) * 3,
            thumbnail=b"\x89PNG-thumb",
        )
        await store.write_file(
            tid,
            NewFile(
                path="/link",
                mime_type="text/html",
                storage="url",
                location="https://example.com/x",
                size=12,
            ),
            None,
        )
        await store.mkdir_file(tid, "/empty")
        await store.write_shared_state(tid, StateChange(replace={"todo": ["a", "b"], "n": 1.5}))
        child = str(uuid.uuid4())
        await store.create_child(
            NewThread(id=child, agent_id="chat", user_id="u1", parent_id=tid),
            SubagentRegistryEntry(
                reference=child, relationship="helper", name="helper", status="idle"
            ),
        )
        from threadloom.records import Message

        await store.insert_message(child, Message(id=str(uuid.uuid4()), role="user", content="sub"))
        return tid
    finally:
        await runtime.close(drain=0)


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    require_postgres()
    name = f"tl_{uuid.uuid4().hex[:16]}"
    create_schema(name)
    try:
        yield schema_url(name)
    finally:
        drop_schema(name)


@pytest.fixture
async def source(tmp_path: Path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'source.db'}"
    return url, await _rich_thread(url)


async def _export(url: str, tid: str) -> bytes:
    store = await open_store(url)
    try:
        return (await export_thread(store, tid)).dump()
    finally:
        await store.close()


async def _fork(url: str, tid: str) -> tuple[str, str]:
    """A fork of ``tid`` at its first assistant message, in the store at ``url``: the
    fork's id and the message it was made at."""
    store = await open_store(url)
    try:
        page, _ = await store.read_page(
            tid, limit=None, offset=0, order="asc", include_silent=True, max_depth=0
        )
        at = next(m.id for m in page if m.role == "assistant")
        made = await fork_thread(store, tid, at, "edited", now_us=1_800_000_000_000_000)
        return made.row.id, at
    finally:
        await store.close()


async def test_c21_001_c21_002_c21_013_round_trip_sqlite_file_postgresql_file_is_identical(
    source: tuple[str, str], pg_url: str
) -> None:
    """C21-001, C21-002, C21-013: a thread exported from SQLite, imported into PostgreSQL
    and exported again gives the same bytes; the file carries the messages with reasoning
    and its details, the log rows with bodies and cost, the files' bytes, the shared state
    and the child-thread tree. A fork of it does the same round trip with its lineage
    (``forked_from``, version 2), which PostgreSQL lists among the source's forks."""
    url, tid = source
    fork_id, at = await _fork(url, tid)
    first = await _export(url, tid)
    doc = parse_export(first)
    assert (doc.format, doc.version, doc.root) == ("threadloom.thread", 1, tid)
    assert b'"forked_from"' not in first and doc.threads[0].forked_from is None
    root, child = doc.threads
    assert child.parent_id == tid and [e.reference for e in root.registry] == [child.id]
    (thinking,) = [m for m in root.messages if m.reasoning_content]
    assert json.loads(thinking.reasoning_details or "[]")[0]["signature"] == "s1"
    assert [m.role for m in root.messages] == ["user", "assistant", "tool", "assistant"]
    llm = [r for r in root.logs if r.kind is None]
    assert len(llm) == 2 and all(r.request_body and r.response_body for r in llm)
    assert root.cost.request_count == 2 and root.cost.app_cost == 0.25
    assert root.cost.llm_cost == pytest.approx(sum(r.cost_total or 0 for r in llm))
    files = {f.path: f for f in root.files}
    assert files["/docs/a.bin"].content_bytes() == bytes(range(256)) * 3
    assert files["/docs/a.bin"].thumbnail_bytes() == b"\x89PNG-thumb"
    assert (files["/link"].kind, files["/empty"].kind) == ("link", "dir")
    assert root.shared_state.value == {"todo": ["a", "b"], "n": 1.5}
    assert root.status.state == "idle" and root.status.reason == "stop_on_response"

    forked = await _export(url, fork_id)
    fork_doc = parse_export(forked)
    assert fork_doc.version == VERSION == 2
    lineage = fork_doc.threads[0].forked_from
    assert lineage is not None and (lineage.thread_id, lineage.message_id) == (tid, at)

    pg = await open_store(pg_url)
    try:
        stored = await import_thread(pg, parse_export(first))
        assert stored.root == tid
        second = (await export_thread(pg, tid)).dump()
        await import_thread(pg, parse_export(forked))
        again = (await export_thread(pg, fork_id)).dump()
        row = await pg.get_thread(fork_id)
        assert row is not None and row.forked_from_thread_id == tid
        assert row.forked_from_message_id == at
        assert [f.id for f in await pg.list_forks(tid)] == [fork_id]
    finally:
        await pg.close()
    assert second == first
    assert again == forked


@pytest.fixture
async def target(db_url: str) -> AsyncIterator[Store]:
    opened = await open_store(db_url)
    yield opened
    await opened.close()


async def test_c21_003_an_import_is_history_not_a_run(source: tuple[str, str], db_url: str) -> None:
    """C21-003: the imported tree keeps its ids, times and status; a runtime opened on the
    store afterwards starts no run of it (its model gets no request) and the thread reads
    as the file says."""
    url, tid = source
    doc = parse_export(await _export(url, tid))
    store = await open_store(db_url)
    try:
        await import_thread(store, doc)
    finally:
        await store.close()
    provider = ScriptedProvider([Reply.text("should not run")])
    runtime = await Runtime.open(db_url, definitions=_definitions(provider))
    try:
        await asyncio.sleep(0.3)
        row = await runtime.store.get_thread(tid)
        assert row is not None and row.status == doc.threads[0].status
        assert row.created_at_us == doc.threads[0].created_at_us
        assert provider.requests == []
        stats = await runtime.store.thread_stats(tid)
        assert (stats.message_count, stats.queued_count) == (len(doc.threads[0].messages), 0)
        children = await runtime.store.descendants(tid)
        assert [c.id for c in children] == [doc.threads[1].id]
        # the thread goes on from its history: a new message comes after the imported ones
        state = await runtime.thread(tid)
        stored = await state.inject_message({"role": "user", "content": "later"})
        assert stored.created_at > max(m.created_at for m in doc.threads[0].messages)
    finally:
        await runtime.close(drain=0)


async def test_c21_004_an_id_already_stored_refuses_the_import(
    source: tuple[str, str], target: Store
) -> None:
    """C21-004: importing a file whose thread id the store holds raises ``ThreadExists``
    naming that id, and writes nothing (the second import leaves one copy)."""
    url, tid = source
    doc = parse_export(await _export(url, tid))
    await import_thread(target, doc)
    before = await target.thread_stats(tid)
    with pytest.raises(ThreadExists) as caught:
        await import_thread(target, doc)
    assert caught.value.existing_id == tid and tid in str(caught.value)
    assert await target.thread_stats(tid) == before
    _, total = await target.list_threads()
    assert total == 2


async def test_c21_005_new_ids_are_given_consistently(
    source: tuple[str, str], target: Store
) -> None:
    """C21-005: ``ids="new"`` stores a copy beside the original under new thread, message
    and log ids; every reference follows (parent, registry, a message's log row, a log's
    message), and the copy exports to the original's content under the new ids."""
    url, tid = source
    doc = parse_export(await _export(url, tid))
    await import_thread(target, doc)
    copy = await import_thread(target, doc, ids="new")
    old_ids = {t.id for t in doc.threads} | {m.id for t in doc.threads for m in t.messages}
    new_ids = {t.id for t in copy.threads} | {m.id for t in copy.threads for m in t.messages}
    assert not old_ids & new_ids
    root, child = copy.threads
    assert child.parent_id == root.id and root.registry[0].reference == child.id
    logs = {r.id for r in root.logs}
    messages = {m.id for m in root.messages}
    assert all(m.log_id in logs for m in root.messages if m.log_id)
    assert all(r.message_id in messages for r in root.logs if r.message_id)
    again = await export_thread(target, copy.root)
    assert again.dump() == copy.dump()
    assert [m.content for m in again.threads[0].messages] == [
        m.content for m in doc.threads[0].messages
    ]


async def test_c21_006_a_newer_format_version_is_refused(
    source: tuple[str, str], target: Store
) -> None:
    """C21-006: a file of version VERSION + 1 is refused before anything is read or stored,
    with a message naming both versions; a file of another format is refused too."""
    url, tid = source
    data = json.loads(await _export(url, tid))
    data["version"] = VERSION + 1
    with pytest.raises(FormatTooNew) as caught:
        parse_export(json.dumps(data))
    assert f"version {VERSION + 1}" in str(caught.value)
    assert f"version {VERSION})" in str(caught.value)
    with pytest.raises(PortableFormatError, match="format"):
        parse_export(json.dumps({"format": "other", "version": 1}))
    with pytest.raises(PortableFormatError, match="JSON"):
        parse_export(b"\x00not json")
    assert await target.get_thread(tid) is None


def test_c21_012_integers_written_with_a_zero_fraction_are_integers() -> None:
    """C21-012: JSON has one kind of number: ``595.0`` where an integer belongs is 595 (a
    fuzzer following the schema sends it); a fraction, a text, a boolean or a number
    beyond 64 bits is refused naming the field."""

    def doc(created: object, version: object = 1) -> dict[str, object]:
        return {
            "format": "threadloom.thread",
            "version": version,
            "root": "t1",
            "lineage": [],
            "threads": [
                {
                    "id": "t1",
                    "agent_id": "echo",
                    "origin_agent_id": "echo",
                    "created_at_us": created,
                    "status": {"state": "idle", "since": 1},
                }
            ],
        }

    read = parse_export(json.dumps(doc(595.0, version=1.0)))
    assert read.version == 1 and read.threads[0].created_at_us == 595
    assert type(read.threads[0].created_at_us) is int
    for bad in (595.5, "595", True, 1e30):
        with pytest.raises(PortableFormatError) as caught:
            parse_export(json.dumps(doc(bad)))
        assert caught.value.field == "threads[0].created_at_us", bad


async def test_c21_007_a_running_thread_is_not_exported(target: Store) -> None:
    """C21-007: while a thread of the tree runs, the export refuses (``ThreadBusy``); an
    unknown thread is ``ThreadNotFound``."""
    await target.create_thread(NewThread(id="r1", agent_id="chat"))
    await target.set_status("r1", ThreadStatus(state="running", since=1))
    with pytest.raises(ThreadBusy):
        await export_thread(target, "r1")
    from threadloom.errors import ThreadNotFound

    with pytest.raises(ThreadNotFound):
        await export_thread(target, "nope")


async def test_c21_010_the_cli_exports_and_imports_against_database_urls(
    source: tuple[str, str], pg_url: str, tmp_path: Path
) -> None:
    """C21-010: ``threadloom export ID --store SQLITE > file`` writes the file the Python
    export gives; ``threadloom import FILE --store POSTGRESQL`` stores it (exit 0, the root
    named); again: exit 1 naming the id; ``--new-ids``: exit 0; a newer version: exit 2
    naming both versions."""
    from test_cli_run import run_cli

    url, tid = source
    exported = await asyncio.to_thread(run_cli, "export", tid, "--store", url, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.encode() == await _export(url, tid)
    path = tmp_path / "thread.json"
    path.write_bytes(exported.stdout.encode())
    first = await asyncio.to_thread(run_cli, "import", str(path), "--store", pg_url, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert f"root {tid}" in first.stdout
    assert await _export(pg_url, tid) == path.read_bytes()
    again = await asyncio.to_thread(run_cli, "import", str(path), "--store", pg_url, cwd=tmp_path)
    assert again.returncode == 1 and tid in again.stderr
    copy = await asyncio.to_thread(
        run_cli, "import", str(path), "--new-ids", "--store", pg_url, cwd=tmp_path
    )
    assert copy.returncode == 0, copy.stderr
    data = json.loads(path.read_bytes())
    data["version"] = VERSION + 1
    path.write_text(json.dumps(data))
    newer = await asyncio.to_thread(run_cli, "import", str(path), "--store", pg_url, cwd=tmp_path)
    assert newer.returncode == 2
    assert f"version {VERSION + 1}" in newer.stderr and f"version {VERSION})" in newer.stderr
    unknown = await asyncio.to_thread(run_cli, "export", "nope", "--store", url, cwd=tmp_path)
    assert unknown.returncode == 1 and "nope" in unknown.stderr


async def test_c21_014_a_forks_lineage_is_kept_as_given_on_import(
    source: tuple[str, str], target: Store
) -> None:
    """C21-014: a fork's file imported into a store without its source keeps the lineage
    as given (the row names the source thread and message, and the source's forks, read
    by that lineage, list it); imported again with
    ``ids="new"`` into a store that holds the source, the copy keeps the same lineage (it
    names a thread outside the file) and the source lists both."""
    url, tid = source
    fork_id, at = await _fork(url, tid)
    forked = parse_export(await _export(url, fork_id))
    await import_thread(target, forked)
    row = await target.get_thread(fork_id)
    assert row is not None and (row.forked_from_thread_id, row.forked_from_message_id) == (
        tid,
        at,
    )
    # the source is not in this store: its forks are read by the lineage all the same,
    # as those of a deleted thread are
    assert await target.get_thread(tid) is None
    assert [f.id for f in await target.list_forks(tid)] == [fork_id]
    await import_thread(target, parse_export(await _export(url, tid)))
    copy = await import_thread(target, forked, ids="new")
    lineage = copy.threads[0].forked_from
    assert lineage is not None and (lineage.thread_id, lineage.message_id) == (tid, at)
    assert {f.id for f in await target.list_forks(tid)} == {fork_id, copy.root}
    assert (await export_thread(target, copy.root)).dump() == copy.dump()


def test_c21_015_a_file_is_written_with_the_lowest_version_that_carries_it() -> None:
    """C21-015: a tree without a fork or a compaction is written as version 1 without
    their keys (the bytes a Threadloom before version 2 wrote and reads); a fork's lineage
    or a compaction makes it version 2, which such a reader refuses by its version; a
    version-1 file that holds those keys (compactions were written so before version 2)
    is read."""
    status = {"state": "idle", "since": 1, "reason": None}
    thread = {
        "id": "t1",
        "agent_id": "a",
        "origin_agent_id": "a",
        "created_at_us": 1,
        "status": status,
    }
    plain = parse_export(
        json.dumps({"format": "threadloom.thread", "version": 1, "root": "t1", "threads": [thread]})
    )
    assert version_for(plain.threads) == 1
    assert b'"forked_from"' not in plain.dump() and b'"compactions"' not in plain.dump()
    lineage = {**thread, "forked_from": {"thread_id": "s", "message_id": "m"}}
    old = parse_export(
        json.dumps(
            {"format": "threadloom.thread", "version": 1, "root": "t1", "threads": [lineage]}
        )
    )
    assert old.threads[0].forked_from is not None
    assert version_for(old.threads) == 2
    assert b'"forked_from":{"message_id":"m","thread_id":"s"}' in old.dump()
    with pytest.raises(PortableFormatError) as bad:
        parse_export(
            json.dumps(
                {
                    "format": "threadloom.thread",
                    "version": 2,
                    "root": "t1",
                    "threads": [{**thread, "forked_from": {"thread_id": "s"}}],
                }
            )
        )
    assert "threads[0].forked_from.message_id" in str(bad.value)
