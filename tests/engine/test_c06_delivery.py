"""Spec 06 §6.5, §6.7, §6.8, §6.10, §6.11: session results, labels and notifications
reaching the parent, termination both ways, and a child run lost in a crash.

Fixtures as in ``test_c06_create.py`` (PARENT ``chat``; WORKER ``dual_ai`` with
``done``/``give_up`` session bindings), on the real SQLite store and the scripted model.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from test_c06_create import (
    DONE_42,
    Router,
    create_call,
    messages,
    only_child,
    run_parent,
    settle,
    tool_rows,
    worker,
)

from pg_support import NODE_TTL_S
from threadloom import Agent, Side, ThreadState
from threadloom.define import Prompt, SessionBinding, Subagent, tool
from threadloom.providers.scripted import Call, Reply
from threadloom.records import QueueEntry, SubagentRegistryEntry, ThreadStatus
from threadloom.store import open_store
from threadloom.store.base import NewThread, ParentDelivery

CHILD = Path(__file__).with_name("crash_child.py")

LABELS: list[Any] = []


@tool
async def report(state: ThreadState) -> str:
    """Tell the parent how far the work is."""
    await state.notify_parent("50%")
    return "reported"


@tool
async def halfway(state: ThreadState) -> str:
    """Label this instance in the parent's registry."""
    await state.set_status("halfway")
    parent = await state.get_parent_thread()
    assert parent is not None
    page = await parent.get_messages(limit=None, include_silent=True)
    LABELS.extend(m.subagent_status for m in page.messages if m.role == "tool")
    return "labelled"


@tool
def progress(text: str) -> str:
    """Report progress."""
    return "noted"


def worker_with(*names: str, **side: Any) -> tuple[Any, ...]:
    """WORKER whose side a prompt also lists ``names``."""
    base = worker()
    wa = base[0].model_copy(update={"tools": (*base[0].tools, *names)})
    agent = base[2]
    if side:
        agent = agent.model_copy(update={"side_a": agent.side_a.model_copy(update=side)})
    return (wa, base[1], agent, *base[3:])


async def until(predicate: Any, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            value = predicate()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return
            await asyncio.sleep(0.005)


def worker_requested(chat: Any, n: int = 1) -> Any:
    return lambda: sum("worker" in r.messages[0].text for r in chat.provider.requests) >= n


async def delivered(state: Any) -> list[Any]:
    """The parent's messages that carry a child's result or notification."""
    return [m for m in await messages(state) if m.subagent_id and m.role in ("user", "assistant")]


# -- §6.10 termination -------------------------------------------------------------------


async def test_c06_034_terminating_a_running_child_reports_a_failure(make_chat: Any) -> None:
    """C06-034: terminate the child while it runs (non-blocking, implicit) → entry
    ``terminated``; the parent's queue gets ``Subagent (reference: <id>) has reported a
    failure:\\n\\nSubagent was terminated.``"""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=worker())
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call()), Reply.text("started"), Reply.text("noted")],
        [Reply.text("never", delay=30)],
    )
    _, child = await only_child(chat, state)
    await until(worker_requested(chat))
    await child.terminate()
    await settle(chat, child.thread_id, state.thread_id)
    entry, _ = await only_child(chat, state)
    assert entry.status == "terminated"
    (failure,) = await delivered(state)
    assert failure.silent and failure.role == "user"
    assert failure.content == (
        f"Subagent (reference: {child.thread_id}) has reported a failure:\n\n"
        "Subagent was terminated."
    )
    assert (await child.status()).reason == "terminated"


async def test_terminating_an_idle_child_delivers_nothing(make_chat: Any) -> None:
    """§6.10: a child terminated while idle delivers nothing; its entry is ``terminated``."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=worker())
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call()), Reply.text("started"), Reply.text("got it")],
        [DONE_42],
    )
    _, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    await child.terminate()
    await settle(chat, child.thread_id, state.thread_id)
    entry, _ = await only_child(chat, state)
    assert entry.status == "terminated"
    assert [m.content.split(":")[0] for m in await delivered(state)] == [
        "Subagent (reference"  # only the result, no failure
    ]


async def test_c06_035_terminated_parent_gets_nothing(make_chat: Any) -> None:
    """C06-035: terminate the parent (no cascade) while a non-blocking child runs → the
    child finishes; nothing is queued into the parent; the entry becomes ``idle``."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=worker())
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call()), Reply.text("started")],
        [Reply.tool_calls(Call("done", {"summary": "late"}, id="call_d"), delay=0.3)],
    )
    _, child = await only_child(chat, state)
    await state.terminate()
    await settle(chat, child.thread_id, state.thread_id)
    entry, _ = await only_child(chat, state)
    assert entry.status == "idle"
    assert (await child.status()).state == "idle"
    assert await chat.runtime.store.list_queue(state.thread_id) == []
    assert await delivered(state) == []
    # the child keeps no hand-off note: nothing reached the parent
    assert not [m for m in await messages(child) if m.role == "system"]


