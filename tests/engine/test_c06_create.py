"""Spec 06: creating children from a run and their session results reaching the parent.

Fixtures follow §6.15: **PARENT** is the ``make_chat`` agent (``ai_human``, side a prompt
``P``); **WORKER** a ``dual_ai`` agent exposed as a tool, side a prompt ``WA`` with
``session_stop=done(summary)`` and ``session_fail=give_up``, ``max_session_turns=5``.
One scripted model serves both: requests whose system text names the worker take the
worker's replies, the others the parent's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from threadloom import Agent, Side
from threadloom.define import Immediate, Prompt, SessionBinding, Subagent, hook, tool
from threadloom.providers.scripted import Call, Reply


@tool
def done(summary: str, files: list[str] | None = None) -> str:
    """Finish the task with a summary."""
    return "Done."


@tool
def give_up() -> str:
    """Give up on the task."""
    return "Given up."


class Topic(BaseModel):
    topic: str


def worker(**prompt: Any) -> tuple[Any, ...]:
    return (
        Prompt(
            name="WA",
            model="M",
            system="You are the worker on {{topic}}.",
            tools=["done", "give_up"],
            **prompt,
        ),
        Prompt(name="WB", model="M", system="You review the worker's {{topic}}."),
        Agent(
            name="worker",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Works on one task",
            max_session_turns=5,
            side_a=Side(
                prompt="WA",
                session_stop=SessionBinding(name="done", message_property="summary"),
                session_fail="give_up",
            ),
            side_b=Side(prompt="WB"),
        ),
        done,
        give_up,
    )


WORKER = worker()


class Router:
    """Replies to the parent's and the worker's requests from two scripts."""

    def __init__(self, parent: list[Reply], child: list[Reply]) -> None:
        self.parent, self.child = list(parent), list(child)

    def __call__(self, request: Any) -> Reply:
        system = request.messages[0].text if request.messages else ""
        script = self.child if "worker" in system else self.parent
        return script.pop(0) if script else Reply.text("ok")


def create_call(call_id: str = "call_c", **overrides: Any) -> Call:
    args = {"agent": "worker", "name": "W1", "message": "do it", "attachments": []}
    args.update(overrides)
    return Call("subagent_create", {k: v for k, v in args.items() if v is not None}, id=call_id)


DONE_42 = Reply.tool_calls(Call("done", {"summary": "42"}, id="call_done"))


async def settle(chat: Any, *thread_ids: str, rounds: int = 3) -> None:
    """Wait until the threads are idle, again, as deliveries wake parents."""
    for _ in range(rounds):
        for thread_id in thread_ids:
            await chat.runtime.wait_idle(thread_id, timeout=5)
        await asyncio.sleep(0.01)


async def messages(state: Any) -> list[Any]:
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    return list(page.messages)


async def tool_rows(state: Any) -> list[Any]:
    return [m for m in await messages(state) if m.role == "tool"]


async def only_child(chat: Any, state: Any) -> Any:
    (entry,) = await chat.runtime.store.get_registry(state.thread_id)
    return entry, await chat.runtime.thread(entry.reference)


async def run_parent(chat: Any, parent: list[Reply], child: list[Reply], **options: Any) -> Any:
    chat.provider.reset(Router(parent, child))
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    return state


async def test_c06_001_create_is_offered_for_a_resumable_relationship(make_chat: Any) -> None:
    """C06-001: ``PP`` with a resumable relationship and an empty registry → request 1
    offers ``subagent_create`` (enum ``["worker"]``) and ``subagents``, not
    ``subagent_message``; the description lists the relationship and its mode."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=WORKER)
    await run_parent(chat, [Reply.text("hi")], [])
    tools = {t.name: t for t in chat.provider.requests[0].tools}
    assert list(tools) == ["subagent_create", "subagents"]
    create = tools["subagent_create"]
    assert create.parameters["properties"]["agent"]["enum"] == ["worker"]
    assert create.parameters["required"] == ["agent", "name", "message", "attachments"]
    assert "arguments" not in create.parameters["properties"]
    assert create.description.splitlines()[2] == (
        "- worker: Works on one task (non-blocking: returns a reference at once, the result "
        "arrives later; no arguments)"
    )


