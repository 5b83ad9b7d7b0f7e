"""Files returned by tools (spec 04 §4.5.4, §4.14.5; spec 07 §7.6): a real Runtime on
SQLite and PostgreSQL, the scripted model calling plain tools that return ``Attachment``s,
and its recorded requests showing what the model was given."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from threadloom import DROP, Agent, Definitions, Runtime, Side, hook
from threadloom.define import Attachment, Model, Prompt, ToolResult, tool
from threadloom.providers.script import Call
from threadloom.providers.scripted import Reply, ScriptedProvider
from threadloom.providers.types import ProviderRequest, ToolMessage
from threadloom.records import AttachmentRef
from threadloom.testing import png

ATTACHMENT_PATH = re.compile(r"^/attachments/\d{13}-[0-9a-f]{8}\.(png|csv|txt|bin)$")


CHART = png(3, 2)
RETURNED: dict[str, Any] = {}
"""What the tool ``make`` returns, set by each test before its turn."""


@tool
def make(kind: str) -> ToolResult:
    """Make a file."""
    value = RETURNED[kind]
    return value() if callable(value) else value  # type: ignore[no-any-return]


def model_of(*calls: Call) -> ScriptedProvider:
    """Calls ``make`` with each of ``calls``' arguments, then answers ``done``."""

    def reply(request: ProviderRequest) -> Reply:
        if isinstance(request.messages[-1], ToolMessage):
            return Reply.text("done")
        return Reply.tool_calls(*calls)

    return ScriptedProvider(reply, max_records=None)


@pytest.fixture
async def opened(db_url: str) -> AsyncIterator[Callable[..., Any]]:
    runtimes: list[Runtime] = []

    async def open_(provider: ScriptedProvider, *hooks: Any, **options: Any) -> Runtime:
        names = [h.__name__ for h in hooks]
        defs = Definitions().add(
            Model(name="M", provider=provider, model="scripted-1"),
            Prompt(name="P", model="M", system="You make files.", tools=["make"]),
            Agent(name="maker", side_a=Side(prompt="P"), side_b=Side(label="User"), hooks=names),
            make,
            *hooks,
        )
        runtime = await Runtime.open(db_url, definitions=defs, **options)
        runtimes.append(runtime)
        return runtime

    yield open_
    for runtime in runtimes:
        await runtime.close(drain=0)


async def turn(runtime: Runtime) -> tuple[Any, list[Any]]:
    state = await runtime.create_thread("maker")
    await runtime.send_message(state.thread_id, "make it")
    await runtime.wait_idle(state.thread_id, 30)
    page = await state.get_messages(limit=100)
    return state, list(reversed(page.messages))


def tool_rows(messages: list[Any]) -> list[Any]:
    return [m for m in messages if m.role == "tool"]


async def test_c04_130_a_tool_attachment_is_written_and_referenced(
    opened: Callable[..., Any],
) -> None:
    """C04-130: a plain tool returning ``Attachment(data=<PNG>)`` and a CSV → both written
    under /attachments/ with their bytes, the tool message references them (refs with a
    UUID id, name, MIME type, size, the PNG's dimensions) and lists their paths; the
    model's next request carries the PNG as an image part of the tool result."""
    RETURNED["chart"] = ToolResult(
        result="Here is the chart.",
        attachments=[
            Attachment(data=CHART, name="chart.png", mime_type="image/png", description="sales"),
            Attachment(data=b"a,b\n1,2\n", name="data.csv", mime_type="text/csv"),
        ],
    )
    model = model_of(Call("make", {"kind": "chart"}))
    runtime = await opened(model)
    state, messages = await turn(runtime)
    (result,) = tool_rows(messages)
    assert result.tool_status == "success"
    image, table = result.attachments
    assert (image.name, image.mimeType, image.size) == ("chart.png", "image/png", len(CHART))
    assert (image.width, image.height, image.description) == (3, 2, "sales")
    assert (table.name, table.mimeType, table.size) == ("data.csv", "text/csv", 8)
    assert ATTACHMENT_PATH.match(image.path) and image.path.endswith(".png"), image.path
    assert ATTACHMENT_PATH.match(table.path) and table.path.endswith(".csv"), table.path
    assert await state.read_file(image.path) == CHART
    assert await state.read_file(table.path) == b"a,b\n1,2\n"
    assert result.content == (
        "Here is the chart.\n\n"
        f'Attachment path for "chart.png": {image.path}\n'
        f'Attachment path for "data.csv": {table.path}'
    )
    _, second = model.requests
    (sent,) = [m for m in second.messages if isinstance(m, ToolMessage)]
    assert sent.content == result.content
    (part,) = sent.images
    assert (part.media_type, base64.b64decode(part.data)) == ("image/png", CHART)
    assert messages[-1].content == "done"