# -- §6.8.3 owning side, §6.7 notify_parent, §6.13 projection --------------------------------


async def test_c06_013_side_b_owner_gets_an_assistant_message(make_chat: Any) -> None:
    """C06-013: a dual parent whose side b prompt owns the relationship → the child's
    result is queued with role ``assistant``; the parent's next run acts on side b."""
    lead = (
        Prompt(name="LA", model="M", system="You are the lead's side a."),
        Prompt(
            name="LB", model="M", system="You are the lead's side b.", tools=[Subagent("worker")]
        ),
        Agent(
            name="lead",
            type="dual_ai",
            max_session_turns=1,
            side_a=Side(prompt="LA"),
            side_b=Side(prompt="LB"),
        ),
    )
    chat = await make_chat(None, extra=(*worker(), *lead))
    parent_replies = {
        "LA": [Reply.text("a speaks"), Reply.text("a again")],
        "LB": [Reply.tool_calls(create_call()), Reply.text("b waits"), Reply.text("b got it")],
    }
    order: list[str] = []
    parent: list[str] = []

    async def reply(request: Any) -> Reply:
        system = request.messages[0].text
        if "worker" in system:
            # the child answers once the lead's first run has ended, so that its result
            # starts the lead's next run; had it come while that run still went on, the
            # run's next step would deliver it and then end at the session cap of one
            # turn a side without a model request (spec 04 §4.9.2 steps 2 and 5)
            await chat.runtime.wait_idle(parent[0], timeout=10)
            return DONE_42
        side = "LA" if "side a" in system else "LB"
        order.append(side)
        script = parent_replies[side]
        return script.pop(0) if script else Reply.text("more")

    chat.provider.reset(reply)
    state = await chat.runtime.create_thread("lead")
    parent.append(state.thread_id)
    await chat.runtime.send_message(state.thread_id, "go")
    entry: Any = None
    await until(lambda: chat.runtime.store.get_registry(state.thread_id))
    (entry,) = await chat.runtime.store.get_registry(state.thread_id)
    await settle(chat, entry.reference, state.thread_id)
    assert entry.owner == "b"
    (result,) = await delivered(state)
    assert (result.role, result.silent) == ("assistant", True)
    assert order[:3] == ["LA", "LB", "LB"]
    await until(lambda: len(order) > 3)  # the run the delivery starts calls the model
    assert order[3] == "LB"  # the delivered result makes side b act first


async def test_c06_010_explicit_child_notifies_its_parent(make_chat: Any) -> None:
    """C06-010: an explicit child's tool calls ``notify_parent("50%")`` → parent queue
    entry ``{role: user, silent, metadata.subagent_id: child, forwarded_from.thread_id:
    child}``; the child's tool result has ``parent_notification`` metadata; the session
    result itself is not queued (explicit)."""
    chat = await make_chat(
        None,
        prompt={"tools": [Subagent("worker", parent_communication="explicit")]},
        extra=(*worker_with("report"), report),
    )
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call()), Reply.text("started"), Reply.text("heard")],
        [Reply.tool_calls(Call("report", {}, id="call_r")), DONE_42],
    )
    _, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    (note,) = await delivered(state)
    assert (note.role, note.silent, note.content) == ("user", True, "50%")
    assert note.metadata is not None
    assert note.metadata["subagent_id"] == child.thread_id
    assert note.metadata["forwarded_from"]["thread_id"] == child.thread_id
    reported = next(m for m in await tool_rows(child) if m.name == "report")
    assert reported.metadata is not None
    assert reported.metadata["parent_notification"] is True
    assert reported.metadata["parent_notification_content"] == "50%"


