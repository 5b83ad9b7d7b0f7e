"""AG-UI user messages with media parts (spec 13 §13.2.3): ``POST /api/agui/{agent}``
against a real server on SQLite and PostgreSQL, read as raw Server-Sent Events, every event
checked against the ``ag-ui-protocol`` models; the scripted model says which images it was
given. (The real TypeScript client sends an image in
``tests/interop/test_c13_agui_files_node.py``.)"""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

import pytest
from ag_ui.core import ImagePart, MessagesSnapshotEvent, TextPart, UrlSource, UserMessage
from test_c08_files import png
from test_c13_agui import run, run_input

from conftest import Api
from threadloom import Agent, Side
from threadloom.define import Model, Prompt
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ImagePart as ProviderImage
from threadloom.providers.types import ProviderRequest

PICTURE = png(5, 4)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def look(request: ProviderRequest) -> Reply:
    """Answers with the images of the last message: ``images: <type> <digest>, …``."""
    last = request.messages[-1]
    content = getattr(last, "content", "")
    images = (
        [p for p in content if isinstance(p, ProviderImage)] if isinstance(content, list) else []
    )
    seen = ", ".join(f"{i.media_type} {digest(base64.b64decode(i.data))}" for i in images)
    return Reply.text(f"images: {seen or 'none'}; text: {getattr(last, 'text', '')}")


def looker() -> tuple[Any, ...]:
    return (
        Model(name="eyes", provider=ScriptedProvider(look), model="scripted-eyes"),
        Prompt(name="look_prompt", model="eyes", system="You look at pictures."),
        Agent(name="looker", side_a=Side(prompt="look_prompt"), side_b=Side(label="User")),
    )


def image(data: bytes | str, mime: str = "image/png", kind: str = "image") -> dict[str, Any]:
    value = data if isinstance(data, str) else b64(data)
    return {"type": kind, "source": {"type": "data", "value": value, "mimeType": mime}}


def user(*parts: dict[str, Any] | str, message_id: str | None = None) -> dict[str, Any]:
    content = [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts]
    return {"id": message_id or str(uuid.uuid4()), "role": "user", "content": content}


async def stored(api: Api, thread: str) -> list[dict[str, Any]]:
    got = await api.client("alice").get(f"/api/threads/{thread}/messages?order=asc")
    assert got.status_code == 200, got.text
    messages: list[dict[str, Any]] = got.json()["messages"]
    return messages