async def test_c06_003_c06_004_non_blocking_create_and_implicit_result(make_chat: Any) -> None:
    """C06-003: non-blocking create → ``The subagent was initiated successfully. Reference:
    <id>``, tool message ``subagent_id`` = <id>; the entry and the child thread as
    specified. C06-004: the child's ``done {"summary": "42"}`` → the parent's queue gets a
    silent ``user`` message with the result and ``metadata.subagent_id``; the entry becomes
    ``idle``; a parent run answers; the child holds the hand-off note."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=WORKER)
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call()), Reply.text("started"), Reply.text("got 42")],
        [DONE_42],
    )
    entry, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)

    (result,) = await tool_rows(state)
    assert (
        result.content == f"The subagent was initiated successfully. Reference: {child.thread_id}"
    )
    assert (result.tool_status, result.subagent_id) == ("success", child.thread_id)
    assert (entry.relationship, entry.owner, entry.thread_name) == ("worker", "a", "W1")
    assert (entry.blocking, entry.resumable, entry.parent_communication) == (
        False,
        True,
        "implicit",
    )
    record = await chat.runtime.get_thread_record(child.thread_id)
    assert (record.parent, record.tags, record.agent_id) == (state.thread_id, ["name:W1"], "worker")

    history = await messages(state)
    (delivered,) = [m for m in history if m.subagent_id and m.role == "user"]
    assert delivered.silent
    assert delivered.content == (
        f"Subagent (reference: {child.thread_id}) has returned the following result:\n\n42"
    )
    assert delivered.metadata is not None
    assert delivered.metadata["subagent_id"] == child.thread_id
    assert history[-1].content == "got 42"  # the parent ran on the delivered result
    (entry, _) = await only_child(chat, state)
    assert entry.status == "idle"

    notes = [m for m in await messages(child) if m.role == "system"]
    assert [n.content for n in notes] == ["Result forwarded to the parent thread."]
    assert notes[0].silent
    assert notes[0].metadata is not None
    assert notes[0].metadata["status_kind"] == "subagent_event"
    assert notes[0].metadata["handoff_kind"] == "result"
    assert notes[0].metadata["parent_thread_id"] == state.thread_id


async def test_c06_003_child_instruction_carries_forwarded_from(make_chat: Any) -> None:
    """§6.6.1 step 6: the child's first message is the instruction, role ``user``, with
    ``metadata.forwarded_from`` = the parent's model message that issued the call."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=WORKER)
    state = await run_parent(chat, [Reply.tool_calls(create_call()), Reply.text("ok")], [DONE_42])
    _, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    issuing = next(m for m in await messages(state) if m.tool_calls)
    first = (await messages(child))[0]
    assert (first.role, first.content) == ("user", "do it")
    assert first.metadata is not None
    assert first.metadata["forwarded_from"] == {
        "thread_id": state.thread_id,
        "message_id": issuing.id,
    }


async def test_c06_005_blocking_create_returns_the_result(make_chat: Any) -> None:
    """C06-005: blocking create, the child ends with ``done {"summary": "42"}`` → tool
    result ``42\\n\\nReference: <id>``, success; nothing queued in the parent; entry
    ``idle``."""
    chat = await make_chat(
        None, prompt={"tools": [Subagent("worker", blocking=True)]}, extra=WORKER
    )
    state = await run_parent(chat, [Reply.tool_calls(create_call()), Reply.text("fine")], [DONE_42])
    entry, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    (result,) = await tool_rows(state)
    assert (result.content, result.tool_status) == (
        f"42\n\nReference: {child.thread_id}",
        "success",
    )
    assert not [m for m in await messages(state) if m.role == "user" and m.silent]
    assert entry.status == "idle"
    notes = [m.content for m in await messages(child) if m.role == "system"]
    assert notes == ["Result forwarded to the parent thread."]