async def test_c06_042_projected_subagent_fields(make_chat: Any) -> None:
    """C06-042: messages with ``subagent_id`` carry the projected relationship, name,
    title, thread name, blocking flag and spawn group (= the parent's assistant message
    id); messages without ``subagent_id`` carry none of these keys on the wire."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=worker())
    state = await run_parent(
        chat, [Reply.tool_calls(create_call()), Reply.text("ok"), Reply.text("ok")], [DONE_42]
    )
    _, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    history = await messages(state)
    issuing = next(m for m in history if m.tool_calls)
    (result,) = [m for m in history if m.role == "tool"]
    wire = result.to_wire()
    assert wire["subagent_id"] == child.thread_id
    assert (wire["subagent_relationship"], wire["subagent_name"], wire["subagent_title"]) == (
        "worker",
        "worker",
        "worker",
    )
    assert (wire["subagent_thread_name"], wire["subagent_blocking"]) == ("W1", False)
    assert wire["subagent_spawn_group_id"] == issuing.id
    assert wire["subagent_status"] == "idle"
    plain = history[0].to_wire()
    assert plain["subagent_id"] is None
    assert not [k for k in plain if k.startswith("subagent_") and k != "subagent_id"]


# -- §6.5 labels ---------------------------------------------------------------------------


async def test_c06_031_set_status_label_then_idle(make_chat: Any) -> None:
    """C06-031: the child calls ``set_status("halfway")`` → the parent's entry status is
    ``halfway`` and the create tool message's ``subagent_status`` reads ``halfway``; the
    next session result sets ``idle``."""
    LABELS.clear()
    chat = await make_chat(
        None,
        prompt={"tools": [Subagent("worker")]},
        extra=(*worker_with("halfway"), halfway),
    )
    state = await chat.thread()
    chat.provider.reset(
        Router(
            [Reply.tool_calls(create_call()), Reply.text("ok"), Reply.text("ok")],
            [Reply.tool_calls(Call("halfway", {}, id="call_h")), DONE_42],
        )
    )
    with chat.runtime.events.subscribe(state.thread_id, kinds=["subagent"]) as sub:
        await chat.runtime.send_message(state.thread_id, "go")
        await until(lambda: chat.runtime.store.get_registry(state.thread_id))
        _, child = await only_child(chat, state)
        await settle(chat, child.thread_id, state.thread_id)
        frames = sub.drain()
    assert [f.data["entry"]["status"] for f in frames] == ["running", "halfway", "idle"]
    assert LABELS == ["halfway"]


async def test_c06_033_session_status_binding_labels_the_entry(make_chat: Any) -> None:
    """C06-033: WORKER side a ``session_status=progress(text)``; ``progress {"text":
    "step 2"}`` succeeds → the parent's entry status ``step 2``."""
    chat = await make_chat(
        None,
        prompt={"tools": [Subagent("worker")]},
        extra=(
            *worker_with(
                "progress",
                session_status=SessionBinding(name="progress", message_property="text"),
            ),
            progress,
        ),
    )
    state = await chat.thread()
    chat.provider.reset(
        Router(
            [Reply.tool_calls(create_call()), Reply.text("ok"), Reply.text("ok")],
            [Reply.tool_calls(Call("progress", {"text": " step 2 "}, id="call_p")), DONE_42],
        )
    )
    with chat.runtime.events.subscribe(state.thread_id, kinds=["subagent"]) as sub:
        await chat.runtime.send_message(state.thread_id, "go")
        await until(lambda: chat.runtime.store.get_registry(state.thread_id))
        _, child = await only_child(chat, state)
        await settle(chat, child.thread_id, state.thread_id)
        frames = sub.drain()
    assert [f.data["entry"]["status"] for f in frames] == ["running", "step 2", "idle"]
    (progressed,) = [m for m in await tool_rows(child) if m.name == "progress"]
    assert progressed.content == " step 2 "  # the stored text is the argument as given


# -- §6.8.5 files returned by session tools ------------------------------------------------


FILES_WORKER = worker_with(
    session_stop=SessionBinding(
        name="done", message_property="summary", attachments_property="files"
    )
)


