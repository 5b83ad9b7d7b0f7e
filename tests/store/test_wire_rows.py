"""A page's wire records built straight from the rows (``Store.read_page_wire``, issue 40)
are the records' own ``to_wire()`` (``Store.read_page``), on every store: every kind of
stored message (tool calls, results, reasoning with details, attachments, metadata with
floats, silent, nested), pending views of queue entries, every page shape (limit, offset,
order, silent, depth) — and a page where a message names a subagent is left to the records
(``None``: its projected fields are the thread layer's)."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator

import pytest

from threadloom.records import AttachmentRef, Message, QueueEntry, ToolCall, new_id
from threadloom.records.message import ToolCallFunction, encode_tool_calls
from threadloom.store import open_store
from threadloom.store.base import Store
from threadloom.store.core.codec import load_json_text
from threadloom.store.shapes import NewThread

THREAD = "t-wire"


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    opened = await open_store(db_url)
    yield opened
    await opened.close()


def _messages() -> list[Message]:
    call = ToolCall(
        id="call_1",
        function=ToolCallFunction(name="lookup", arguments='{"order":"A-1"}'),
        extra_content={"google": {"thought_signature": "c2ln"}},
    )
    user = Message(
        id=new_id(),
        role="user",
        content="Grüße — my order A-1 🚚",
        metadata={"client_message_id": "web-1", "score": 0.5, "tiny": 1e-7, "n": [1, None]},
        attachments=[
            AttachmentRef(id=new_id(), path="/u/a.png", name="a.png", mimeType="image/png", size=3),
            AttachmentRef(
                id=new_id(),
                path="/u/b.png",
                name="b.png",
                mimeType="image/png",
                size=5,
                width=2,
                height=4,
                description="a chart",
            ),
        ],
    )
    called = Message(
        id=new_id(),
        role="assistant",
        content=None,
        tool_calls=encode_tool_calls([call]),
        reasoning_content="think",
        reasoning_details='[{"type":"reasoning.text","text":"think","signature":"s"}]',
        status="completed",
        log_id=new_id(),
    )
    result = Message(
        id=new_id(),
        role="tool",
        content='{"ok":true}',
        tool_call_id="call_1",
        name="lookup",
        tool_status="success",
    )
    silent = Message(id=new_id(), role="system", content="note", silent=True)
    nested = Message(id=new_id(), role="assistant", content="inner", depth=1, parent_id=user.id)
    answer = Message(id=new_id(), role="assistant", content="done", prompt="support")
    return [user, called, result, silent, nested, answer]


async def _seed(store: Store) -> None:
    await store.create_thread(NewThread(id=THREAD, agent_id="chat"))
    for message in _messages():
        await store.insert_message(THREAD, message)
    for i, metadata in enumerate([None, {"k": "v"}]):
        entry = QueueEntry(
            id=new_id(),
            role="user",
            content=f"queued {i}",
            metadata=metadata,
            source="api",
            created_at=0,
        )
        await store.enqueue(THREAD, entry, clear_stop=False)


async def test_wire_rows_equal_the_records_wire_on_every_page(store: Store) -> None:
    await _seed(store)
    shapes = itertools.product(
        (None, 1, 3, 100), (0, 2, 7), ("asc", "desc"), (False, True), (0, 1, None)
    )
    pages = 0
    for limit, offset, order, silent, depth in shapes:
        page = dict(limit=limit, offset=offset, order=order, include_silent=silent, max_depth=depth)
        records, total = await store.read_page(THREAD, **page)  # type: ignore[arg-type]
        wired = await store.read_page_wire(THREAD, **page)  # type: ignore[arg-type]
        assert wired is not None, page
        assert wired == ([m.to_wire() for m in records], total), page
        pages += 1
    everything, total = await store.read_page(
        THREAD, limit=None, offset=0, order="asc", include_silent=True, max_depth=None
    )
    assert total == 8 and pages == 4 * 3 * 2 * 2 * 3
    wire = [m.to_wire() for m in everything]
    # the page holds each kind: attachments without their absent fields, metadata kept
    assert wire[0]["attachments"][0] == {
        "id": everything[0].attachments[0].id,  # type: ignore[index]
        "type": "file",
        "path": "/u/a.png",
        "name": "a.png",
        "mimeType": "image/png",
        "size": 3,
    }
    assert wire[0]["metadata"]["tiny"] == 1e-7 and wire[1]["tool_calls"].startswith('[{"id"')
    assert [m["metadata"]["queue_status"] for m in wire[-2:]] == ["queued", "queued"]


async def test_a_page_naming_a_subagent_is_left_to_the_records(store: Store) -> None:
    await _seed(store)
    child = Message(
        id=new_id(), role="assistant", content="from the child", subagent_id="child-ref"
    )
    await store.insert_message(THREAD, child)
    newest = dict(limit=1, offset=2, order="desc", include_silent=False, max_depth=0)
    assert await store.read_page_wire(THREAD, **newest) is None  # type: ignore[arg-type]
    # a page without it is still read from the rows
    oldest = dict(limit=2, offset=0, order="asc", include_silent=False, max_depth=0)
    wired = await store.read_page_wire(THREAD, **oldest)  # type: ignore[arg-type]
    records, total = await store.read_page(THREAD, **oldest)  # type: ignore[arg-type]
    assert wired == ([m.to_wire() for m in records], total)


async def test_a_pending_view_naming_a_subagent_is_left_to_the_records(store: Store) -> None:
    await store.create_thread(NewThread(id=THREAD, agent_id="chat"))
    entry = QueueEntry(
        id=new_id(),
        role="user",
        content="from the parent",
        metadata={"subagent_id": "child-ref"},
        source="parent",
        created_at=0,
    )
    await store.enqueue(THREAD, entry, clear_stop=False)
    page = dict(limit=10, offset=0, order="desc", include_silent=False, max_depth=0)
    records, _ = await store.read_page(THREAD, **page)  # type: ignore[arg-type]
    assert records[0].subagent_id == "child-ref"
    assert await store.read_page_wire(THREAD, **page) is None  # type: ignore[arg-type]


def test_stored_json_reads_as_json_loads_reads_it() -> None:
    """The wire path's metadata reader (pydantic-core's parser) gives what ``json.loads``
    gives, and falls back to it where pydantic-core refuses the text (a lone surrogate)."""
    texts = [
        '{"client_message_id": "web-000001"}',
        '{"big": 123456789012345678901234567890, "neg": -0.0, "one": 1.0, "e": 1e22}',
        '{"tiny": 5e-324, "max": 1.7976931348623157e308, "x": 0.1, "inf": 1e400}',
        '{"\\u00e9": "Z\\u00fcrich \\ud83d\\ude9a", "n": [1, null, true, {"k": []}]}',
        '{"a": 1, "a": 2}',
        '{"lone": "\\ud800"}',
    ]
    for text in texts:
        read = load_json_text(text)
        assert read == json.loads(text) and json.dumps(read) == json.dumps(json.loads(text))
    assert load_json_text('{"lone": "\\ud800"}') == {"lone": "\ud800"}