async def test_c06_006_blocking_create_failure(make_chat: Any) -> None:
    """C06-006: blocking create, the child calls ``give_up {}`` → tool row error
    ``Failed to execute tool: …\\n\\nReference: <id>``; entry ``failed``."""
    chat = await make_chat(
        None, prompt={"tools": [Subagent("worker", blocking=True)]}, extra=WORKER
    )
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call()), Reply.text("too bad")],
        [Reply.tool_calls(Call("give_up", {}, id="call_g"))],
    )
    entry, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    (result,) = await tool_rows(state)
    assert result.tool_status == "error"
    assert result.content == f"Failed to execute tool: Given up.\n\nReference: {child.thread_id}"
    assert entry.status == "failed"


async def test_c06_007_max_session_turns_without_terminal_tool(make_chat: Any) -> None:
    """C06-007: WORKER reaches ``max_session_turns`` without ``done`` → failure text
    ``Subagent execution stopped before completion (max_session_turns). It did not call a
    terminal session tool (session_stop/session_fail).``"""
    chat = await make_chat(
        None, prompt={"tools": [Subagent("worker", blocking=True)]}, extra=WORKER
    )
    state = await run_parent(chat, [Reply.tool_calls(create_call()), Reply.text("hm")], [])
    entry, child = await only_child(chat, state)
    (result,) = await tool_rows(state)
    assert result.content == (
        "Failed to execute tool: Subagent execution stopped before completion "
        "(max_session_turns). It did not call a terminal session tool "
        f"(session_stop/session_fail).\n\nReference: {child.thread_id}"
    )
    assert entry.status == "failed"


async def test_c06_008_plain_child_succeeds_with_its_last_message(make_chat: Any) -> None:
    """C06-008: a child agent without session bindings ending on ``max_session_turns``
    after side b said "final" → success with the text ``final``."""
    plain = (
        Prompt(name="PA", model="M", system="You are the plain worker."),
        Prompt(name="PB", model="M", system="You check the plain worker."),
        Agent(
            name="plain",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Plain",
            max_session_turns=1,
            side_a=Side(prompt="PA"),
            side_b=Side(prompt="PB"),
        ),
    )
    chat = await make_chat(None, prompt={"tools": [Subagent("plain", blocking=True)]}, extra=plain)
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call(agent="plain")), Reply.text("ok")],
        [Reply.text("draft"), Reply.text("final")],
    )
    (result,) = await tool_rows(state)
    entry, child = await only_child(chat, state)
    assert result.content == f"final\n\nReference: {child.thread_id}"
    assert entry.status == "idle"


async def test_c06_009_explicit_child_queues_nothing(make_chat: Any) -> None:
    """C06-009: ``parent_communication="explicit"``, non-blocking → the child finishes →
    no parent queue entry; entry ``idle``; no hand-off note in the child."""
    chat = await make_chat(
        None,
        prompt={"tools": [Subagent("worker", parent_communication="explicit")]},
        extra=WORKER,
    )
    state = await run_parent(chat, [Reply.tool_calls(create_call()), Reply.text("ok")], [DONE_42])
    _, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    entry, _ = await only_child(chat, state)
    assert entry.status == "idle"
    assert not [m for m in await messages(state) if m.subagent_id and m.role == "user"]
    assert not [m for m in await messages(child) if m.role == "system"]


