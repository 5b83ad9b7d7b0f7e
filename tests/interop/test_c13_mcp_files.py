"""Files in MCP tool results (spec 13 §13.4.4, spec 04 §4.5.4): a real MCP server written
with the SDK's server API (``mcp_servers/media.py``) over stdio, a real Runtime on SQLite
and PostgreSQL, the scripted model calling its tools and recording what it was given."""

from __future__ import annotations

import base64
import importlib.util
import sys
from pathlib import Path
from typing import Any

from threadloom import Agent, Definitions, MCPServer, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage

MEDIA = Path(__file__).resolve().parent / "mcp_servers" / "media.py"


def _media() -> Any:
    """The server's module, for the bytes it sends (loaded, not run)."""
    spec = importlib.util.spec_from_file_location("threadloom_tests_mcp_media", MEDIA)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


media = _media()


def calls_then_text(*calls: Call) -> ScriptedProvider:
    def reply(request: ProviderRequest) -> Reply:
        if isinstance(request.messages[-1], ToolMessage):
            return Reply.text("seen")
        return Reply.tool_calls(*calls)

    return ScriptedProvider(reply, max_records=None)


async def one_turn(db_url: str, model: ScriptedProvider) -> tuple[Any, list[Any]]:
    defs = Definitions().add(
        MCPServer(name="media", command=sys.executable, args=(str(MEDIA),)),
        Model(name="m", provider=model, model="scripted"),
        Prompt(name="p", model="m", system="You look at files.", tools=["media"]),
        Agent(name="viewer", side_a=Side(prompt="p"), side_b=Side(label="User")),
    )
    runtime = await Runtime.open(db_url, definitions=defs)
    try:
        state = await runtime.create_thread("viewer")
        await runtime.send_message(state.thread_id, "show me")
        await runtime.wait_idle(state.thread_id, 30)
        page = await state.get_messages(limit=100)
        messages = list(reversed(page.messages))
        files = {
            ref.path: await state.read_file(ref.path)
            for m in messages
            for ref in m.attachments or ()
        }
        return files, messages
    finally:
        await runtime.close()


async def test_c04_134_an_mcp_image_becomes_a_stored_attachment(db_url: str) -> None:
    """C04-134: an MCP tool answering text and an image (the SDK's ``Image``) → the tool
    message's text is the server's text and the attachment line; the PNG is a file of the
    thread with the server's bytes, referenced as ``chart-2.png`` (image/png, 4×3); the
    model's next request carries it as an image part of the tool result."""
    model = calls_then_text(Call("chart", {}))
    files, messages = await one_turn(db_url, model)
    (result,) = [m for m in messages if m.role == "tool"]
    (ref,) = result.attachments
    assert (ref.name, ref.mimeType, ref.size) == ("chart-2.png", "image/png", len(media.CHART))
    assert (ref.width, ref.height) == (4, 3)
    assert files[ref.path] == media.CHART
    assert result.tool_status == "success"
    assert result.content == f'The chart.\n\nAttachment path for "chart-2.png": {ref.path}'
    (sent,) = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    (image,) = sent.images
    assert (image.media_type, base64.b64decode(image.data)) == ("image/png", media.CHART)
    assert messages[-1].content == "seen"


async def test_c04_135_mcp_audio_and_a_blob_resource_are_attachments(db_url: str) -> None:
    """C04-135: audio and an embedded binary resource → two attachments (``recording-2.wav``
    audio/wav, ``report.pdf`` application/pdf) with the server's bytes; the text stays the
    text; no image part reaches the model (neither is an image)."""
    model = calls_then_text(Call("recording", {}))
    files, messages = await one_turn(db_url, model)
    (result,) = [m for m in messages if m.role == "tool"]
    sound, report = result.attachments
    assert (sound.name, sound.mimeType) == ("recording-2.wav", "audio/wav")
    assert (report.name, report.mimeType) == ("report.pdf", "application/pdf")
    assert files[sound.path] == media.WAVE and files[report.path] == media.REPORT
    assert result.content.startswith("The recording.\n\nAttachment path for")
    (sent,) = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert sent.images == []


async def test_c04_136_bad_mcp_files_are_error_results(db_url: str) -> None:
    """C04-136: image data that is not base64 → the error result `MCP server "media": tool
    garbled returned image garbled-2.png not in base64`; an image said to be PNG whose bytes
    are text → the attachment error of §4.5.4; no file is stored; the run goes on."""
    model = calls_then_text(Call("garbled", {}), Call("mislabelled", {}))
    files, messages = await one_turn(db_url, model)
    garbled, mislabelled = [m for m in messages if m.role == "tool"]
    assert garbled.tool_status == "error" and mislabelled.tool_status == "error"
    assert garbled.content == (
        'Failed to execute tool: MCP server "media": tool garbled returned image '
        "garbled-2.png not in base64"
    )
    assert mislabelled.content == (
        'Failed to execute tool: Attachment "mislabelled-1.png" is declared image/png but '
        "its bytes are not image data"
    )
    assert files == {}
    assert messages[-1].content == "seen"