async def test_c06_022_result_attachments_are_copied_to_the_parent(make_chat: Any) -> None:
    """C06-022: ``done {"summary": "s", "files": ["/attachments/r.txt"]}`` (existing) →
    the parent's message ends ``The subagent also returned the following attachment:\\n\\n
    /attachments/r-<8 hex>.txt``; the file exists in the parent with the same bytes."""

    @tool
    async def write_report(state: ThreadState) -> str:
        """Write the report file."""
        await state.write_file("/attachments/r.txt", "the report")
        return "written"

    base = worker_with("write_report", **{"session_stop": FILES_WORKER[2].side_a.session_stop})
    chat = await make_chat(
        None, prompt={"tools": [Subagent("worker")]}, extra=(*base, write_report)
    )
    done_call = Call("done", {"summary": "s", "files": ["/attachments/r.txt"]}, id="call_d")
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call()), Reply.text("ok"), Reply.text("thanks")],
        [Reply.tool_calls(Call("write_report", {}, id="call_w")), Reply.tool_calls(done_call)],
    )
    _, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    (result,) = await delivered(state)
    head, path = result.content.rsplit("\n\n", 1)
    assert head.endswith("s\n\nThe subagent also returned the following attachment:")
    assert path.startswith("/attachments/r-") and path.endswith(".txt")
    assert len(path) == len("/attachments/r-12345678.txt")
    assert await state.read_file(path) == b"the report"
    assert [a.path for a in result.attachments or []] == [path]


async def test_c06_023_missing_result_file_keeps_the_session_going(make_chat: Any) -> None:
    """C06-023: ``files: ["/nope"]`` → the ``done`` call becomes an error ``Provided
    attachment path(s) not found in this thread: /nope. …``; the session does not end."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=FILES_WORKER)
    bad = Call("done", {"summary": "s", "files": ["/nope"]}, id="call_bad")
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call()), Reply.text("ok"), Reply.text("thanks")],
        [Reply.tool_calls(bad), Reply.tool_calls(Call("done", {"summary": "ok"}, id="call_ok"))],
    )
    _, child = await only_child(chat, state)
    await settle(chat, child.thread_id, state.thread_id)
    first, second = [m for m in await tool_rows(child) if m.name == "done"]
    assert first.tool_status == "error"
    assert first.content == (
        "Failed to execute tool: Provided attachment path(s) not found in this thread: /nope. "
        "Use the exact path of an existing file in this thread."
    )
    assert (second.tool_status, second.content) == ("success", "ok")
    (result,) = await delivered(state)
    assert result.content.endswith("has returned the following result:\n\nok")


# -- the case: many children, many messages -----------------------------------------


async def test_three_children_each_deliver_once_while_users_keep_writing(make_chat: Any) -> None:
    """A parent with three non-blocking children receives all three completions, each
    exactly once, as silent messages, while new user messages keep arriving."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=worker())
    creates = [create_call(f"c{i}", name=f"W{i}", message=f"task {i}") for i in (1, 2, 3)]
    finishes = [
        Reply.tool_calls(Call("done", {"summary": f"r{i}"}, id=f"call_d{i}"), delay=0.02 * i)
        for i in (1, 2, 3)
    ]
    chat.provider.reset(Router([Reply.tool_calls(*creates)], finishes))
    state = await chat.thread()
    sent = [await chat.runtime.send_message(state.thread_id, "start three")]
    for i in range(12):
        await asyncio.sleep(0.01)
        sent.append(await chat.runtime.send_message(state.thread_id, f"user {i}"))
    entries = await chat.runtime.store.get_registry(state.thread_id)
    assert len(entries) == 3
    await settle(chat, *(e.reference for e in entries), state.thread_id, rounds=5)

    history = await messages(state)
    results = [m for m in history if m.subagent_id and m.role == "user"]
    assert all(m.silent for m in results)
    # the scripted worker replies go to whichever child asks first: match by set
    assert sorted(m.content.rsplit("\n\n", 1)[1] for m in results) == ["r1", "r2", "r3"]
    assert sorted(m.subagent_id for m in results) == sorted(e.reference for e in entries)
    assert len({m.subagent_id for m in results}) == 3  # each child exactly once
    users = [m.content for m in history if m.role == "user" and not m.silent]
    assert users == [m.content for m in sent]  # every user message delivered, in order
    assert {e.status for e in await chat.runtime.store.get_registry(state.thread_id)} == {"idle"}
    assert await chat.runtime.store.list_queue(state.thread_id) == []


# -- §6.8.3 one transaction ----------------------------------------------------------------