async def test_c06_014_arguments_reach_both_child_sides(make_chat: Any) -> None:
    """C06-014: create with ``arguments {"topic": "x"}`` for a child whose ``WA`` requires
    ``topic`` → child ``arguments == {"topic": "x"}``; both ``WA`` and ``WB`` render
    ``{{topic}}`` as ``x``; a silent system message ``Arguments for this subagent
    thread:`` exists in the child. The create tool offers ``arguments`` with WA's schema."""
    chat = await make_chat(
        None, prompt={"tools": [Subagent("worker")]}, extra=worker(required_schema=Topic)
    )
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call(arguments={"topic": "x"})), Reply.text("ok")],
        [Reply.text("thinking"), Reply.text("review"), DONE_42],
    )
    _, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    create = next(t for t in chat.provider.requests[0].tools if t.name == "subagent_create")
    assert create.parameters["properties"]["arguments"]["required"] == ["topic"]
    assert "required arguments: topic" in create.description
    assert dict(child.arguments) == {"topic": "x"}
    systems = {r.messages[0].text for r in chat.provider.requests if "worker" in r.messages[0].text}
    assert systems == {"You are the worker on x.", "You review the worker's x."}
    first = (await messages(child))[0]
    assert (first.role, first.silent) == ("system", True)
    assert first.content == 'Arguments for this subagent thread:\n\n{\n  "topic": "x"\n}'
    assert first.metadata is not None
    assert first.metadata["status_kind"] == "subagent_arguments"
    entry, _ = await only_child(chat, state)
    assert entry.initial_arguments == {"topic": "x"}


async def test_c06_015_invalid_arguments_create_nothing(make_chat: Any) -> None:
    """C06-015: create without ``arguments`` where ``topic`` is required → error starting
    ``subagent_create arguments for "worker" failed validation: topic:``; no child."""
    chat = await make_chat(
        None, prompt={"tools": [Subagent("worker")]}, extra=worker(required_schema=Topic)
    )
    state = await run_parent(chat, [Reply.tool_calls(create_call()), Reply.text("ok")], [])
    (result,) = await tool_rows(state)
    assert result.tool_status == "error"
    assert result.content.startswith(
        'Failed to execute tool: subagent_create arguments for "worker" failed validation: topic:'
    )
    assert await chat.runtime.store.get_registry(state.thread_id) == []
    assert (await chat.runtime.list_threads())[1] == 1


