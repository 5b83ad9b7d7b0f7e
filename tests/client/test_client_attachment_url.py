"""``attachment_url`` (spec 11 §11.2.2 ``session(...)``, §11.4): the URLs of the image and file
blocks of stored attachments are built by the caller's function, by default
``<base_url>/api/threads/<thread>/fs<path>``."""

from __future__ import annotations

import httpx
from test_client_files import png_1x1

from server.conftest import Api
from threadloom.client import AsyncClient, Upload
from threadloom.client.chat import FileBlock, ImageBlock, Outcome, TextBlock, fs_url
from threadloom.client.reduce import (
    FrameEvent,
    Snapshot,
    StatusChecked,
    ThreadView,
    empty_view,
    reduce,
)
from threadloom.records import AttachmentRef
from threadloom.records import Message as Record

IMAGE = {"id": "f1", "path": "/attachments/m1/my dot#1.png", "name": "my dot#1.png"}
NOTES = {"id": "f2", "path": "/attachments/m1/notes.txt", "name": "notes.txt"}


def with_attachments(message_id: str) -> Record:
    return Record.model_validate(
        {
            "id": message_id,
            "role": "user",
            "content": "look",
            "status": "completed",
            "created_at": 10,
            "attachments": [
                {**IMAGE, "mimeType": "image/png", "size": 3},
                {**NOTES, "mimeType": "text/plain", "size": 5},
            ],
        }
    )


def cdn(thread_id: str, ref: AttachmentRef) -> str:
    return f"https://cdn.example/{thread_id}/{ref.id}?name={ref.name}"


def blocks(view: ThreadView, message_id: str) -> tuple[ImageBlock, FileBlock]:
    message = view.by_id(message_id)
    assert message is not None and isinstance(message.content, tuple)
    text, image, notes = message.content
    assert text == TextBlock(text="look")
    assert isinstance(image, ImageBlock) and isinstance(notes, FileBlock)
    return image, notes


def test_every_way_a_record_reaches_the_view_uses_the_callers_function() -> None:
    frame = {"type": "message_data", "seq": 3, "message_id": "m2"}
    frame["data"] = with_attachments("m2").model_dump()
    view = reduce(
        empty_view("t 1"), Snapshot([with_attachments("m1")], None, None, 2), attachment_url=cdn
    )
    view = reduce(view, FrameEvent(frame), attachment_url=cdn)
    view = reduce(view, StatusChecked([with_attachments("m3")]), attachment_url=cdn)
    for message_id in ("m1", "m2", "m3"):
        image, notes = blocks(view, message_id)
        assert image.url == "https://cdn.example/t 1/f1?name=my dot#1.png"
        assert image.mime_type == "image/png"
        assert notes.url == "https://cdn.example/t 1/f2?name=notes.txt"
        assert notes.attachment is not None and notes.attachment.path == NOTES["path"]


def test_the_default_urls_are_percent_encoded_file_routes() -> None:
    view = reduce(empty_view("t/1"), Snapshot([with_attachments("m1")], None, None, 1))
    image, notes = blocks(view, "m1")
    # the pure reducer has no base URL: server-relative
    assert image.url == "/api/threads/t%2F1/fs/attachments/m1/my%20dot%231.png"
    assert notes.url == "/api/threads/t%2F1/fs/attachments/m1/notes.txt"
    ref = AttachmentRef.model_validate({**NOTES, "mimeType": "text/plain", "size": 5})
    assert fs_url("http://h:8000/")("t", ref) == "http://h:8000/api/threads/t/fs" + NOTES["path"]


async def test_a_session_builds_stored_attachment_urls_with_the_callers_function(
    api: Api, client: AsyncClient
) -> None:
    thread = (await client.threads.create("echo")).thread_id
    calls: list[tuple[str, str]] = []

    def signed(thread_id: str, ref: AttachmentRef) -> str:
        calls.append((thread_id, ref.path))
        return f"https://files.example/{ref.id}?sig=abc"

    uploads = [Upload("dot.png", "image/png", png_1x1()), Upload("n.txt", "text/plain", b"notes")]
    async with client.session(thread, attachment_url=signed) as session:
        assert session.attachment_url is signed
        sent = await session.send("look", attachments=uploads)
        final = await session.wait_for(
            lambda v: (
                (m := v.by_key(sent.key)) is not None
                and m.delivery.outcome is Outcome.SUCCESS
                and not v.running
            )
        )
    message = final.by_key(sent.key)
    assert message is not None and isinstance(message.content, tuple)
    _, image, notes = message.content
    stored_image, stored_notes = message.attachments
    assert isinstance(image, ImageBlock) and isinstance(notes, FileBlock)
    assert image.url == f"https://files.example/{stored_image.id}?sig=abc"
    assert notes.url == f"https://files.example/{stored_notes.id}?sig=abc"
    assert (thread, stored_image.path) in calls and (thread, stored_notes.path) in calls

    # a second session without the argument: the default URL is the server's real file route
    async with client.session(thread) as fresh:
        again = fresh.view.by_id(message.id)
    assert again is not None and isinstance(again.content, tuple)
    default_image = again.content[1]
    assert isinstance(default_image, ImageBlock)
    assert default_image.url == f"{api.base}/api/threads/{thread}/fs{stored_image.path}"
    headers = {"Authorization": f"Bearer {api.keys['alice']}"}
    async with httpx.AsyncClient(headers=headers) as http:
        fetched = await http.get(default_image.url)
    assert fetched.status_code == 200 and fetched.content == png_1x1()