async def test_c06_045_delivery_commits_with_the_child_run_end_or_not_at_all(
    tmp_path: Path,
) -> None:
    """C06-045: the child's status, the registry update and the parent's queue entry
    appear together or not at all. A fault inside the transaction (the parent's queue
    entry collides with an existing id) leaves all three as they were; the same delivery
    without the fault commits all three."""
    store = await open_store(f"sqlite:///{tmp_path / 't.db'}")
    try:
        await store.create_thread(NewThread(id="parent", agent_id="chat"))
        await store.create_child(
            NewThread(id="child", agent_id="worker", parent_id="parent"),
            SubagentRegistryEntry(
                reference="child", relationship="worker", name="worker", resumable=True
            ),
        )
        await store.set_status("child", ThreadStatus(state="running", since=1, reason=None))

        def entry(entry_id: str) -> QueueEntry:
            return QueueEntry(
                id=entry_id,
                role="user",
                content="Subagent (reference: child) has returned the following result:\n\n42",
                silent=True,
                metadata={"subagent_id": "child"},
                source="subagent",
                created_at=0,
            )

        await store.enqueue("parent", entry("taken"), clear_stop=False)
        faulty = ParentDelivery("parent", "child", "idle", entry("taken"))
        try:
            await store.end_run("child", "session_stop", (1, 1), True, faulty)
        except Exception:
            pass
        else:
            raise AssertionError("the colliding queue entry must fail the transaction")
        child = await store.get_thread("child")
        assert child is not None and child.status.state == "running"
        (registered,) = await store.get_registry("parent")
        assert registered.status == "running"
        assert [e.id for e in await store.list_queue("parent")] == ["taken"]

        settled, events = await store.end_run(
            "child",
            "session_stop",
            (1, 1),
            True,
            ParentDelivery("parent", "child", "idle", entry("new")),
        )
        assert settled
        assert [(e.thread_id, e.kind) for e in events] == [
            ("child", "status"),
            ("parent", "subagent"),
            ("parent", "message"),
        ]
        child = await store.get_thread("child")
        assert child is not None and child.status.state == "idle"
        (registered,) = await store.get_registry("parent")
        assert registered.status == "idle"
        assert [e.id for e in await store.list_queue("parent")] == ["taken", "new"]
    finally:
        await store.close()


# -- §6.11 a child run lost in a crash -------------------------------------------------------


async def crash(db_url: str, *args: str) -> dict[str, Any]:
    """Run ``crash_child.py subagent`` until READY, then SIGKILL it; the READY data."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        db_url,
        "subagent",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(20):
            while True:
                line = (await proc.stdout.readline()).decode()
                assert line, "the crash child ended before READY"
                if line.startswith("READY "):
                    ready: dict[str, Any] = json.loads(line[len("READY ") :])
                    break
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    if db_url.startswith("postgresql://"):  # until the killed node is dead (TTL)
        await asyncio.sleep(NODE_TTL_S + 0.3)
    return ready


async def test_c06_039_lost_child_run_is_reported_to_the_parent(
    make_chat: Any, db_url: str
) -> None:
    """C06-039: kill the process while a non-blocking child runs, restart → the child's
    status ``failed``/``execution_lost``; entry ``failed``; the parent gets the failure
    ``Subagent execution was lost when the runtime restarted.`` (implicit)."""
    ready = await crash(db_url)
    parent_id, child_id = ready["thread_id"], ready["child_id"]

    chat = await make_chat(
        [Reply.text("noted")], prompt={"tools": [Subagent("worker")]}, extra=worker()
    )
    child = await chat.runtime.thread(child_id)
    parent = await chat.runtime.thread(parent_id)
    await settle(chat, child_id, parent_id)
    status = await child.status()
    assert (status.state, status.reason) == ("failed", "execution_lost")
    (entry,) = await chat.runtime.store.get_registry(parent_id)
    assert entry.status == "failed"
    (failure,) = await delivered(parent)
    assert failure.silent
    assert failure.content == (
        f"Subagent (reference: {child_id}) has reported a failure:\n\n"
        "Subagent execution was lost when the runtime restarted."
    )
    assert (await messages(parent))[-1].content == "noted"  # the parent ran on it


async def test_blocking_result_is_queued_when_the_waiting_call_is_gone(make_chat: Any) -> None:
    """§6.8.2: the parent's run is stopped while its blocking create waits → the child's
    result is delivered as if non-blocking: queued into the (stopped) parent."""
    chat = await make_chat(
        None, prompt={"tools": [Subagent("worker", blocking=True)]}, extra=worker()
    )
    chat.provider.reset(
        Router(
            [Reply.tool_calls(create_call())],
            [Reply.tool_calls(Call("done", {"summary": "42"}, id="call_d"), delay=0.3)],
        )
    )
    state = await chat.thread()
    await chat.runtime.send_message(state.thread_id, "go")
    await until(worker_requested(chat))
    await chat.runtime.stop(state.thread_id)
    (entry,) = await chat.runtime.store.get_registry(state.thread_id)
    await settle(chat, entry.reference, state.thread_id)
    (waiting,) = await chat.runtime.store.list_queue(state.thread_id)
    assert waiting.silent and waiting.source == "subagent"
    assert waiting.content == (
        f"Subagent (reference: {entry.reference}) has returned the following result:\n\n42"
    )
    (stopped,) = await tool_rows(state)
    assert stopped.content == "Execution stopped by user"


async def test_max_subagent_depth_option(make_chat: Any, tmp_path: Path) -> None:
    """§6.1: ``Runtime.open(url, max_subagent_depth=1)`` reaches the engine's options
    (C06-041 checks the limit itself at the default 8). Its own file: the chat's runtime
    holds the other one (one process runs a file's threads)."""
    from threadloom import Runtime

    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=worker())
    url = f"sqlite:///{tmp_path / 'depth.db'}"
    runtime = await Runtime.open(url, definitions=chat.runtime.definitions, max_subagent_depth=1)
    try:
        assert runtime.runs.options.max_subagent_depth == 1
    finally:
        await runtime.close(drain=0)