async def test_c04_131_refs_are_kept_and_order_holds(opened: Callable[..., Any]) -> None:
    """C04-131: a result mixing an ``AttachmentRef`` the tool made with
    ``write_attachment`` and a new ``Attachment`` → the ref kept as given, the new one
    written, in the order returned; a tool returning only text stores no attachments."""

    model = model_of(Call("make", {"kind": "mixed"}), Call("make", {"kind": "text"}))
    runtime = await opened(model)
    state = await runtime.create_thread("maker")
    ref = await state.write_attachment(b"notes", name="notes.txt", mime_type="text/plain")
    RETURNED["mixed"] = ToolResult(
        result="two",
        attachments=[Attachment(data=CHART, name="c.png", mime_type="image/png"), ref],
    )
    RETURNED["text"] = "just text"
    await runtime.send_message(state.thread_id, "go")
    await runtime.wait_idle(state.thread_id, 30)
    page = await state.get_messages(limit=100)
    mixed, text = tool_rows(list(reversed(page.messages)))
    new, kept = mixed.attachments
    assert kept == ref
    assert new.name == "c.png" and await state.read_file(new.path) == CHART
    assert text.attachments is None and text.content == "just text"


@pytest.mark.parametrize(
    ("attachment", "why"),
    [
        (
            Attachment(data=b"x", name="x.bin", mime_type="not a type"),
            "has no valid MIME type ('not a type', expected one such as image/png)",
        ),
        (
            Attachment(data=b"<svg/>", name="x.svg", mime_type="image/svg+xml"),
            "is an image of type image/svg+xml, which models are not given (PNG, JPEG, GIF, WebP)",
        ),
        (
            Attachment(data=b"plain text", name="x.png", mime_type="image/png"),
            "is declared image/png but its bytes are not image data",
        ),
        (
            Attachment(data=CHART, name="x.jpg", mime_type="image/jpeg"),
            "is declared image/jpeg but its bytes are image/png data",
        ),
    ],
    ids=["not-a-mime-type", "svg", "not-an-image", "png-as-jpeg"],
)
async def test_c04_132_bad_attachments_are_an_error_result(
    opened: Callable[..., Any], attachment: Attachment, why: str
) -> None:
    """C04-132: an attachment whose MIME type is not one, an image type models are not
    given, or image bytes that are not of the declared type → the call's result is the
    error naming the attachment and why, then the tool's own text; the good attachment
    before it is not left in the thread's files; the run goes on (the model answers)."""
    RETURNED["bad"] = ToolResult(
        result="made",
        attachments=[Attachment(data=b"ok", name="ok.txt", mime_type="text/plain"), attachment],
    )
    runtime = await opened(model_of(Call("make", {"kind": "bad"})))
    state, messages = await turn(runtime)
    (result,) = tool_rows(messages)
    assert result.tool_status == "error"
    assert result.attachments is None
    assert result.content == (
        f'Failed to execute tool: Attachment "{attachment.name}" {why}\n\nmade'
    )
    assert (await state.get_file_stats("/")).file_count == 0
    assert messages[-1].content == "done"
    assert (await state.status()).state == "idle"