async def test_c13_100_an_image_part_is_stored_and_shown_to_the_model(
    make_api: Any,
) -> None:
    """C13-100: a user message of a text part and an image part (data source) → stored with
    the text and one attachment ``image-2.png`` (image/png, 5×4) whose file holds the bytes
    (GET over the fs route); the model's request carries the image; MESSAGES_SNAPSHOT shows
    the message under its AG-UI id with a text part and an image part whose url source is
    the file's fs route, valid AG-UI 1.0."""
    api: Api = await make_api(extra=looker())
    thread = str(uuid.uuid4())
    message = user("What is this?", image(PICTURE), message_id="m-1")
    response, events = await run(api, "looker", run_input(thread, message))
    assert response.status_code == 200
    user_row, answer = await stored(api, thread)
    assert (user_row["role"], user_row["content"]) == ("user", "What is this?")
    (ref,) = user_row["attachments"]
    assert (ref["name"], ref["mimeType"], ref["size"]) == ("image-2.png", "image/png", len(PICTURE))
    assert (ref["width"], ref["height"]) == (5, 4)
    assert answer["content"] == f"images: image/png {digest(PICTURE)}; text: What is this?"
    file = await api.client("alice").get(f"/api/threads/{thread}/fs{ref['path']}")
    assert file.status_code == 200 and file.content == PICTURE
    assert file.headers["content-type"].startswith("image/png")
    (snapshot,) = [e for _, e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    parsed = MessagesSnapshotEvent.model_validate(snapshot)
    first = parsed.messages[0]
    assert isinstance(first, UserMessage) and first.id == "m-1"
    assert isinstance(first.content, list)
    text, picture = first.content
    assert isinstance(text, TextPart) and text.text == "What is this?"
    assert isinstance(picture, ImagePart) and isinstance(picture.source, UrlSource)
    assert picture.source.value == f"/api/threads/{thread}/fs{ref['path']}"
    assert picture.source.mime_type == "image/png"


async def test_c13_101_an_image_alone_and_a_data_url(make_api: Any) -> None:
    """C13-101: a message holding only an image part → stored with empty text and the
    attachment, and answered; an image given as a ``data:`` URL in a url source → stored
    as a data source is; sending the snapshot's messages again stores nothing twice."""
    api: Api = await make_api(extra=looker())
    thread = str(uuid.uuid4())
    alone = user(image(PICTURE), message_id="alone")
    response, _ = await run(api, "looker", run_input(thread, alone))
    assert response.status_code == 200
    url = {"type": "url", "value": f"data:image/png;base64,{b64(PICTURE)}"}
    linked = user("again", {"type": "image", "source": url}, message_id="linked")
    response, events = await run(api, "looker", run_input(thread, alone, linked))
    assert response.status_code == 200
    rows = await stored(api, thread)
    assert [(m["role"], m["content"]) for m in rows] == [
        ("user", ""),
        ("assistant", f"images: image/png {digest(PICTURE)}; text: "),
        ("user", "again"),
        ("assistant", f"images: image/png {digest(PICTURE)}; text: again"),
    ]
    assert [a["name"] for a in rows[0]["attachments"]] == ["image-1.png"]
    assert [a["name"] for a in rows[2]["attachments"]] == ["image-2.png"]
    (snapshot,) = [e for _, e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    again = run_input(thread, *snapshot["messages"])
    response, _ = await run(api, "looker", again)
    assert response.status_code == 200
    assert len(await stored(api, thread)) == 4
    state = await api.runtime.thread(thread)
    assert (await state.get_file_stats("/")).file_count == 2


@pytest.mark.parametrize(
    ("part", "field", "problem"),
    [
        (image("%%% not base64"), "messages[0].content[1].source.value", "must be base64"),
        (
            {"type": "image", "source": {"type": "url", "value": "http://169.254.169.254/x"}},
            "messages[0].content[1].source",
            "is a URL, which this server does not fetch",
        ),
        (
            {"type": "image", "source": {"type": "url", "value": "data:image/png,abc"}},
            "messages[0].content[1].source.value",
            "must be a base64 data: URL",
        ),
        (
            {"type": "image", "source": {"type": "file", "value": "file-abc"}},
            "messages[0].content[1].source",
            "is a provider's file handle",
        ),
        (
            image(b"<svg/>", "image/svg+xml"),
            "messages[0].content[1].source",
            "is an image of type image/svg+xml, which models are not given",
        ),
        (
            image(b"not a picture"),
            "messages[0].content[1].source",
            "is declared image/png but its bytes are not image data",
        ),
        (
            image(PICTURE, "application/pdf"),
            "messages[0].content[1].source",
            "is application/pdf, which is not a type of an image part",
        ),
        (
            image(b"x", "not a type", kind="document"),
            "messages[0].content[1].source",
            "has no valid MIME type",
        ),
        (
            {"type": "binary", "mimeType": "image/png", "data": b64(PICTURE)},
            "messages[0].content[1]",
            "",
        ),
    ],
    ids=[
        "not-base64",
        "http-url",
        "data-url-not-base64",
        "file-handle",
        "svg",
        "not-png",
        "pdf-image",
        "bad-mime",
        "binary",
    ],
)
async def test_c13_102_media_parts_refused_before_anything_is_written(
    make_api: Any, part: dict[str, Any], field: str, problem: str
) -> None:
    """C13-102: data that is not base64, a URL (never fetched), a provider's file handle, an
    image type models are not given, bytes that are not of the declared image type, a MIME
    type of another kind, a MIME type that is not one, the legacy ``binary`` part (not
    AG-UI 1.0) → 400 naming the field; no thread was created."""
    api: Api = await make_api(extra=looker())
    thread = str(uuid.uuid4())
    response, _ = await run(api, "looker", run_input(thread, user("look", part)))
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == "invalid_request"
    assert any(d["field"].startswith(field) for d in body["details"]), body
    assert problem in body["error"], body
    assert await api.runtime.store.get_thread(thread) is None


async def test_c13_102_media_over_the_file_limits(make_api: Any) -> None:
    """C13-102: a part over ``max_file_size`` → 413 naming it; parts that would take the
    thread over ``max_thread_file_bytes`` → 413; nothing stored."""
    api: Api = await make_api(
        extra=looker(), max_file_size=len(PICTURE), max_thread_file_bytes=len(PICTURE) * 2
    )
    thread = str(uuid.uuid4())
    big = png(40, 40)
    response, _ = await run(api, "looker", run_input(thread, user("look", image(big))))
    assert response.status_code == 413, response.text
    assert response.json()["details"][0]["field"] == "messages[0].content[1].source.value"
    three = user("look", image(PICTURE), image(PICTURE), image(PICTURE))
    response, _ = await run(api, "looker", run_input(thread, three))
    assert response.status_code == 413, response.text
    assert "maximum total size" in response.json()["error"]
    assert await api.runtime.store.get_thread(thread) is None