async def test_lost_parent_waiting_on_a_lost_blocking_child(make_chat: Any, db_url: str) -> None:
    """§6.11: the process dies while the parent's blocking create waits on a running child;
    at restart both runs settle ``failed``/``execution_lost``, the parent's open call gets
    the execution-lost result, and the child's failure arrives queued (the waiting call is
    gone); the parent then runs on it."""
    ready = await crash(db_url, "blocking")
    parent_id, child_id = ready["thread_id"], ready["child_id"]
    chat = await make_chat(
        [Reply.text("noted")],
        prompt={"tools": [Subagent("worker", blocking=True)]},
        extra=worker(),
    )
    parent = await chat.runtime.thread(parent_id)
    child = await chat.runtime.thread(child_id)
    await settle(chat, child_id, parent_id)
    assert (await child.status()).reason == "execution_lost"
    (lost_call,) = await tool_rows(parent)
    assert lost_call.content.startswith("Execution lost")
    (failure,) = await delivered(parent)
    assert failure.content.endswith("Subagent execution was lost when the runtime restarted.")
    assert (await messages(parent))[-1].content == "noted"
    assert (await parent.status()).state == "idle"


async def test_runtime_terminate_cascades_only_when_asked(make_chat: Any) -> None:
    """§6.10 (the Python side of spec 08 §8.5.3): ``terminate()`` on the parent leaves its
    running child live; ``Runtime.terminate(child's parent, cascade=True)`` terminates
    every descendant too, and a running child's run ends ``terminated``."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=worker())
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call()), Reply.text("started")],
        [Reply.text("never", delay=30)],
    )
    _, child = await only_child(chat, state)
    await until(worker_requested(chat))
    await chat.runtime.terminate(state.thread_id)
    assert (await chat.runtime.get_thread_record(child.thread_id)).terminated is None
    assert chat.runtime.running(child.thread_id)

    await chat.runtime.terminate(state.thread_id, cascade=True)
    await settle(chat, child.thread_id)
    assert (await chat.runtime.get_thread_record(child.thread_id)).terminated is not None
    assert (await child.status()).reason == "terminated"
    entry, _ = await only_child(chat, state)
    assert entry.status == "terminated"
    assert await chat.runtime.store.list_queue(state.thread_id) == []  # parent terminated


# -- §6.8.1 the other derivation rules -----------------------------------------------------


@tool
async def wrap_up(state: ThreadState) -> str:
    """End the session from code."""
    await state.stop_session("all set")
    return "stopping"


PLAIN = (
    Prompt(name="PA", model="M", system="You are the plain worker.", tools=["wrap_up"]),
    Prompt(name="PB", model="M", system="You check the plain worker."),
    Agent(
        name="plain",
        type="dual_ai",
        expose_as_tool=True,
        tool_description="Plain",
        max_session_turns=3,
        side_a=Side(prompt="PA"),
        side_b=Side(prompt="PB"),
    ),
    wrap_up,
)


async def test_state_stop_session_result(make_chat: Any) -> None:
    """§6.8.1 rule 2: the child's ``stop_session("all set")`` → success with that text."""
    chat = await make_chat(None, prompt={"tools": [Subagent("plain", blocking=True)]}, extra=PLAIN)
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call(agent="plain")), Reply.text("ok")],
        [Reply.tool_calls(Call("wrap_up", {}, id="call_w"))],
    )
    _, child = await only_child(chat, state)
    (result,) = await tool_rows(state)
    assert (result.content, result.tool_status) == (
        f"all set\n\nReference: {child.thread_id}",
        "success",
    )