async def test_c04_133_attachments_over_the_file_limits(opened: Callable[..., Any]) -> None:
    """C04-133: ``max_file_size`` 100 → a 101-byte attachment is an error result quoting
    the file system's refusal; ``max_thread_file_bytes`` 150 → of two 100-byte
    attachments the second is refused and the first removed again; the run goes on."""
    RETURNED["big"] = ToolResult(
        attachments=[Attachment(data=b"x" * 101, name="big.txt", mime_type="text/plain")]
    )
    RETURNED["two"] = ToolResult(
        attachments=[
            Attachment(data=b"a" * 100, name="a.txt", mime_type="text/plain"),
            Attachment(data=b"b" * 100, name="b.txt", mime_type="text/plain"),
        ]
    )
    model = model_of(Call("make", {"kind": "big"}), Call("make", {"kind": "two"}))
    runtime = await opened(model, max_file_size=100, max_thread_file_bytes=150)
    state, messages = await turn(runtime)
    big, two = tool_rows(messages)
    assert big.tool_status == "error" and two.tool_status == "error"
    assert re.fullmatch(
        r'Failed to execute tool: Attachment "big\.txt" could not be stored: File exceeds the '
        r"maximum size of 100 bytes: /attachments/\d{13}-[0-9a-f]{8}\.txt",
        big.content,
    ), big.content
    assert two.content.startswith(
        'Failed to execute tool: Attachment "b.txt" could not be stored: '
    ), two.content
    assert (await state.get_file_stats("/")).file_count == 0
    assert messages[-1].content == "done"


async def test_c04_137_hooks_see_the_refs_and_a_dropped_call_leaves_no_file(
    opened: Callable[..., Any],
) -> None:
    """C04-137: the files are written when the call's result is normalised → the
    ``tool_call_done`` and ``after_tool_call_*`` hooks see refs (the success hook for a good
    attachment, the failure hook for a refused one); a call an ``after_tool_call_success``
    hook drops leaves no file; an ``Attachment`` a ``before_store_tool_result`` hook adds is
    written at storage and referenced."""
    seen: list[tuple[str, str, list[str]]] = []

    def kinds(result: ToolResult) -> list[str]:
        return [type(a).__name__ for a in result.attachments]

    @hook("tool_call_done")
    def done(state: Any, call: Any, result: ToolResult) -> None:
        seen.append(("done", result.status, kinds(result)))

    @hook("after_tool_call_success")
    def success(state: Any, call: Any, result: ToolResult) -> Any:
        seen.append(("success", result.status, kinds(result)))
        return DROP if "drop" in call.function.arguments else None

    @hook("after_tool_call_failure")
    def failure(state: Any, call: Any, result: ToolResult) -> None:
        seen.append(("failure", result.status, kinds(result)))

    @hook("before_store_tool_result")
    def add_note(state: Any, call: Any, result: ToolResult) -> Any:
        if "note" not in call.function.arguments:
            return None
        note = Attachment(data=b"noted", name="note.txt", mime_type="text/plain")
        return result.model_copy(update={"attachments": [*result.attachments, note]})

    picture = Attachment(data=CHART, name="c.png", mime_type="image/png")
    RETURNED["good"] = ToolResult(result="good", attachments=[picture])
    RETURNED["drop"] = ToolResult(result="dropped", attachments=[picture])
    RETURNED["bad"] = ToolResult(
        result="bad", attachments=[Attachment(data=b"x", name="x.png", mime_type="image/png")]
    )
    RETURNED["note"] = "plain"
    model = model_of(
        Call("make", {"kind": "good"}),
        Call("make", {"kind": "drop"}),
        Call("make", {"kind": "bad"}),
        Call("make", {"kind": "note"}),
    )
    runtime = await opened(model, done, success, failure, add_note)
    state, messages = await turn(runtime)
    assert sorted(seen) == sorted(  # the calls run together: any order
        [
            ("done", "success", ["AttachmentRef"]),
            ("success", "success", ["AttachmentRef"]),
            ("done", "success", ["AttachmentRef"]),
            ("success", "success", ["AttachmentRef"]),
            ("done", "error", []),
            ("failure", "error", []),
            ("done", "success", []),
            ("success", "success", []),
        ]
    )
    good, bad, noted = tool_rows(messages)
    assert good.content.startswith("good") and bad.tool_status == "error"
    (note,) = noted.attachments
    assert isinstance(note, AttachmentRef) and note.name == "note.txt"
    assert await state.read_file(note.path) == b"noted"
    (kept,) = good.attachments
    listing = await state.readdir_file("/attachments")
    assert sorted(e.path for e in listing.entries) == sorted([kept.path, note.path])