async def test_c06_016_c06_017_create_argument_checks(make_chat: Any) -> None:
    """C06-016: missing ``name``, missing ``attachments``, ``arguments: 5`` → their errors.
    C06-017: ``agent: "other"`` → ``Subagent "other" is not available for this prompt. Use
    one of: worker.`` Also check 3 (blank message) and check 1 (agent missing)."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=WORKER)
    calls = [
        create_call("c1", name=None),
        Call("subagent_create", {"agent": "worker", "name": "W", "message": "m"}, id="c2"),
        create_call("c3", arguments=5),
        create_call("c4", agent="other"),
        create_call("c5", message="  "),
        Call("subagent_create", {"name": "W", "message": "m", "attachments": []}, id="c6"),
    ]
    state = await run_parent(chat, [Reply.tool_calls(*calls), Reply.text("ok")], [])
    prefix = "Failed to execute tool: "
    assert [m.content for m in await tool_rows(state)] == [
        prefix + "subagent_create requires name.",
        prefix + "subagent_create requires attachments (use [] when none).",
        prefix + "subagent_create arguments must be an object when provided.",
        prefix + 'Subagent "other" is not available for this prompt. Use one of: worker.',
        prefix + "subagent_create requires message.",
        prefix + "subagent_create requires agent.",
    ]
    assert await chat.runtime.store.get_registry(state.thread_id) == []


async def test_c06_018_instance_limit(make_chat: Any) -> None:
    """C06-018: ``max_instances=1``, non-blocking, a second create while the first exists
    → ``Subagent instance limit reached for "worker" (1). Use subagent_message with an
    existing reference instead. Active references: <id>.``"""
    chat = await make_chat(
        None, prompt={"tools": [Subagent("worker", max_instances=1)]}, extra=WORKER
    )
    state = await run_parent(
        chat,
        [
            Reply.tool_calls(create_call("c1")),
            Reply.tool_calls(create_call("c2", name="W2")),
            Reply.text("ok"),
        ],
        [DONE_42],
    )
    entry, _ = await only_child(chat, state)
    first, second = await tool_rows(state)
    assert first.tool_status == "success"
    assert second.content == (
        'Failed to execute tool: Subagent instance limit reached for "worker" (1). Use '
        "subagent_message with an existing reference instead. Active references: "
        f"{entry.reference}."
    )


async def test_c06_019_blocking_create_continues_the_only_instance(make_chat: Any) -> None:
    """C06-019: ``max_instances=1``, blocking, a second create → the message is routed to the
    existing child; the result ends ``Reference: <same id>``; one child thread exists."""
    chat = await make_chat(
        None,
        prompt={"tools": [Subagent("worker", max_instances=1, blocking=True)]},
        extra=WORKER,
    )
    state = await run_parent(
        chat,
        [
            Reply.tool_calls(create_call("c1")),
            Reply.tool_calls(create_call("c2", name="again", message="once more")),
            Reply.text("ok"),
        ],
        [DONE_42, Reply.tool_calls(Call("done", {"summary": "43"}, id="call_d2"))],
    )
    _, child = await only_child(chat, state)
    first, second = await tool_rows(state)
    assert first.content == f"42\n\nReference: {child.thread_id}"
    assert second.content == f"43\n\nReference: {child.thread_id}"
    assert second.subagent_id == child.thread_id
    assert (await chat.runtime.list_threads())[1] == 2
    assert "once more" in [m.content for m in await messages(child)]


async def test_c06_020_c06_021_attachments_are_copied_or_refused(make_chat: Any) -> None:
    """C06-020: create with an existing attachment → the child's instruction carries one
    attachment at ``/attachments/a-<8 hex>.png`` with identical bytes and a new id.
    C06-021: a missing path → ``Attachment not found in this thread: /missing/x.png``;
    no child created."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=WORKER)
    chat.provider.reset(
        Router(
            [
                Reply.tool_calls(create_call("c1", attachments=["/missing/x.png"])),
                Reply.tool_calls(create_call("c2", attachments=["/attachments/a.png"])),
                Reply.text("ok"),
            ],
            [DONE_42],
        )
    )
    state = await chat.thread()
    await state.write_file("/attachments/a.png", b"\x89PNG-bytes", mime_type="image/png")
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    missing, made = await tool_rows(state)
    assert missing.content == (
        "Failed to execute tool: Attachment not found in this thread: /missing/x.png"
    )
    assert made.tool_status == "success"
    _, child = await only_child(chat, state)
    instruction = (await messages(child))[0]
    (ref,) = instruction.attachments or []
    assert ref.path.startswith("/attachments/a-") and ref.path.endswith(".png")
    assert len(ref.path) == len("/attachments/a-12345678.png")
    assert await child.read_file(ref.path) == b"\x89PNG-bytes"


