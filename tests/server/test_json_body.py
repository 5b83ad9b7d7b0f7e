"""The messages page's wire bytes stay exactly as ``JSONResponse`` wrote them (issue 23
item 9): ``GET …/messages`` encodes with pydantic-core instead of ``json.dumps`` only where
both write the same bytes, and renders without the metadata's detached copy.

The reference is the route's rendering before: ``MessagesPage.to_wire()`` (chronological),
``seq`` added, encoded by Starlette's ``JSONResponse``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_json
from starlette.responses import JSONResponse

from conftest import Api
from threadloom.records import PROJECTED_FIELDS, AttachmentRef, Message, MessagesPage
from threadloom.server import json_body

# -- the encoder ----------------------------------------------------------------------------

_text = st.text(
    st.characters(codec="utf-8"),  # every code point but lone surrogates (never stored)
    max_size=40,
)
_floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.0, -0.0, 1e-5, 1e-4, 9.99e-5, 1e-10, 1e16, 1e15, 1.5e300, 5e-324, 0.1]
)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | _floats
    | _text
)
_json = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(_text, children, max_size=5),
    max_leaves=25,
)


def reference(value: Any) -> bytes:
    return bytes(JSONResponse(value).body)


@given(_json)
@settings(max_examples=400, deadline=None)
def test_to_json_equals_json_dumps_wherever_same_in_both_says_so(value: Any) -> None:
    assert json_body.python_json(value) == reference(value)
    if json_body.same_in_both(value):
        assert to_json(value) == reference(value)


def test_the_floats_pydantic_core_spells_differently_are_left_to_json_dumps() -> None:
    for small in (1e-5, -3.9e-8, 5.9e-5, 1e-9):
        assert to_json(small) != reference(small)  # why the check exists
        assert not json_body.same_in_both({"a": [small]})
    for value in (float("nan"), float("inf"), (1, 2), {1: "a"}, b"x", {"a": object()}):
        assert not json_body.same_in_both(value)
    assert json_body.same_in_both({"a": [1, 1e-4, 0.0, 2.5, 1e300, None, True, "é"]})


_attachment = st.builds(
    AttachmentRef,
    id=_text,
    path=_text,
    name=_text,
    mimeType=_text,
    size=st.integers(min_value=0, max_value=2**40),
    width=st.none() | st.integers(min_value=1, max_value=10_000),
    height=st.none() | st.integers(min_value=1, max_value=10_000),
    description=st.none() | _text,
)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    message = Message(
        id=draw(_text),
        role=draw(st.sampled_from(["system", "user", "assistant", "tool"])),
        content=draw(st.none() | _text),
        name=draw(st.none() | _text),
        tool_calls=draw(st.none() | _text),
        tool_call_id=draw(st.none() | _text),
        tool_status=draw(st.sampled_from([None, "success", "error"])),
        status=draw(st.sampled_from([None, "pending", "completed", "failed"])),
        attachments=draw(st.none() | st.lists(_attachment, max_size=2)),
        reasoning_content=draw(st.none() | _text),
        reasoning_details=draw(st.none() | _text),
        prompt=draw(st.none() | _text),
        created_at=draw(st.integers(min_value=0, max_value=2**62)),
        parent_id=draw(st.none() | _text),
        depth=draw(st.integers(min_value=0, max_value=5)),
        silent=draw(st.booleans()),
        metadata=draw(st.none() | st.dictionaries(_text, _json, max_size=4)),
        subagent_id=draw(st.none() | _text),
        log_id=draw(st.none() | _text),
    )
    if message.subagent_id is not None:  # as ThreadHub.project fills them
        for key in PROJECTED_FIELDS:
            value = draw(st.booleans()) if key == "subagent_blocking" else draw(_text)
            setattr(message, key, draw(st.none() | st.just(value)))
    return message


@given(
    st.lists(messages(), max_size=6),
    st.integers(min_value=0, max_value=2**40),
    st.booleans(),
    st.integers(min_value=0, max_value=2**40),
)
@settings(max_examples=300, deadline=None)
def test_messages_page_has_the_bytes_of_to_wire_and_json_response(
    records: list[Message], total: int, has_more: bool, seq: int
) -> None:
    wire = MessagesPage(messages=records, total=total, hasMore=has_more).to_wire()
    wire["seq"] = seq
    assert json_body.messages_page(records, total, has_more, seq) == reference(wire)


def test_the_wire_bytes_of_a_full_and_a_plain_record_are_pinned() -> None:
    """The bytes the route wrote at c94d455 (JSONResponse over ``MessagesPage.to_wire()``),
    as a literal: key order, escapes, ``1e-05``, projected fields, attachment keys."""
    full = Message(
        id="m-1",
        role="tool",
        content='Zürich "q"\n',
        name="weather",
        tool_call_id="call_1",
        tool_status="success",
        status="completed",
        attachments=[
            AttachmentRef(
                id="/a.png",
                path="/a.png",
                name="a.png",
                mimeType="image/png",
                size=68,
                width=1,
                height=1,
            )
        ],
        reasoning_content="why",
        reasoning_details="[]",
        prompt="p",
        created_at=1796508275710544,
        parent_id="m-0",
        depth=1,
        silent=True,
        metadata={"client_message_id": "c-1", "tiny": 1e-05, "n": [1, 2.5, None, True]},
        subagent_id="s-1",
        log_id="l-1",
    )
    projected = ("scouting", "scout", "Scout", "d", "idle", False, "north", "m-0")
    for key, value in zip(PROJECTED_FIELDS, projected, strict=True):
        setattr(full, key, value)
    plain = Message(
        id="m-2",
        role="assistant",
        tool_calls='[{"id":"call_2","type":"function","function":{"name":"f","arguments":"{}"}}]',
        created_at=1796508275710545,
    )
    expected = (
        '{"messages":[{"id":"m-1","role":"tool","content":"Zürich \\"q\\"\\n","name":"weathe'
        'r","tool_calls":null,"tool_call_id":"call_1","tool_status":"success","status":"c'
        'ompleted","attachments":[{"id":"/a.png","type":"file","path":"/a.png","name":"a.'
        'png","mimeType":"image/png","size":68,"width":1,"height":1}],"reasoning_content"'
        ':"why","reasoning_details":"[]","prompt":"p","created_at":1796508275710544,"pare'
        'nt_id":"m-0","depth":1,"silent":true,"metadata":{"client_message_id":"c-1","tiny'
        '":1e-05,"n":[1,2.5,null,true]},"subagent_id":"s-1","subagent_relationship":"scou'
        'ting","subagent_name":"scout","subagent_title":"Scout","subagent_description":"d'
        '","subagent_status":"idle","subagent_blocking":false,"subagent_thread_name":"nor'
        'th","subagent_spawn_group_id":"m-0","log_id":"l-1"},{"id":"m-2","role":"assistan'
        't","content":null,"name":null,"tool_calls":"[{\\"id\\":\\"call_2\\",\\"type\\":\\"funct'
        'ion\\",\\"function\\":{\\"name\\":\\"f\\",\\"arguments\\":\\"{}\\"}}]","tool_call_id":null,'
        '"tool_status":null,"status":"completed","attachments":null,"reasoning_content":n'
        'ull,"reasoning_details":null,"prompt":null,"created_at":1796508275710545,"parent'
        '_id":null,"depth":0,"silent":false,"subagent_id":null,"log_id":null}],"total":2,'
        '"hasMore":false,"seq":7}'
    ).encode()
    assert json_body.messages_page([full, plain], 2, False, 7) == expected
    without_tiny = {k: v for k, v in (full.metadata or {}).items() if k != "tiny"}
    full.metadata = without_tiny  # the pydantic-core path: the same bytes less that key
    assert json_body.messages_page([full, plain], 2, False, 7) == expected.replace(
        b',"tiny":1e-05', b""
    )


# -- over HTTP, on both stores ---------------------------------------------------------------

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
QUERIES = (
    "",
    "?order=asc",
    "?limit=3&offset=2",
    "?order=asc&limit=4&offset=1",
    "?includeSilent=true",
    "?depth=5&includeSilent=true&limit=1000",
    "?includeWorkblocks=true",
)


def initial_messages() -> list[dict[str, Any]]:
    arguments = json.dumps({"city": "Zürich", "days": 3, "ratio": 0.25})
    return [
        {
            "role": "system",
            "content": 'You are terse.\n\tTabs, "quotes", back\\slash, \u0001 and \u2028.',
        },
        {
            "role": "user",
            "content": "Wetter in Zürich? 🌦️ — danke",
            "metadata": {
                "client_message_id": "4b7b3c1e-9f6e-4f0a-8f55-0c6e2f1d9a11",
                "tiny": 1e-05,  # written 1e-05 by json.dumps, 0.00001 by pydantic-core
                "big": 2**70,
                "nested": {"list": [1, 2.5, None, True, "ä"], "empty": {}},
            },
            "attachments": [
                {"name": "dot.png", "mimeType": "image/png", "data": base64.b64encode(PNG).decode()}
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": arguments},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "tool_status": "success",
            "content": json.dumps({"temp": -1.5, "sky": "bewölkt"}, ensure_ascii=False),
        },
        {"role": "assistant", "content": "Bewölkt, −1,5 °C.", "name": "forecaster"},
        {"role": "user", "content": "quiet note", "silent": True, "metadata": {"n": 1}},
        {"role": "user", "content": "plain", "metadata": {"client_message_id": "x", "w": 0.5}},
    ]


async def expected(api: Api, thread: str, query: str) -> bytes:
    """The page of ``query`` rendered as the route did before (JSONResponse)."""
    params = dict(p.split("=", 1) for p in query.lstrip("?").split("&") if p)
    state = await api.runtime.thread(thread)
    order = params.get("order", "desc")
    page = await state.get_messages(
        limit=int(params.get("limit", 100)),
        offset=int(params.get("offset", 0)),
        order="asc" if order == "asc" else "desc",
        include_silent=params.get("includeSilent") == "true",
        max_depth=int(params.get("depth", 0)),
        include_workblocks=params.get("includeWorkblocks") == "true",
    )
    out = page.to_wire()
    if order == "desc":
        out["messages"].reverse()
    row = await api.runtime.store.get_thread(thread)
    assert row is not None
    out["seq"] = row.event_seq
    return reference(out)


async def test_a_seeded_threads_pages_keep_their_bytes(api: Api) -> None:
    client = api.client()
    response = await client.post(
        "/api/threads", json={"agent_id": "gate", "initial_messages": initial_messages()}
    )
    assert response.status_code == 200, response.text
    thread = response.json()["threadId"]
    # a run waiting in its model call, and a send queued behind it (a pending view)
    sent = await client.post(f"/api/threads/{thread}/messages", json={"content": "first"})
    assert sent.status_code == 202, sent.text
    await api.gate.entered.wait()
    queued = await client.post(
        f"/api/threads/{thread}/messages",
        json={"content": "second ✓", "metadata": {"client_message_id": "q-1", "f": 1e-7}},
    )
    assert queued.status_code == 202, queued.text

    ids: list[str] = []
    for query in QUERIES:
        got = await client.get(f"/api/threads/{thread}/messages{query}")
        assert got.status_code == 200, got.text
        assert got.headers["content-type"] == "application/json"
        assert int(got.headers["content-length"]) == len(got.content)
        assert got.content == await expected(api, thread, query), query
        ids = [m["id"] for m in got.json()["messages"]]
    body = (await client.get(f"/api/threads/{thread}/messages?order=asc")).json()
    assert any(m["status"] == "pending" for m in body["messages"])  # the queued send
    assert b'"tiny":1e-05' in (await client.get(f"/api/threads/{thread}/messages")).content
    picked = ",".join(ids[1:4])
    got = await client.get(f"/api/threads/{thread}/messages?ids={picked}")
    state = await api.runtime.thread(thread)
    page = await state.get_messages(ids=ids[1:4])
    out = page.to_wire()
    row = await api.runtime.store.get_thread(thread)
    assert row is not None
    out["seq"] = row.event_seq
    assert got.content == reference(out)

    api.gate.open()
    await api.settle(thread)
    for query in QUERIES[:2]:
        got = await client.get(f"/api/threads/{thread}/messages{query}")
        assert got.content == await expected(api, thread, query), query