async def test_step_error_result(make_chat: Any) -> None:
    """§6.8.1 rule 9: a child without session bindings whose run ends ``step_error`` →
    failure ``Subagent execution failed (step_error).``; the entry ``failed``."""
    from threadloom.providers.script import Fail

    chat = await make_chat(None, prompt={"tools": [Subagent("plain", blocking=True)]}, extra=PLAIN)
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call(agent="plain")), Reply.text("ok")],
        [Fail("broken", code="invalid_request", retryable=False)] * 5,
    )
    entry, child = await only_child(chat, state)
    (result,) = await tool_rows(state)
    assert result.content == (
        "Failed to execute tool: Subagent execution failed (step_error)."
        f"\n\nReference: {child.thread_id}"
    )
    assert entry.status == "failed"


async def test_stopped_child_result(make_chat: Any) -> None:
    """§6.8.1 rule 5: stopping a running child → failure ``Subagent execution was stopped
    by user.`` queued for the parent (implicit); the entry ``failed``."""
    chat = await make_chat(None, prompt={"tools": [Subagent("worker")]}, extra=worker())
    state = await run_parent(
        chat,
        [Reply.tool_calls(create_call()), Reply.text("started"), Reply.text("noted")],
        [Reply.text("never", delay=30)],
    )
    _, child = await only_child(chat, state)
    await until(worker_requested(chat))
    await chat.runtime.stop(child.thread_id)
    await settle(chat, child.thread_id, state.thread_id)
    (failure,) = await delivered(state)
    assert failure.content.endswith(":\n\nSubagent execution was stopped by user.")
    entry, _ = await only_child(chat, state)
    assert entry.status == "failed"


async def test_delivery_to_a_terminated_or_missing_parent(tmp_path: Path) -> None:
    """§6.8.3 in the store: a terminated parent gets no queue entry, its registry entry is
    still updated (with a settlement, ``settle_run``); a parent that no longer exists gets
    nothing and the child's settlement still commits."""
    from threadloom.store.base import LOST_RUN

    store = await open_store(f"sqlite:///{tmp_path / 't.db'}")
    try:
        await store.create_thread(NewThread(id="parent", agent_id="chat"))
        for child in ("c1", "c2"):
            await store.create_child(
                NewThread(id=child, agent_id="worker", parent_id="parent"),
                SubagentRegistryEntry(reference=child, relationship="worker", name="worker"),
            )
            await store.set_status(child, ThreadStatus(state="running", since=1, reason=None))
        await store.terminate("parent")
        entry = QueueEntry(
            id="q1", role="user", content="late", silent=True, source="subagent", created_at=0
        )
        settlement = replace(LOST_RUN, delivery=ParentDelivery("parent", "c1", "failed", entry))
        events = await store.settle_run("c1", settlement)
        assert [(e.thread_id, e.kind) for e in events][-2:] == [
            ("c1", "status"),
            ("parent", "subagent"),
        ]
        assert await store.list_queue("parent") == []
        assert {e.reference: e.status for e in await store.get_registry("parent")} == {
            "c1": "failed",
            "c2": "running",
        }

        await store.delete_thread("parent")  # takes the children along: recreate one
        await store.create_thread(NewThread(id="orphan", agent_id="worker"))
        await store.set_status("orphan", ThreadStatus(state="running", since=1, reason=None))
        gone = ParentDelivery("parent", "orphan", "failed", entry)
        settled, events = await store.end_run("orphan", "session_stop", (0, 0), True, gone)
        assert settled and [(e.thread_id, e.kind) for e in events] == [("orphan", "status")]
    finally:
        await store.close()