async def test_c06_025_blocking_subagent_message_waits(make_chat: Any) -> None:
    """C06-025: ``subagent_message`` to a blocking relationship → the result is the child's
    next session result with the reference suffix."""
    chat = await make_chat(
        None, prompt={"tools": [Subagent("worker", blocking=True)]}, extra=WORKER
    )
    chat.provider.reset(
        Router(
            [Reply.tool_calls(create_call("c1")), Reply.text("first")],
            [DONE_42, Reply.tool_calls(Call("done", {"summary": "more done"}, id="call_d2"))],
        )
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    _, child = await only_child(chat, state)
    send = {"referenceId": child.thread_id, "message": "more", "attachments": []}
    chat.provider.reset(
        Router(
            [Reply.tool_calls(Call("subagent_message", send, id="c2")), Reply.text("second")],
            [Reply.tool_calls(Call("done", {"summary": "more done"}, id="call_d2"))],
        )
    )
    await chat.runtime.send_message(state.thread_id, "again")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    _, second = await tool_rows(state)
    assert (second.content, second.tool_status) == (
        f"more done\n\nReference: {child.thread_id}",
        "success",
    )


async def test_c06_029_non_resumable_relationship_is_one_shot(make_chat: Any) -> None:
    """C06-029: ``resumable=False`` → offered as tool ``worker`` (``subagent_create`` is
    not); a call creates a child; after its result is delivered the child is terminated and
    the entry ``terminated``."""
    chat = await make_chat(
        None,
        prompt={"tools": [Subagent("worker", resumable=False, blocking=True)]},
        extra=WORKER,
    )
    call = Call("worker", {"message": "do it", "attachments": []}, id="c1")
    state = await run_parent(chat, [Reply.tool_calls(call), Reply.text("ok")], [DONE_42])
    assert [t.name for t in chat.provider.requests[0].tools] == ["worker", "subagents"]
    entry, child = await only_child(chat, state)
    (result,) = await tool_rows(state)
    assert (result.content, result.subagent_id) == (
        f"42\n\nReference: {child.thread_id}",
        child.thread_id,
    )
    assert entry.status == "terminated"
    assert (entry.resumable, entry.blocking) == (False, True)
    assert (await chat.runtime.get_thread_record(child.thread_id)).terminated is not None
    assert (await messages(child))[0].content == "do it"


async def test_non_blocking_direct_call_is_terminated_after_its_queued_result(
    make_chat: Any,
) -> None:
    """§6.3.4 with a non-blocking one-shot relationship: the call returns the reference at
    once, the result is queued to the parent, then the child is terminated."""
    chat = await make_chat(
        None, prompt={"tools": [Subagent("worker", resumable=False)]}, extra=WORKER
    )
    call = Call("worker", {"message": "do it"}, id="c1")
    state = await run_parent(
        chat, [Reply.tool_calls(call), Reply.text("wait"), Reply.text("got it")], [DONE_42]
    )
    _, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    entry, _ = await only_child(chat, state)
    for _ in range(200):  # the delivery and the termination after it may trail under load
        if entry.status == "terminated":
            break
        await asyncio.sleep(0.05)
        await settle(chat, child.thread_id, state.thread_id, rounds=1)
        entry, _ = await only_child(chat, state)
    assert entry.status == "terminated"
    delivered = [m for m in await messages(state) if m.role == "user" and m.subagent_id]
    assert [m.content.splitlines()[0] for m in delivered] == [
        f"Subagent (reference: {child.thread_id}) has returned the following result:"
    ]


async def test_c06_043_two_creates_share_the_spawn_group(make_chat: Any) -> None:
    """C06-043: two creates in one model response → both entries share ``spawn_group_id``
    = that assistant message's id."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=WORKER)
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call("c1"), create_call("c2", name="W2")), Reply.text("ok")],
        [DONE_42, DONE_42],
    )
    entries = await chat.runtime.store.get_registry(state.thread_id)
    for entry in entries:
        await settle(chat, entry.reference, state.thread_id)
    issuing = next(m for m in await messages(state) if m.tool_calls)
    assert [e.spawn_group_id for e in entries] == [issuing.id, issuing.id]
    assert sorted(e.thread_name or "" for e in entries) == ["W1", "W2"]


async def test_c06_044_after_subagent_created_runs_before_the_first_message(
    make_chat: Any,
) -> None:
    """C06-044: ``after_subagent_created`` runs once per creation, after the child thread
    and its entry exist and before the child's first message."""
    seen: list[tuple[str, str, list[str], int]] = []

    @hook("after_subagent_created", id="watch_children")
    async def watch(state: Any, child: Any) -> None:
        entries = [e.reference for e in await state.get_children()]
        page = await child.get_messages(limit=None, include_silent=True)
        seen.append((state.thread_id, child.thread_id, entries, page.total))

    chat = await make_chat(
        None,
        prompt={"tools": [Subagent("worker")], "hooks": ("watch_children",)},
        extra=(*WORKER, watch),
    )
    chat.provider.reset(Router([Reply.tool_calls(create_call()), Reply.text("ok")], [DONE_42]))
    state = await chat.thread()
    with chat.runtime.events.subscribe(state.thread_id, kinds=["subagent"]) as sub:
        await chat.runtime.send_message(state.thread_id, "go")
        await chat.runtime.wait_idle(state.thread_id, timeout=5)
        _, child = await only_child(chat, state)
        await settle(chat, child.thread_id, state.thread_id)
        frames = sub.drain()
    assert seen == [(state.thread_id, child.thread_id, [child.thread_id], 0)]
    # the hook's registry read reconciles it, but a child still being created is left
    # alone: running until its session result, never idle before it ran
    assert [f.data["entry"]["status"] for f in frames] == ["running", "idle"]


async def test_c06_041_nesting_limit(make_chat: Any) -> None:
    """C06-041: a child agent whose prompt creates itself recursively → the creation at
    depth 9 fails ``Subagent nesting limit reached (8).``"""
    recursive = (
        Prompt(
            name="RA",
            model="M",
            system="You are the recursive worker.",
            tools=[Subagent("deep", blocking=True)],
        ),
        Prompt(name="RB", model="M", system="You watch the recursive worker."),
        Agent(
            name="deep",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Goes deeper",
            max_session_turns=1,
            side_a=Side(prompt="RA"),
            side_b=Side(prompt="RB"),
        ),
    )

    def reply(request: Any) -> Reply:
        system = request.messages[0].text
        if "recursive worker" not in system:
            return Reply.text("ok")
        last = request.messages[-1]
        if last.role == "tool":
            return Reply.text(str(last.text)[:60])
        return Reply.tool_calls(create_call(agent="deep", name="again"))

    chat = await make_chat(
        None, prompt={"tools": [Subagent("deep", blocking=True)]}, extra=recursive
    )
    chat.provider.reset(reply)
    state = await chat.thread()
    chat.provider.reset(
        lambda r: Reply.tool_calls(create_call(agent="deep")) if len(r.messages) == 2 else reply(r)
    )
    await chat.runtime.send_message(state.thread_id, "go")
    await chat.runtime.wait_idle(state.thread_id, timeout=20)
    rows, total = await chat.runtime.store.list_threads(limit=100)
    assert total == 9  # the root and eight levels of children
    deepest = max(rows, key=lambda r: r.created_at_us)
    (error,) = await tool_rows(await chat.runtime.thread(deepest.id))
    assert error.content == "Failed to execute tool: Subagent nesting limit reached (8)."


async def test_c06_038_immediate_spawn_at_turn_start(make_chat: Any) -> None:
    """C06-038: ``immediate=Immediate(message="watch")`` → at the first step of side a's
    turn, before request 1, a child exists with the instruction "watch"; the parent has a
    silent system message ``Subagent "worker" started. Reference: <id>`` whose id is the
    entry's ``spawn_group_id``; a second turn spawns nothing."""
    seen: list[int] = []

    def reply(request: Any) -> Reply:
        system = request.messages[0].text
        if "worker" in system:
            return DONE_42
        seen.append(len(children))
        return Reply.text("hello")

    children: list[Any] = []
    chat = await make_chat(
        None,
        prompt={"tools": [Subagent("worker", immediate=Immediate(message="watch"))]},
        extra=WORKER,
    )
    chat.provider.reset(reply)
    state = await chat.thread()
    with chat.runtime.events.subscribe(state.thread_id, kinds=["subagent"]) as sub:
        sub_task = asyncio.ensure_future(sub.get(timeout=5))
        await chat.runtime.send_message(state.thread_id, "hi")
        children.append(await sub_task)
        await chat.runtime.wait_idle(state.thread_id, timeout=5)
    entry, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    assert seen[0] == 1  # the child existed before the parent's first request
    first = (await messages(child))[0]
    assert (first.role, first.content) == ("user", "watch")
    note = next(m for m in await messages(state) if m.role == "system")
    assert note.silent and note.id == entry.spawn_group_id
    assert note.content == f'Subagent "worker" started. Reference: {child.thread_id}'
    assert note.subagent_id == child.thread_id
    assert note.metadata is not None and note.metadata["subagent_event"] == "spawned"

    await chat.runtime.send_message(state.thread_id, "again")
    await settle(chat, state.thread_id)
    assert len(await chat.runtime.store.get_registry(state.thread_id)) == 1


async def test_immediate_spawn_failure_is_a_log_row(make_chat: Any) -> None:
    """§6.9: a spawn failing validation writes a runtime log row (``tool_execution_error``,
    ``tool:<relationship>``) and the step goes on."""
    chat = await make_chat(
        [Reply.text("hello")],
        prompt={"tools": [Subagent("worker", immediate=True)]},
        extra=worker(required_schema=Topic),
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "hi")
    await chat.runtime.wait_idle(state.thread_id, timeout=5)
    assert (await messages(state))[-1].content == "hello"
    assert await chat.runtime.store.get_registry(state.thread_id) == []
    rows = await chat.runtime.store.list_logs(state.thread_id, limit=None)
    (row,) = [r for r in rows if r.error_type == "tool_execution_error"]
    assert row.error_origin == "tool:worker"
    assert row.error is not None and "topic" in row.error


async def test_relationship_started_by_code(make_chat: Any) -> None:
    """§6.3.4: ``queue_tool("<relationship>", args)`` inside a parent tool creates an
    instance of a resumable relationship like a direct call (message from ``message``);
    the instance is not terminated after its result."""

    @tool
    async def delegate(state: Any) -> str:
        """Hand the work to a worker."""
        await state.queue_tool("worker", {"message": "via code"})
        return "queued"

    chat = await make_chat(
        None, prompt={"tools": [Subagent("worker"), "delegate"]}, extra=(*WORKER, delegate)
    )
    state = await run_parent(
        chat,
        [Reply.tool_calls(Call("delegate", {}, id="c1")), Reply.text("ok"), Reply.text("ok")],
        [DONE_42],
    )
    entry, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    rows = await tool_rows(state)
    assert [m.name for m in rows] == ["delegate", "worker"]
    assert rows[1].content == (
        f"The subagent was initiated successfully. Reference: {child.thread_id}"
    )
    assert (await messages(child))[0].content == "via code"
    entry, _ = await only_child(chat, state)
    assert (entry.resumable, entry.status) == (True, "idle")
    assert (await chat.runtime.get_thread_record(child.thread_id)).terminated is None


async def test_direct_call_arguments_are_validated(make_chat: Any) -> None:
    """§6.3.4: a direct call is validated against the offered parameters with the engine's
    text — the default ``{message, attachments}`` needs ``message``; a child's
    ``required_schema`` is used as is. Nothing is created."""
    chat = await make_chat(
        None,
        prompt={"tools": [Subagent("worker", resumable=False), Subagent("typed", resumable=False)]},
        extra=(
            *WORKER,
            Prompt(name="TA", model="M", system="You are typed.", required_schema=Topic),
            Prompt(name="TB", model="M", system="You check typed."),
            Agent(
                name="typed",
                type="dual_ai",
                expose_as_tool=True,
                tool_description="Typed",
                side_a=Side(prompt="TA"),
                side_b=Side(prompt="TB"),
            ),
        ),
    )
    state = await run_parent(
        chat,
        [
            Reply.tool_calls(
                Call("worker", {"attachments": []}, id="c1"), Call("typed", {}, id="c2")
            ),
            Reply.text("ok"),
        ],
        [],
    )
    assert [m.content for m in await tool_rows(state)] == [
        "Failed to execute tool: Tool argument validation failed: [message] Field required",
        "Failed to execute tool: Tool argument validation failed: [topic] Field required",
    ]
    assert await chat.runtime.store.get_registry(state.thread_id) == []
