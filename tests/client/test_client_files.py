"""Streamed file downloads and attachments sent through ``ThreadSession`` (spec 11 §11.2.2,
§11.6.2), against the real server."""

from __future__ import annotations

import asyncio
import os
import struct
import zlib

import pytest

from server.conftest import Api
from threadloom.client import AsyncClient, Client, NotFoundError, Upload
from threadloom.client.chat import FileBlock, ImageBlock, Outcome, Phase, TextBlock
from threadloom.client.reduce import LocalSend, ThreadView, empty_view, reduce_all


def png_1x1() -> bytes:
    """A real one-pixel PNG (the server reads image sizes from the header)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


async def test_files_read_stream_yields_the_file_in_pieces(api: Api, client: AsyncClient) -> None:
    thread = (await client.threads.create("echo")).thread_id
    data = os.urandom(300_000)
    await client.files.write(thread, "/big/blob.bin", data, mime_type="application/octet-stream")
    pieces = [p async for p in client.files.read_stream(thread, "/big/blob.bin", chunk_size=65_536)]
    assert len(pieces) > 1 and all(len(p) <= 65_536 for p in pieces)
    assert b"".join(pieces) == data == await client.files.read(thread, "/big/blob.bin")
    with pytest.raises(NotFoundError):
        async for _ in client.files.read_stream(thread, "/big/missing.bin"):
            pass

    def read_sync() -> tuple[bytes, int]:
        with Client(api.base, token=api.keys["alice"]) as sync:
            got = list(sync.files.read_stream(thread, "/big/blob.bin", chunk_size=100_000))
        return b"".join(got), len(got)

    joined, count = await asyncio.to_thread(read_sync)
    assert joined == data and count >= 3


async def test_session_send_with_attachments_shows_them_at_once_then_stored(
    api: Api, client: AsyncClient
) -> None:
    thread = (await client.threads.create("echo")).thread_id
    image = png_1x1()
    uploads = [
        Upload("dot.png", "image/png", image, description="a dot"),
        Upload("notes.txt", "text/plain", b"hello notes"),
    ]
    seen: list[ThreadView] = []
    async with client.session(thread) as session:
        session.subscribe(seen.append)
        sent = await session.send("look", attachments=uploads)

        def stored(view: ThreadView) -> bool:
            mine = view.by_key(sent.key)
            return (
                mine is not None and mine.delivery.outcome is Outcome.SUCCESS and not view.running
            )

        final = await session.wait_for(stored)
    first = seen[0].by_key(sent.key)
    assert first is not None and first.delivery.phase is Phase.SENDING
    assert isinstance(first.content, tuple)
    text, shown, local_file = first.content
    assert text == TextBlock(text="look")
    assert isinstance(shown, ImageBlock) and shown.url.startswith("data:image/png;base64,")
    assert shown.alt == "a dot"
    assert isinstance(local_file, FileBlock) and local_file.attachment is not None
    assert (local_file.attachment.name, local_file.attachment.path) == ("notes.txt", "")
    message = final.by_key(sent.key)
    assert message is not None and message.text == "look"
    assert [a.name for a in message.attachments] == ["dot.png", "notes.txt"]
    assert isinstance(message.content, tuple)
    stored_image = message.content[1]
    assert isinstance(stored_image, ImageBlock)
    # the default attachment_url: the file route of the client's base URL (spec 11 §11.4)
    assert stored_image.url == f"{api.base}/api/threads/{thread}/fs{message.attachments[0].path}"
    notes = message.attachments[1]
    assert notes.path.startswith("/attachments/")
    assert await client.files.read(thread, notes.path) == b"hello notes"
    assert await client.files.read(thread, message.attachments[0].path) == image


def test_a_local_send_shows_its_uploads_before_the_server_has_them() -> None:
    uploads = (Upload("a.png", "image/png", b"\x89PNG"), Upload("b.csv", "text/csv", b"x,y"))
    view = reduce_all(empty_view("t"), [LocalSend("u1", "", attachments=uploads)])
    (message,) = view.messages
    assert message.text == "" and message.delivery.phase is Phase.SENDING
    image, table = message.content
    assert isinstance(image, ImageBlock) and image.url == "data:image/png;base64,iVBORw=="
    assert isinstance(table, FileBlock) and table.attachment is not None
    assert (table.attachment.name, table.attachment.mimeType, table.attachment.size) == (
        "b.csv",
        "text/csv",
        3,
    )
