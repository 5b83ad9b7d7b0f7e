"""Spec 06: how relationships are offered and refused, ``subagents`` and
``subagent_message`` against seeded registry entries.

Fixtures follow §6.15: **PARENT** is the ``make_chat`` agent (side a prompt ``P``),
**WORKER** a ``dual_ai`` agent exposed as a tool with prompts ``WA``/``WB``. Creating
instances from a run and session results are ``test_c06_create.py`` and
``test_c06_delivery.py``.
"""

from __future__ import annotations

from typing import Any

from threadloom import Agent, Side
from threadloom.define import Prompt, Subagent
from threadloom.providers.scripted import Call, Reply
from threadloom.records import SubagentRegistryEntry

WORKER = (
    Prompt(name="WA", model="M", system="You are the worker."),
    Prompt(name="WB", model="M", system="You review the worker."),
    Agent(
        name="worker",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Works on one task",
        max_session_turns=1,
        side_a=Side(prompt="WA"),
        side_b=Side(prompt="WB"),
    ),
)


async def turn(chat: Any, state: Any, text: str) -> None:
    await chat.runtime.send_message(state.thread_id, text)
    await chat.runtime.wait_idle(state.thread_id, timeout=5)


async def seed_child(chat: Any, state: Any, **fields: Any) -> str:
    """A WORKER child of ``state`` with an ``idle`` registry entry (``fields`` override)."""
    child = await chat.runtime.create_thread("worker", parent=state.thread_id)
    entry = {"relationship": "worker", "owner": "a", "name": "worker", "status": "idle"}
    await chat.runtime.store.upsert_registry_entry(
        state.thread_id,
        SubagentRegistryEntry(reference=child.thread_id, **{**entry, **fields}),
    )
    return str(child.thread_id)


async def test_c06_030_resumable_relationship_is_not_directly_callable(make_chat: Any) -> None:
    """C06-030: the model calls a resumable relationship by name → error ``Tool "worker"
    is not directly callable. Use subagent_create …``; no child thread is created, and the
    relationship is not among the tools offered by name."""
    chat = await make_chat(
        [Reply.tool_calls(Call("worker", {"message": "hi"}, id="call_w")), Reply.text("ok")],
        prompt={"tools": ["echo", Subagent("worker")]},
        extra=WORKER,
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)

    offered = [t.name for t in chat.provider.requests[0].tools]
    assert "worker" not in offered and "echo" in offered
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    (result,) = [m for m in page.messages if m.role == "tool"]
    assert result.tool_status == "error"
    assert result.content == (  # error results carry the prefix of spec 04 §4.14.4
        "Failed to execute tool: "
        'Tool "worker" is not directly callable. Use subagent_create with agent="worker" '
        "to create a subagent, or subagent_message to message an existing reference."
    )
    assert await state.get_children() == []
    rows, total = await chat.runtime.store.list_threads()
    assert ([r.id for r in rows], total) == ([state.thread_id], 1)


async def test_non_resumable_relationship_is_offered_by_name(make_chat: Any) -> None:
    """§6.3.4: ``resumable=False`` → offered as a tool named after the relationship with the
    mode suffix and the default ``{message, attachments}`` parameters."""
    chat = await make_chat(
        [Reply.text("ok")],
        prompt={"tools": [Subagent("worker", resumable=False, blocking=True)]},
        extra=WORKER,
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    spec, listing = chat.provider.requests[0].tools
    assert listing.name == "subagents"  # offered because the prompt has a subagent entry
    assert spec.name == "worker"
    assert spec.description == "Works on one task (blocking: waits for the result)"
    assert spec.parameters["required"] == ["message"]
    assert set(spec.parameters["properties"]) == {"message", "attachments"}


async def test_c06_028_subagents_lists_the_registry(make_chat: Any) -> None:
    """C06-028: ``subagents`` on an empty registry → ``No active subagent instances.``; with
    one entry → ``Active subagent instances:\n- <id>: worker "W1" — idle`` … ending
    ``Message one with subagent_message(referenceId, message).``"""
    chat = await make_chat(
        [
            Reply.tool_calls(Call("subagents", {}, id="call_1")),
            Reply.text("none"),
            Reply.tool_calls(Call("subagents", {}, id="call_2")),
            Reply.text("one"),
        ],
        prompt={"tools": ["echo", Subagent("worker")]},
        extra=WORKER,
    )
    state = await chat.thread()
    await turn(chat, state, "list")
    child = await seed_child(chat, state, thread_name="W1", description="Works on one task")
    await turn(chat, state, "list again")

    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    first, second = [m for m in page.messages if m.role == "tool"]
    assert (first.content, first.tool_status) == ("No active subagent instances.", "success")
    assert second.content == (
        "Active subagent instances:\n"
        f'- {child}: worker "W1" — idle (Works on one task)\n'
        "Message one with subagent_message(referenceId, message)."
    )


async def test_subagents_is_offered_when_only_the_registry_has_entries(make_chat: Any) -> None:
    """§6.3.1: a prompt without subagent entries is offered ``subagents`` once the thread's
    registry is not empty (for example after a handoff from the prompt that created them),
    and not before."""
    chat = await make_chat([Reply.text("a"), Reply.text("b")], extra=WORKER)
    state = await chat.thread()
    await turn(chat, state, "one")
    await seed_child(chat, state)
    await turn(chat, state, "two")
    before, after = ([t.name for t in r.tools] for r in chat.provider.requests)
    assert before == ["echo"]
    assert after == ["echo", "subagents"]


def parent_script(*replies: Reply) -> Any:
    """A scripted model shared by parent and child: the worker's prompts get a plain answer,
    the parent's requests take ``replies`` in order (child runs may interleave)."""
    queue = list(replies)

    def reply(request: Any) -> Reply:
        system = request.messages[0].text if request.messages else ""
        if "worker" in system or not queue:
            return Reply.text("working")
        return queue.pop(0)

    return reply


def message_call(reference: str, message: str = "more", **extra: Any) -> Reply:
    args = {"referenceId": reference, "message": message, "attachments": [], **extra}
    return Reply.tool_calls(Call("subagent_message", args, id=f"call_{message.strip() or 'x'}"))


async def tool_results(state: Any) -> list[Any]:
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    return [m for m in page.messages if m.role == "tool"]


async def test_c06_002_c06_024_subagent_message_to_an_idle_child(make_chat: Any) -> None:
    """C06-002: with an ``idle`` resumable instance, ``subagent_message`` is offered.
    C06-024: ``subagent_message {referenceId, message: "more", attachments: []}``,
    non-blocking → ``Message sent to subagent <id>.``; entry ``running``; the child delivers
    "more" as a ``user`` message with ``metadata.forwarded_from.thread_id`` = parent."""
    chat = await make_chat(
        None,
        prompt={"tools": ["echo", Subagent("worker")]},
        extra=WORKER,
    )
    state = await chat.thread()
    child = await seed_child(chat, state, resumable=True)
    chat.provider.reset(parent_script(message_call(child), Reply.text("sent")))
    with chat.runtime.events.subscribe(state.thread_id, kinds=["subagent"]) as sub:
        await turn(chat, state, "tell the worker")
        await chat.runtime.wait_idle(child, timeout=5)
        frames = sub.drain()

    offered = [t.name for t in chat.provider.requests[0].tools]
    assert offered == ["echo", "subagent_create", "subagent_message", "subagents"]
    (result,) = await tool_results(state)
    assert (result.content, result.tool_status) == (f"Message sent to subagent {child}.", "success")
    assert result.subagent_id == child
    # running when the message is sent; idle once the child's session result is derived
    assert [f.data["entry"]["status"] for f in frames] == ["running", "idle"]
    issuing = next(m for m in (await state.get_messages(order="asc")).messages if m.tool_calls)
    child_page = await (await chat.runtime.thread(child)).get_messages(order="asc", limit=None)
    first = child_page.messages[0]
    assert (first.role, first.content) == ("user", "more")
    assert first.metadata is not None
    assert first.metadata["forwarded_from"] == {
        "thread_id": state.thread_id,
        "message_id": issuing.id,
    }


async def test_c06_026_subagent_message_to_a_terminated_child(make_chat: Any) -> None:
    """C06-026: ``subagent_message`` to a terminated child → ``Subagent reference "<id>" is
    not active.``; the entry becomes ``terminated``; nothing is queued in the child."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=WORKER)
    state = await chat.thread()
    child = await seed_child(chat, state, resumable=True)
    await chat.runtime.store.terminate(child)  # behind the registry's back
    chat.provider.reset(parent_script(message_call(child), Reply.text("ok")))
    await turn(chat, state, "tell the worker")
    (result,) = await tool_results(state)
    assert result.tool_status == "error"
    assert result.content == f'Failed to execute tool: Subagent reference "{child}" is not active.'
    (entry,) = await chat.runtime.store.get_registry(state.thread_id)
    assert entry.status == "terminated"
    assert await chat.runtime.store.list_queue(child) == []


async def test_c06_027_subagent_message_argument_checks(make_chat: Any) -> None:
    """C06-027: ``referenceId: ""`` → ``subagent_message requires referenceId and
    message.``; then (§6.3.3 checks 2 and 4) attachments not a list, and a non-resumable
    reference."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=WORKER)
    state = await chat.thread()
    resumable = await seed_child(chat, state, resumable=True)
    one_shot = await seed_child(chat, state, resumable=False)
    chat.provider.reset(
        parent_script(
            message_call(""),
            message_call(resumable, "no list", attachments="x"),
            message_call(one_shot, "one shot"),
            Reply.text("done"),
        )
    )
    await turn(chat, state, "go")
    errors = [m.content for m in await tool_results(state)]
    prefix = "Failed to execute tool: "
    assert errors == [
        prefix + "subagent_message requires referenceId and message.",
        prefix + "subagent_message requires attachments (use [] when none).",
        prefix + f'Subagent reference "{one_shot}" is not resumable.',
    ]
    assert await chat.runtime.store.list_queue(resumable) == []


async def test_subagent_message_copies_attachments_into_the_child(make_chat: Any) -> None:
    """§6.3.3 check 5 and §6.12: a missing path → ``Attachment not found in this thread:
    <path>`` and nothing sent; an existing one arrives in the child as a copy under a new
    ``/attachments/`` path with a new id."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=WORKER)
    state = await chat.thread()
    await state.write_file("/notes/brief.txt", "the brief")
    child = await seed_child(chat, state, resumable=True)
    chat.provider.reset(
        parent_script(
            message_call(child, "missing", attachments=["/nope.txt"]),
            message_call(child, "a folder", attachments=["/notes"]),
            message_call(child, "with file", attachments=["/notes/brief.txt"]),
            Reply.text("done"),
        )
    )
    await turn(chat, state, "go")
    await chat.runtime.wait_idle(child, timeout=5)
    missing, folder, sent = await tool_results(state)
    prefix = "Failed to execute tool: Attachment not found in this thread: "
    assert (missing.content, folder.content) == (prefix + "/nope.txt", prefix + "/notes")
    assert sent.content == f"Message sent to subagent {child}."
    child_state = await chat.runtime.thread(child)
    page = await child_state.get_messages(order="asc", limit=None)
    delivered = page.messages[0]  # the child's later turns follow it
    assert delivered.role == "user"
    assert delivered.content == "with file"
    (ref,) = delivered.attachments or []
    assert ref.path.startswith("/attachments/brief-") and ref.path.endswith(".txt")
    assert await child_state.read_file(ref.path) == b"the brief"
    assert await child_state.stat_file("/notes/brief.txt") is None
