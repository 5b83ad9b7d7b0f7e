"""Hooks, the request context and ThreadState during real executions.

Conformance cases, each run on a real ``Runtime`` with a real SQLite file and a scripted
model:

- spec 03 §3.12 [engine]: C03-016, C03-018, C03-019, C03-021 … C03-051;
- spec 02 §2.19 [engine]: C02-027, C02-033, C02-034, C02-035, C02-036, C02-043 (engine
  part), C02-078, C02-084, C02-087 (the part without sub-prompts);
- spec 01 §1.12 [engine]: C01-021, C01-023, C01-024, C01-025, the engine halves of C01-040
  and C01-041;
- the seed's Messages §7 scenarios S1–S7 (restated in spec 03 §3.11): S1 = C03-033,
  S2 = ``test_s2_inject_at_rest_between_executions``, S3 = C03-034, S4 = C03-035,
  S5 = C03-031, S6 = C03-032, S7 = C03-030.

Not covered (features not built yet): C03-020 (child-required hooks need subagent
relationships), C02-028 and the sub-prompt half of C02-087 (sub-prompts).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from threadloom import DROP, Agent, Definitions, HookBlocked, Runtime, Side, ThreadState, hook
from threadloom.define import Model, Prompt, Reasoning, tool
from threadloom.engine.options import EngineOptions
from threadloom.errors import MessageGenerating
from threadloom.providers.scripted import Call, Reply, ScriptedProvider
from threadloom.providers.types import (
    AssistantMessage,
    ProviderRequest,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from threadloom.records import LogRow, Message, json_compact, new_id

FAST = EngineOptions(backoff_base_s=0.001, backoff_cap_s=0.01)
SYSTEM = "You are P."
QUEUE_KEYS = ("queued", "queue_status", "queue_source")
WAIT = 5.0


# --------------------------------------------------------------------------------------
# Tools and helpers


@tool
def echo(v: Any = None) -> str:
    """Echo the value back."""
    return f"echo {v}"


@dataclass
class Env:
    """A runtime on a chat agent ``chat`` (side a = prompt P on model M, side b human)."""

    rt: Runtime
    provider: ScriptedProvider
    defs: Definitions
    db_url: str
    opened: list[Runtime] = field(default_factory=list)

    async def thread(self, agent: str = "chat", **options: Any) -> ThreadState:
        return await self.rt.create_thread(agent, **options)

    async def turn(self, state: ThreadState, content: str = "hi", *, role: str = "user") -> None:
        """Send a message and wait until the thread has no run."""
        await self.rt.send_message(state.thread_id, content, role=role)
        await self.rt.wait_idle(state.thread_id, timeout=WAIT)

    async def reopen(self) -> Runtime:
        """Close the runtime and open a new one on the same file and definitions."""
        await self.rt.close(drain=0)
        self.rt = await Runtime.open(self.db_url, definitions=self.defs, options=FAST)
        self.opened.append(self.rt)
        return self.rt


@pytest.fixture
async def make_env(db_url: str) -> AsyncIterator[Callable[..., Any]]:
    envs: list[Env] = []

    async def make(
        script: Any = None,
        *extra: Any,
        prompt: dict[str, Any] | None = None,
        agent: dict[str, Any] | None = None,
        tools: Sequence[Any] = ("echo",),
        model: dict[str, Any] | None = None,
    ) -> Env:
        provider = ScriptedProvider(script)
        defs = Definitions().add(
            Model(name="M", provider=provider, model="scripted-1", **(model or {})),
            Prompt(name="P", model="M", system=SYSTEM, tools=tuple(tools), **(prompt or {})),
            Agent(
                name="chat",
                side_a=Side(prompt="P", label="Agent"),
                side_b=Side(label="Customer"),
                **(agent or {}),
            ),
            echo,
            *extra,
        )
        rt = await Runtime.open(db_url, definitions=defs, options=FAST)
        env = Env(rt, provider, defs, db_url, [rt])
        envs.append(env)
        return env

    yield make
    for env in envs:
        for rt in env.opened:
            await rt.close(drain=0)


def chat_agent(name: str, prompt: str, **fields: Any) -> Agent:
    return Agent(
        name=name,
        side_a=Side(prompt=prompt, label="Agent"),
        side_b=Side(label="Customer"),
        **fields,
    )


async def stored(state: ThreadState) -> list[Message]:
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    return page.messages


def shape(request: ProviderRequest) -> list[tuple[str, str]]:
    """``(role, text)`` of every message of a provider request."""
    return [(m.role, m.text) for m in request.messages]


def tool_call_ids(request: ProviderRequest) -> list[str]:
    return [c.id for m in request.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]


async def hook_errors(rt: Runtime, thread_id: str) -> list[LogRow]:
    rows = await rt.store.list_logs(thread_id, limit=None)
    return [r for r in rows if r.error_type == "hook_error"]


async def llm_rows(rt: Runtime, thread_id: str) -> list[LogRow]:
    rows = await rt.store.list_logs(thread_id, limit=None)
    return [r for r in rows if r.kind is None and r.provider != "system"]


def assert_hook_error(row: LogRow, hook_id: str, hook_name: str, head: str) -> None:
    """A runtime error row for a recorded hook failure (spec 03 §3.5.1 item 2)."""
    assert row.kind is None and row.provider == "system"
    assert row.model == hook_id
    assert row.endpoint == f"hook.{hook_name}"
    assert row.error_type == "hook_error"
    assert row.error_origin == f"hook:{hook_id}"
    assert row.is_complete is True
    assert row.error is not None and row.error.startswith(head)
    assert "\n\nStack trace:\n" in row.error


async def next_event(sub: Any, match: Callable[[Any], bool]) -> Any:
    """The next published event for which ``match`` is true."""
    while True:
        event = await sub.get(timeout=WAIT)
        if match(event):
            return event


def is_model_pending(event: Any) -> bool:
    """A ``message`` event of a pending model message (not a queue entry's pending view)."""
    if event.kind != "message":
        return False
    message = event.data["message"]
    return message["status"] == "pending" and not (message.get("metadata") or {}).get("queued")


@dataclass
class Blocker:
    """A tool that signals when it runs and waits until released (or cancelled)."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    run_ids: list[str] = field(default_factory=list)

    def tool(self) -> Any:
        @tool
        async def block(state: Any) -> str:
            """Wait until released."""
            self.run_ids.append(state.execution.run_id)
            self.started.set()
            await self.release.wait()
            return "released"

        return block


# --------------------------------------------------------------------------------------
# Spec 03: hook selection (§3.3)


async def test_c03_016_filter_mutating_in_place_and_returning_none_changes_nothing(
    make_env: Any,
) -> None:
    """C03-016: a ``filter_messages`` hook that mutates ``messages`` in place and returns
    ``None`` → the request equals the no-hook request (spec 03 §3.4 rule 3)."""
    calls: list[int] = []

    @hook("filter_messages")
    def mutate(state: Any, messages: list[Message]) -> None:
        calls.append(len(messages))
        for message in messages:
            message.content = "MUTATED"
            message.role = "system"
        messages.reverse()
        messages.pop()
        return None

    replies = [Reply.text("r1"), Reply.text("r2")]
    env = await make_env([*replies, *replies], mutate, chat_agent("hooked", "P", hooks=("mutate",)))
    plain = await env.thread("chat")
    hooked = await env.thread("hooked")
    for state in (plain, hooked):
        await env.turn(state, "hello")
        await env.turn(state, "again")
    requests = env.provider.requests
    assert calls == [1, 3]
    assert [m.model_dump() for m in requests[2].messages] == [
        m.model_dump() for m in requests[0].messages
    ]
    assert [m.model_dump() for m in requests[3].messages] == [
        m.model_dump() for m in requests[1].messages
    ]
    assert shape(requests[3]) == [
        ("system", SYSTEM),
        ("user", "hello"),
        ("assistant", "r1"),
        ("user", "again"),
    ]


async def test_c03_018_prompt_hooks_replace_agent_hooks_during_steps(make_env: Any) -> None:
    """C03-018: P lists ``h1``, the agent lists ``h2``, both ``before_create_message`` →
    during P's steps only ``h1`` runs; an at-rest inject runs only ``h2``.

    Reading: the writes of P's steps are the pending model message, the finalisation, the
    tool result. The queue delivery at the start of the first step is not asserted here:
    it happens before the acting side (hence the active prompt) is decided (spec 04
    §4.9.2 step 2), so which list applies to it is not fixed by §3.3.
    """
    calls: list[tuple[str, str, str | None, str | None, str]] = []

    def recorder(hook_id: str) -> Any:
        @hook("before_create_message", id=hook_id)
        def record(state: Any, message: Message, hook_context: Any) -> None:
            source = hook_context.source["kind"]
            calls.append((hook_id, message.role, message.status, message.content, source))

        return record

    env = await make_env(
        [Reply.tool_calls(Call("echo", {"v": 1})), Reply.text("done")],
        recorder("h1"),
        recorder("h2"),
        prompt={"hooks": ("h1",)},
        agent={"hooks": ("h2",)},
    )
    state = await env.thread()
    await env.turn(state, "go")
    step_writes = [c for c in calls if c[1] != "user"]
    assert {c[0] for c in step_writes} == {"h1"}
    assert {c[4] for c in step_writes} == {"prompt"}
    assert [(c[1], c[2], c[3]) for c in step_writes] == [
        ("assistant", "pending", None),  # pending model message, step 1
        ("tool", "completed", "echo 1"),  # tool result
        ("assistant", "pending", None),  # pending model message, step 2
        ("assistant", "completed", "done"),  # finalisation (content only)
    ]
    calls.clear()
    at_rest = await env.rt.thread(state.thread_id)
    await at_rest.inject_message(role="user", content="from an endpoint")
    assert calls == [("h2", "user", "completed", "from an endpoint", "agent")]


async def test_c03_018_queue_delivery_in_p_steps_runs_only_prompt_hooks(make_env: Any) -> None:
    """C03-018, the queue deliveries of P's steps: P lists ``h1``, the agent lists ``h2``
    → the entries delivered at the start of P's steps run only ``h1``.

    Reading: queue delivery is step 1 of the request assembly of a prompt-backed side's
    model step (spec 03 §3.8), and §3.3 rule 2 lists the cases without an active prompt
    (at rest, a human-backed side acting), which do not include it. Whatever the reading,
    the list must not depend on whether the delivery happens in the run's first step
    ("go") or a later one ("mid", queued while a tool runs).
    """
    calls: list[tuple[str, str | None]] = []

    def recorder(hook_id: str) -> Any:
        @hook("before_create_message", id=hook_id)
        def record(state: Any, message: Message) -> None:
            if message.role == "user":
                calls.append((hook_id, message.content))

        return record

    blocker = Blocker()
    env = await make_env(
        [Reply.tool_calls(Call("block", {})), Reply.text("done")],
        recorder("h1"),
        recorder("h2"),
        blocker.tool(),
        tools=("block",),
        prompt={"hooks": ("h1",)},
        agent={"hooks": ("h2",)},
    )
    state = await env.thread()
    await env.rt.send_message(state.thread_id, "go")
    await asyncio.wait_for(blocker.started.wait(), WAIT)
    await state.queue_message(role="user", content="mid")
    blocker.release.set()
    await env.rt.wait_idle(state.thread_id, timeout=WAIT)
    assert calls == [("h1", "go"), ("h1", "mid")]


async def test_c03_019_agent_hooks_run_when_prompt_lists_none(make_env: Any) -> None:
    """C03-019: P lists no hooks, the agent lists ``h2`` → ``h2`` runs during P's steps."""
    calls: list[tuple[str, str | None, str | None, dict[str, str]]] = []

    @hook("before_create_message")
    def h2(state: Any, message: Message, hook_context: Any) -> None:
        calls.append((message.role, message.status, message.content, dict(hook_context.source)))

    env = await make_env([Reply.text("Hi")], h2, agent={"hooks": ("h2",)})
    state = await env.thread()
    await env.turn(state, "hello")
    source = {"kind": "agent", "agent_name": "chat"}
    assert calls == [
        ("user", "completed", "hello", source),  # queue delivery
        ("assistant", "pending", None, source),  # pending model message
        ("assistant", "completed", "Hi", source),  # finalisation
    ]


# --------------------------------------------------------------------------------------
# Spec 03: filter_messages, prefilter_llm_history, after_system_message (§3.6.3–§3.6.5)


async def test_c03_021_filter_returning_empty_list_sends_only_system(make_env: Any) -> None:
    """C03-021: ``filter_messages`` returning ``[]`` → the request is ``[system]`` only;
    stored messages unchanged."""

    @hook("filter_messages")
    def nothing(state: Any, messages: list[Message]) -> list[Message]:
        return []

    env = await make_env([Reply.text("Hi")], nothing, agent={"hooks": ("nothing",)})
    state = await env.thread()
    await env.turn(state, "hello")
    assert [m.model_dump() for m in env.provider.requests[0].messages] == [
        SystemMessage(content=SYSTEM).model_dump()
    ]
    assert [(m.role, m.content) for m in await stored(state)] == [
        ("user", "hello"),
        ("assistant", "Hi"),
    ]


async def test_c03_022_synthetic_system_message_only_in_request(make_env: Any) -> None:
    """C03-022: ``filter_messages`` adding ``{"role": "system", "content": "note"}`` →
    "note" is in the request; not stored; not in ``execution.message_history``."""
    histories: list[list[str | None]] = []

    @hook("filter_messages")
    def add_note(state: Any, messages: list[Message]) -> list[Any]:
        return [*messages, {"role": "system", "content": "note"}]

    @tool
    def probe(state: Any) -> str:
        """Read the live history."""
        histories.append([m.content for m in state.execution.message_history])
        return "probed"

    env = await make_env(
        [Reply.tool_calls(Call("probe", {})), Reply.text("done")],
        add_note,
        probe,
        agent={"hooks": ("add_note",)},
        tools=("probe",),
    )
    state = await env.thread()
    await env.turn(state, "hello")
    first, second = env.provider.requests
    assert shape(first) == [("system", SYSTEM), ("user", "hello"), ("system", "note")]
    assert ("system", "note") in shape(second)
    assert all(m.content != "note" for m in await stored(state))
    assert histories and all("note" not in h for h in histories)


async def test_c03_023_filter_summary_copy_changes_request_only(make_env: Any) -> None:
    """C03-023: ``filter_messages`` returning a copy of message m with ``content =
    "SUMMARY"`` → the request uses "SUMMARY"; ``get_message(m)`` unchanged."""

    @hook("filter_messages")
    def summarise(state: Any, messages: list[Message]) -> list[Message]:
        return [
            m.model_copy(update={"content": "SUMMARY"}) if m.role == "user" else m for m in messages
        ]

    env = await make_env([Reply.text("Hi")], summarise, agent={"hooks": ("summarise",)})
    state = await env.thread()
    await env.turn(state, "a long story")
    assert shape(env.provider.requests[0]) == [("system", SYSTEM), ("user", "SUMMARY")]
    user = (await stored(state))[0]
    again = await state.get_message(user.id)
    assert again is not None and again.content == "a long story"
    assert again.model_dump() == user.model_dump()


async def test_c03_024_filter_dropping_tool_call_message_drops_its_result(
    make_env: Any,
) -> None:
    """C03-024: ``filter_messages`` removing an assistant message with tool calls but
    keeping its tool result → the result is absent from the request."""

    @hook("filter_messages")
    def drop_calls(state: Any, messages: list[Message]) -> list[Message]:
        return [m for m in messages if not m.tool_calls]

    env = await make_env(
        [Reply.tool_calls(Call("echo", {"v": 1}, id="call_a")), Reply.text("done")],
        drop_calls,
        agent={"hooks": ("drop_calls",)},
    )
    state = await env.thread()
    await env.turn(state, "go")
    second = env.provider.requests[1]
    assert shape(second) == [("system", SYSTEM), ("user", "go")]
    assert not any(isinstance(m, ToolMessage) for m in second.messages)
    tool_rows = [m for m in await stored(state) if m.role == "tool"]
    assert [(m.tool_call_id, m.content) for m in tool_rows] == [("call_a", "echo 1")]


async def test_c03_025_failing_filter_keeps_snapshot_and_logs(make_env: Any) -> None:
    """C03-025: ``filter_messages`` raising ``RuntimeError`` → the request uses the
    unfiltered snapshot; a ``hook_error`` row exists."""

    @hook("filter_messages")
    def broken(state: Any, messages: list[Message]) -> list[Message]:
        raise RuntimeError("filter broke")

    env = await make_env([Reply.text("Hi")], broken, agent={"hooks": ("broken",)})
    state = await env.thread()
    await env.turn(state, "hello")
    assert shape(env.provider.requests[0]) == [("system", SYSTEM), ("user", "hello")]
    rows = await hook_errors(env.rt, state.thread_id)
    assert len(rows) == 1
    assert_hook_error(rows[0], "broken", "filter_messages", "RuntimeError: filter broke")
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "stop_on_response")


async def test_c03_026_prefilter_block_stores_blocked_message(make_env: Any) -> None:
    """C03-026: ``prefilter_llm_history`` raising ``HookBlocked("quota exceeded")`` → an
    ``assistant`` message "quota exceeded" with ``metadata.status_kind == "hook_blocked"``
    is stored (its create hooks ran), no pending message, no LLM log row, status
    ``{state: "idle", reason: "hook_blocked"}``."""
    before: list[tuple[str, str | None, str | None]] = []
    after: list[tuple[str, str | None]] = []

    @hook("prefilter_llm_history")
    def quota(state: Any, messages: list[Any]) -> None:
        raise HookBlocked("quota exceeded")

    @hook("before_create_message")
    def bc(state: Any, message: Message) -> None:
        before.append((message.role, message.status, message.content))

    @hook("after_create_message")
    def ac(state: Any, message: Message) -> None:
        after.append((message.id, message.content))

    env = await make_env(
        [Reply.text("never")], quota, bc, ac, agent={"hooks": ("quota", "bc", "ac")}
    )
    state = await env.thread()
    sub = env.rt.events.subscribe(state.thread_id)
    await env.turn(state, "hello")
    events = sub.drain()
    sub.close()
    assert env.provider.requests == []
    user, blocked = await stored(state)
    assert (user.role, user.content) == ("user", "hello")
    assert (blocked.role, blocked.content, blocked.status) == (
        "assistant",
        "quota exceeded",
        "completed",
    )
    assert blocked.metadata == {"status_kind": "hook_blocked"}
    assert (blocked.name, blocked.prompt) == ("Agent", "P")
    assert ("assistant", "completed", "quota exceeded") in before
    assert (blocked.id, "quota exceeded") in after
    assert all(status != "pending" for _, status, _ in before)
    assert not any(is_model_pending(e) for e in events)
    assert await llm_rows(env.rt, state.thread_id) == []
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "hook_blocked")


async def test_c03_027_hook_blocked_from_filter_is_an_ordinary_failure(make_env: Any) -> None:
    """C03-027: ``filter_messages`` raising ``HookBlocked("no")`` → an ordinary failure: a
    ``hook_error`` row, the request is sent with the unfiltered snapshot, the run is not
    blocked."""

    @hook("filter_messages")
    def refuse(state: Any, messages: list[Message]) -> None:
        raise HookBlocked("no")

    env = await make_env([Reply.text("Hi")], refuse, agent={"hooks": ("refuse",)})
    state = await env.thread()
    await env.turn(state, "hello")
    assert shape(env.provider.requests[0]) == [("system", SYSTEM), ("user", "hello")]
    rows = await hook_errors(env.rt, state.thread_id)
    assert len(rows) == 1
    assert_hook_error(rows[0], "refuse", "filter_messages", "HookBlocked: no")
    assert [(m.role, m.content) for m in await stored(state)] == [
        ("user", "hello"),
        ("assistant", "Hi"),
    ]
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "stop_on_response")


async def test_c03_028_failing_prefilter_keeps_request(make_env: Any) -> None:
    """C03-028: ``prefilter_llm_history`` raising a plain exception → the request is sent
    with the unchanged list; a ``hook_error`` row exists."""

    @hook("prefilter_llm_history")
    def shaky(state: Any, messages: list[Any]) -> None:
        raise ValueError("bad prefilter")

    env = await make_env([Reply.text("Hi")], shaky, agent={"hooks": ("shaky",)})
    state = await env.thread()
    await env.turn(state, "hello")
    assert shape(env.provider.requests[0]) == [("system", SYSTEM), ("user", "hello")]
    rows = await hook_errors(env.rt, state.thread_id)
    assert len(rows) == 1
    assert_hook_error(rows[0], "shaky", "prefilter_llm_history", "ValueError: bad prefilter")


async def test_c03_029_after_system_message_replaces_keeps_or_fails(make_env: Any) -> None:
    """C03-029: ``after_system_message`` returning "X" → the request's system message and
    the log's ``system_prompt`` are "X"; returning ``None`` keeps the rendered text;
    returning ``5`` keeps it and writes a ``hook_error`` row."""
    mode: dict[str, Any] = {}

    @hook("after_system_message")
    def sysmsg(state: Any, system_message: str) -> Any:
        return mode["value"]

    env = await make_env(
        [Reply.text("a"), Reply.text("b"), Reply.text("c")],
        sysmsg,
        agent={"hooks": ("sysmsg",)},
    )
    expected = {"X": "X", None: SYSTEM, 5: SYSTEM}
    for index, (value, system) in enumerate(expected.items()):
        mode["value"] = value
        state = await env.thread()
        await env.turn(state, "hello")
        request = env.provider.requests[index]
        assert request.messages[0].model_dump() == SystemMessage(content=system).model_dump()
        (row,) = await llm_rows(env.rt, state.thread_id)
        assert row.system_prompt == system
        errors = await hook_errors(env.rt, state.thread_id)
        if value == 5:
            assert len(errors) == 1
            assert_hook_error(errors[0], "sysmsg", "after_system_message", "InvalidMessage")
        else:
            assert errors == []


# --------------------------------------------------------------------------------------
# Spec 03 §3.11: the seed's scenarios S1–S7 inside executions


def create_recorders(log: list[tuple[str, str, str | None]]) -> tuple[Any, Any]:
    """``before_create_message`` / ``after_create_message`` hooks appending
    ``(hook, message id or "", content)``."""

    @hook("before_create_message", id="rec_before")
    def rec_before(state: Any, message: Message) -> None:
        log.append(("before", message.id, message.content))

    @hook("after_create_message", id="rec_after")
    def rec_after(state: Any, message: Message) -> None:
        log.append(("after", message.id, message.content))

    return rec_before, rec_after


def count(log: list[tuple[str, str, str | None]], which: str, content: str) -> int:
    return sum(1 for w, _, c in log if w == which and c == content)


async def test_c03_030_s7_after_system_message_injection_joins_current_step(
    make_env: Any,
) -> None:
    """C03-030 (S7): ``after_system_message`` injects "note" → "note" is in the input of
    ``filter_messages`` and in the same step's request (persisted before the snapshot)."""
    created: list[tuple[str, str, str | None]] = []
    filter_inputs: list[list[str | None]] = []
    injected: list[Message] = []

    @hook("after_system_message")
    async def inject_note(state: Any, system_message: str) -> None:
        if not injected:
            injected.append(await state.inject_message(role="user", content="note"))

    @hook("filter_messages")
    def watch(state: Any, messages: list[Message]) -> None:
        filter_inputs.append([m.content for m in messages])

    env = await make_env(
        [Reply.text("Hi")],
        inject_note,
        watch,
        *create_recorders(created),
        agent={"hooks": ("inject_note", "watch", "rec_before", "rec_after")},
    )
    state = await env.thread()
    await env.turn(state, "hello")
    assert filter_inputs == [["hello", "note"]]
    assert shape(env.provider.requests[0]) == [
        ("system", SYSTEM),
        ("user", "hello"),
        ("user", "note"),
    ]
    assert count(created, "before", "note") == 1 and count(created, "after", "note") == 1
    note = await state.get_message(injected[0].id)
    assert note is not None and note.prompt == "P" and note.status == "completed"


async def test_c03_031_s5_filter_injection_joins_next_assembly(make_env: Any) -> None:
    """C03-031 (S5): ``filter_messages`` injects "late" on the first step of a two-step
    run → "late" is absent from request 1 and present in request 2; ``filter_messages``
    ran once per step; the create hooks ran once for "late"."""
    created: list[tuple[str, str, str | None]] = []
    filter_inputs: list[list[str | None]] = []

    @hook("filter_messages")
    async def inject_late(state: Any, messages: list[Message]) -> None:
        filter_inputs.append([m.content for m in messages])
        if len(filter_inputs) == 1:
            await state.inject_message(role="user", content="late")

    env = await make_env(
        [Reply.tool_calls(Call("echo", {"v": 1})), Reply.text("done")],
        inject_late,
        *create_recorders(created),
        agent={"hooks": ("inject_late", "rec_before", "rec_after")},
    )
    state = await env.thread()
    await env.turn(state, "go")
    first, second = env.provider.requests
    assert "late" not in [text for _, text in shape(first)]
    assert ("user", "late") in shape(second)
    assert len(filter_inputs) == 2
    assert "late" not in filter_inputs[0] and "late" in filter_inputs[1]
    assert count(created, "before", "late") == 1 and count(created, "after", "late") == 1


async def test_c03_032_s6_prefilter_injection_joins_next_assembly(make_env: Any) -> None:
    """C03-032 (S6): ``prefilter_llm_history`` injects "late" → same observations as
    C03-031: absent from request 1, present in request 2, the hook ran once per step, the
    create hooks ran once for "late"."""
    created: list[tuple[str, str, str | None]] = []
    prefilter_inputs: list[list[Any]] = []

    @hook("prefilter_llm_history")
    async def inject_late(state: Any, messages: list[Any]) -> None:
        prefilter_inputs.append([m.content for m in messages])
        if len(prefilter_inputs) == 1:
            await state.inject_message(role="user", content="late")

    env = await make_env(
        [Reply.tool_calls(Call("echo", {"v": 1})), Reply.text("done")],
        inject_late,
        *create_recorders(created),
        agent={"hooks": ("inject_late", "rec_before", "rec_after")},
    )
    state = await env.thread()
    await env.turn(state, "go")
    first, second = env.provider.requests
    assert "late" not in [text for _, text in shape(first)]
    assert ("user", "late") in shape(second)
    assert len(prefilter_inputs) == 2
    assert "late" not in prefilter_inputs[0] and "late" in prefilter_inputs[1]
    assert count(created, "before", "late") == 1 and count(created, "after", "late") == 1


async def test_c03_033_s1_tool_injection_visible_to_later_tools_and_hooks(
    make_env: Any,
) -> None:
    """C03-033 (S1): a tool injects "x" → the create hooks ran once each; a second tool of
    the same response finds "x" in ``execution.message_history``.

    Also S1's other observations: ``get_message(id)`` returns the persisted record as soon
    as ``inject_message`` returns, and later hooks of the execution (``before_store_tool_
    result`` of both calls, ``filter_messages`` of the next step) find it in
    ``execution.message_history``. The calls run concurrently (D12), so the reader waits
    until the writer's ``inject_message`` has returned.
    """
    created: list[tuple[str, str, str | None]] = []
    seen: dict[str, Any] = {}
    written = asyncio.Event()

    @tool
    async def writer(state: Any) -> str:
        """Inject x."""
        message = await state.inject_message(role="user", content="x")
        seen["injected"] = message
        seen["read_back"] = await state.get_message(message.id)
        written.set()
        return "wrote"

    @tool
    async def reader(state: Any) -> str:
        """Read the live history."""
        await asyncio.wait_for(written.wait(), WAIT)
        seen["reader"] = [m.id for m in state.execution.message_history]
        return "read"

    @hook("before_store_tool_result")
    def later_hook(state: Any, call: Any, result: Any) -> None:
        ids = [m.id for m in state.execution.message_history]
        seen.setdefault("store_hooks", []).append(seen["injected"].id in ids)

    @hook("filter_messages")
    def next_step(state: Any, messages: list[Message]) -> None:
        ids = [m.id for m in state.execution.message_history]
        seen.setdefault("filters", []).append("injected" in seen and seen["injected"].id in ids)

    env = await make_env(
        [Reply.tool_calls(Call("writer", {}), Call("reader", {})), Reply.text("done")],
        writer,
        reader,
        later_hook,
        next_step,
        *create_recorders(created),
        tools=("writer", "reader"),
        agent={"hooks": ("later_hook", "next_step", "rec_before", "rec_after")},
    )
    state = await env.thread()
    await env.turn(state, "go")
    injected = seen["injected"]
    assert count(created, "before", "x") == 1 and count(created, "after", "x") == 1
    assert ("after", injected.id, "x") in created
    assert seen["read_back"] is not None
    assert seen["read_back"].model_dump() == injected.model_dump()
    assert injected.id in seen["reader"]
    assert seen["store_hooks"] == [True, True]
    assert seen["filters"] == [False, True]


async def test_c03_034_s3_silent_and_visible_injection(make_env: Any) -> None:
    """C03-034 (S3): a tool injects one silent and one visible message → both in the next
    request; ``get_messages()`` lists only the visible one.

    Also S3's other observations: both are stored, both are in ``execution.message_
    history``, both are passed to the next ``filter_messages``, and ``include_silent=True``
    lists both.
    """
    seen: dict[str, Any] = {}
    filter_inputs: list[list[str | None]] = []

    @tool
    async def whisper(state: Any) -> str:
        """Inject a silent and a visible message."""
        quiet = await state.inject_message(role="user", content="quiet", silent=True)
        loud = await state.inject_message(role="user", content="loud")
        seen["ids"] = (quiet.id, loud.id)
        seen["history"] = [m.id for m in state.execution.message_history]
        return "whispered"

    @hook("filter_messages")
    def watch(state: Any, messages: list[Message]) -> None:
        filter_inputs.append([m.content for m in messages])

    env = await make_env(
        [Reply.tool_calls(Call("whisper", {})), Reply.text("done")],
        whisper,
        watch,
        tools=("whisper",),
        agent={"hooks": ("watch",)},
    )
    state = await env.thread()
    await env.turn(state, "go")
    quiet_id, loud_id = seen["ids"]
    assert quiet_id in seen["history"] and loud_id in seen["history"]
    assert "quiet" in filter_inputs[1] and "loud" in filter_inputs[1]
    second = shape(env.provider.requests[1])
    assert ("user", "quiet") in second and ("user", "loud") in second
    visible = [m.id for m in (await state.get_messages(limit=None)).messages]
    assert loud_id in visible and quiet_id not in visible
    everything = [m.id for m in await stored(state)]
    assert quiet_id in everything and loud_id in everything
    quiet = await state.get_message(quiet_id)
    assert quiet is not None and quiet.silent is True


async def test_c03_035_s4_filter_edits_request_context_only(make_env: Any) -> None:
    """C03-035 (S4): a filter that drops (the oldest message), summarises (same id, new
    content), redacts (an edited copy given as a mapping with only ``id`` and ``content``)
    and adds a synthetic ``system`` message → the request shows all four changes; stored
    records and ``execution.message_history`` unchanged."""
    ids: dict[str, str] = {}
    histories: list[list[tuple[str, str | None]]] = []
    card = "4111 1111 1111 1111"

    @hook("filter_messages")
    def s4(state: Any, messages: list[Message]) -> list[Any]:
        histories.append([(m.id, m.content) for m in state.execution.message_history])
        out: list[Any] = [{"role": "system", "content": "Earlier: a story and a card"}]
        for message in messages[1:]:
            if message.id == ids["story"]:
                out.append(message.model_copy(update={"content": "SUMMARY"}))
            elif message.id == ids["card"]:
                out.append({"id": message.id, "content": message.content.replace(card, "[card]")})
            else:
                out.append(message)
        return out

    @tool
    def probe(state: Any) -> str:
        """Read the live history."""
        histories.append([(m.id, m.content) for m in state.execution.message_history])
        return "probed"

    env = await make_env(
        [Reply.tool_calls(Call("probe", {})), Reply.text("done")],
        s4,
        probe,
        tools=("probe",),
        agent={"hooks": ("s4",)},
    )
    state = await env.thread()
    originals = {
        "oldest": "the oldest message",
        "story": "a very long story " * 10,
        "card": f"my card is {card}",
    }
    for key, content in originals.items():
        ids[key] = (await state.inject_message(role="user", content=content)).id
    await env.turn(state, "question")
    first = shape(env.provider.requests[0])
    assert first == [
        ("system", SYSTEM),
        ("system", "Earlier: a story and a card"),
        ("user", "SUMMARY"),
        ("user", "my card is [card]"),
        ("user", "question"),
    ]
    assert all(originals["oldest"] not in text for _, text in shape(env.provider.requests[1]))
    for key, content in originals.items():
        message = await state.get_message(ids[key])
        assert message is not None and message.content == content
    assert len(histories) == 3  # filter step 1, probe, filter step 2
    for history in histories:
        contents = dict(history)
        assert all(contents[ids[key]] == content for key, content in originals.items())
        assert "SUMMARY" not in contents.values()
        assert "Earlier: a story and a card" not in contents.values()


async def test_s2_inject_at_rest_between_executions(make_env: Any) -> None:
    """S2 (seed Messages §7, spec 03 §3.11; spec 02 §2.5.3 rules 2, 6): an endpoint or
    effect calls ``inject_message`` on an idle thread → ``before_create_message`` and
    ``after_create_message`` run once each; the message is returned by ``get_message`` /
    ``get_messages`` before the next execution starts; no execution starts; the next
    execution's request contains it."""
    created: list[tuple[str, str, str | None]] = []
    env = await make_env(
        [Reply.text("first"), Reply.text("second")],
        *create_recorders(created),
        agent={"hooks": ("rec_before", "rec_after")},
    )
    state = await env.thread()
    await env.turn(state, "hello")
    status_before = await state.status()
    created.clear()
    endpoint = await env.rt.thread(state.thread_id)  # at rest, as an endpoint gets it
    injected = await endpoint.inject_message(role="user", content="from an effect")
    assert count(created, "before", "from an effect") == 1
    assert ("after", injected.id, "from an effect") in created and len(created) == 2
    read = await state.get_message(injected.id)
    assert read is not None and read.model_dump() == injected.model_dump()
    assert injected.id in [m.id for m in (await state.get_messages(limit=None)).messages]
    await asyncio.sleep(0.05)
    assert not env.rt.running(state.thread_id)
    assert await state.status() == status_before
    assert len(env.provider.requests) == 1
    await env.turn(state, "next")
    assert shape(env.provider.requests[1])[-2:] == [("user", "from an effect"), ("user", "next")]


# --------------------------------------------------------------------------------------
# Spec 03: eligibility, prompt options and reasoning (§3.8–§3.10)


async def test_c03_036_pending_and_failed_messages_are_never_sent(make_env: Any) -> None:
    """C03-036: a stored pending message and a stored failed message (seeded) → neither is
    passed to ``filter_messages`` nor in the request. The pending one is seeded through
    the store (no API writes one); the failed one through ``update_message``."""
    filter_inputs: list[list[str]] = []

    @hook("filter_messages")
    def watch(state: Any, messages: list[Message]) -> None:
        filter_inputs.append([m.id for m in messages])

    env = await make_env([Reply.text("Hi")], watch, agent={"hooks": ("watch",)})
    state = await env.thread()
    pending, _ = await env.rt.store.insert_message(
        state.thread_id, Message(id=new_id(), role="assistant", content=None, status="pending")
    )
    failed = await state.inject_message(role="assistant", content="partial answer")
    await state.update_message(failed.id, status="failed")
    await env.turn(state, "hello")
    assert len(filter_inputs) == 1
    assert pending.id not in filter_inputs[0] and failed.id not in filter_inputs[0]
    assert shape(env.provider.requests[0]) == [("system", SYSTEM), ("user", "hello")]


async def test_c03_037_include_past_tools_and_include_chat(make_env: Any) -> None:
    """C03-037: P with ``include_past_tools=False``, second turn → the request has no tool
    messages or ``tool_calls`` from the first turn (a first-turn message with text keeps
    its text), but keeps the current turn's tool round; with ``include_chat=False`` → the
    request holds only the system message and messages from the current turn's anchor
    on."""
    script = [
        # thread with include_past_tools=False
        Reply.tool_calls(Call("echo", {"v": 1}, id="call_t1"), content="let me check"),
        Reply.text("done1"),
        Reply.tool_calls(Call("echo", {"v": 2}, id="call_t2")),
        Reply.text("done2"),
        # thread with include_chat=False
        Reply.text("r1"),
        Reply.tool_calls(Call("echo", {"v": 3}, id="call_t3")),
        Reply.text("r2"),
    ]
    env = await make_env(
        script,
        Prompt(name="PT", model="M", system=SYSTEM, tools=("echo",), include_past_tools=False),
        Prompt(name="PC", model="M", system=SYSTEM, tools=("echo",), include_chat=False),
        chat_agent("past", "PT"),
        chat_agent("chatless", "PC"),
    )
    past = await env.thread("past")
    await env.turn(past, "one")
    await env.turn(past, "two")
    requests = env.provider.requests
    assert shape(requests[2]) == [
        ("system", SYSTEM),
        ("user", "one"),
        ("assistant", "let me check"),
        ("assistant", "done1"),
        ("user", "two"),
    ]
    assert tool_call_ids(requests[2]) == []
    assert shape(requests[3])[:5] == shape(requests[2])
    assert tool_call_ids(requests[3]) == ["call_t2"]
    assert [(m.tool_call_id, m.content) for m in requests[3].messages if m.role == "tool"] == [
        ("call_t2", "echo 2")
    ]

    chatless = await env.thread("chatless")
    await env.turn(chatless, "one")
    await env.turn(chatless, "two")
    assert shape(requests[4]) == [("system", SYSTEM), ("user", "one")]
    assert shape(requests[5]) == [("system", SYSTEM), ("user", "two")]
    assert shape(requests[6]) == [
        ("system", SYSTEM),
        ("user", "two"),
        ("assistant", ""),
        ("tool", "echo 3"),
    ]
    assert tool_call_ids(requests[6]) == ["call_t3"]


DETAILS = [
    {"type": "reasoning.text", "text": "think", "format": "anthropic-claude-v1", "signature": "s"}
]


def assistants(request: ProviderRequest) -> list[AssistantMessage]:
    return [m for m in request.messages if isinstance(m, AssistantMessage)]


async def test_c03_038_persisted_reasoning_replayed_unless_excluded(make_env: Any) -> None:
    """C03-038: a stored assistant message with reasoning "think" → the next request's
    assistant message carries it; with ``reasoning.include=False`` → it carries no
    reasoning (the stored record keeps it)."""
    reply = Reply.reasoning("Hi", "think", DETAILS)
    env = await make_env(
        [reply, Reply.text("ok"), reply, Reply.text("ok")],
        Prompt(name="PN", model="M", system=SYSTEM, reasoning=Reasoning(include=False)),
        chat_agent("noreason", "PN"),
    )
    replay = await env.thread("chat")
    await env.turn(replay, "hello")
    await env.turn(replay, "again")
    (carried,) = assistants(env.provider.requests[1])
    assert (carried.content, carried.reasoning_content) == ("Hi", "think")
    assert carried.reasoning_details == DETAILS

    excluded = await env.thread("noreason")
    await env.turn(excluded, "hello")
    await env.turn(excluded, "again")
    (bare,) = assistants(env.provider.requests[3])
    assert (bare.content, bare.reasoning_content, bare.reasoning_details) == ("Hi", None, None)
    kept = (await stored(excluded))[1]
    assert kept.reasoning_content == "think" and kept.reasoning_details == json_compact(DETAILS)


async def test_c03_039_filtered_out_message_carries_no_reasoning(make_env: Any) -> None:
    """C03-039: ``filter_messages`` drops the message with reasoning → no reasoning of it
    is in the request."""

    @hook("filter_messages")
    def drop_reasoned(state: Any, messages: list[Message]) -> list[Message]:
        return [m for m in messages if not m.reasoning_content]

    env = await make_env(
        [Reply.reasoning("Hi", "think", DETAILS), Reply.text("ok")],
        drop_reasoned,
        agent={"hooks": ("drop_reasoned",)},
    )
    state = await env.thread()
    await env.turn(state, "hello")
    await env.turn(state, "again")
    second = env.provider.requests[1]
    assert shape(second) == [("system", SYSTEM), ("user", "hello"), ("user", "again")]
    dumped = json.dumps([m.model_dump() for m in second.messages])
    assert "think" not in dumped and "anthropic-claude-v1" not in dumped


async def test_c03_040_two_prompt_agent_replays_only_own_reasoning(make_env: Any) -> None:
    """C03-040: two-prompt agent, side B acting → side A's messages (presented as
    ``user``) carry no reasoning; side B's own messages with reasoning (presented as
    ``assistant``) carry theirs. ``max_session_turns=2`` ends the run after A, B, A, B."""
    pa = ScriptedProvider([Reply.reasoning("a1", "ta1"), Reply.reasoning("a2", "ta2")])
    pb = ScriptedProvider([Reply.reasoning("b1", "tb1"), Reply.reasoning("b2", "tb2")])
    env = await make_env(
        None,
        Model(name="MA", provider=pa, model="scripted-a"),
        Model(name="MB", provider=pb, model="scripted-b"),
        Prompt(name="PA", model="MA", system="You are A."),
        Prompt(name="PB", model="MB", system="You are B."),
        Agent(
            name="duo",
            type="dual_ai",
            side_a=Side(prompt="PA", label="A"),
            side_b=Side(prompt="PB", label="B"),
            max_session_turns=2,
        ),
    )
    state = await env.thread("duo")
    await env.turn(state, "start")
    assert (len(pa.requests), len(pb.requests)) == (2, 2)
    b2 = pb.requests[1]
    assert shape(b2) == [
        ("system", "You are B."),
        ("assistant", "start"),
        ("user", "a1"),
        ("assistant", "b1"),
        ("user", "a2"),
    ]
    own = assistants(b2)
    assert [(m.content, m.reasoning_content) for m in own] == [("start", None), ("b1", "tb1")]
    dumped = json.dumps([m.model_dump() for m in b2.messages])
    assert "ta1" not in dumped and "ta2" not in dumped
    a2 = pa.requests[1]
    assert [(m.content, m.reasoning_content) for m in assistants(a2)] == [("a1", "ta1")]
    assert "tb1" not in json.dumps([m.model_dump() for m in a2.messages])
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "max_session_turns")


async def test_c03_041_foreign_reasoning_details_not_sent_to_openai(make_env: Any) -> None:
    """C03-041: stored ``reasoning_details`` with ``format: "anthropic-claude-v1"``,
    request served by the ``openai`` adapter (dialect ``openai``) → the wire request
    carries no reasoning details; the stored text is unchanged.

    The second turn's primary model fails (one attempt), so the request is served by its
    fallback: a real ``OpenAIChatProvider`` talking to the fake HTTP server of the
    provider tests.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "providers"))
    fake = importlib.import_module("fake_openai")
    from threadloom.providers.openai_chat import OpenAIChatProvider

    async with fake.FakeOpenAIServer() as server:
        adapter = OpenAIChatProvider(api_key="sk-test", base_url=server.base_url, dialect="openai")
        env = await make_env(
            [Reply.reasoning("Hi", "think", DETAILS), Reply.error("primary down")],
            Model(name="O", provider=adapter, model="gpt-fake"),
            model={"fallbacks": ("O",), "max_attempts": 1},
        )
        state = await env.thread()
        await env.turn(state, "hello")
        server.enqueue(fake.chat_text_stream("from openai"))
        await env.turn(state, "again")
        body = server.last_body
    (assistant,) = [m for m in body["messages"] if m["role"] == "assistant"]
    assert assistant["content"] == "Hi"
    assert not {"reasoning_details", "reasoning", "reasoning_content"} & set(assistant)
    assert "anthropic-claude-v1" not in json.dumps(body)
    messages = await stored(state)
    assert messages[1].reasoning_details == json_compact(DETAILS)
    assert messages[1].reasoning_content == "think"
    assert (messages[-1].role, messages[-1].content) == ("assistant", "from openai")


# --------------------------------------------------------------------------------------
# Spec 03: tool hooks (§3.6.10–§3.6.14)


async def test_c03_042_drop_removes_call_and_maybe_message(make_env: Any) -> None:
    """C03-042: ``after_tool_call_success`` returning ``DROP`` for the only call of a
    content-less assistant message → that message is deleted and no tool result is
    stored; for one of two calls → the message's ``tool_calls`` keeps only the other call
    and one result is stored."""

    @hook("after_tool_call_success")
    def dropper(state: Any, call: Any, result: Any) -> Any:
        return DROP if "drop" in call.function.arguments else None

    env = await make_env(
        [
            Reply.tool_calls(Call("echo", {"v": "drop"}, id="call_d1")),
            Reply.text("done"),
            Reply.tool_calls(
                Call("echo", {"v": "drop"}, id="call_d2"), Call("echo", {"v": "keep"}, id="call_k")
            ),
            Reply.text("done2"),
        ],
        dropper,
        agent={"hooks": ("dropper",)},
    )
    only = await env.thread()
    sub = env.rt.events.subscribe(only.thread_id)
    await env.turn(only, "go")
    events = sub.drain()
    sub.close()
    issued = {
        e.data["message"]["id"]
        for e in events
        if e.kind == "message" and e.data["message"]["tool_calls"]
    }
    assert len(issued) == 1
    (issuer,) = issued
    assert await only.get_message(issuer) is None
    assert [e.data["message_id"] for e in events if e.kind == "message_deleted"] == [issuer]
    assert [(m.role, m.content) for m in await stored(only)] == [
        ("user", "go"),
        ("assistant", "done"),
    ]

    two = await env.thread()
    await env.turn(two, "go")
    messages = await stored(two)
    (issuing,) = [m for m in messages if m.tool_calls]
    assert [c.id for c in issuing.decoded_tool_calls()] == ["call_k"]
    tool_rows = [(m.tool_call_id, m.content) for m in messages if m.role == "tool"]
    assert tool_rows == [("call_k", "echo keep")]


async def test_c03_043_success_hook_returning_none_keeps_result(make_env: Any) -> None:
    """C03-043: ``after_tool_call_success`` returning ``None`` → the result is stored
    unchanged."""
    seen: list[tuple[str, str | None]] = []

    @hook("after_tool_call_success")
    def look(state: Any, call: Any, result: Any) -> None:
        seen.append((result.status, result.result))
        result.result = "mutated in place"  # discarded: the hook returns None

    env = await make_env(
        [Reply.tool_calls(Call("echo", {"v": 1})), Reply.text("done")],
        look,
        agent={"hooks": ("look",)},
    )
    state = await env.thread()
    await env.turn(state, "go")
    assert seen == [("success", "echo 1")]
    (result,) = [m for m in await stored(state) if m.role == "tool"]
    assert (result.content, result.tool_status) == ("echo 1", "success")


async def test_c03_044_failure_hook_turns_error_into_success(make_env: Any) -> None:
    """C03-044: ``after_tool_call_failure`` returning ``{"status": "success", "result":
    "recovered"}`` → stored ``tool_status == "success"``, content from "recovered"."""
    seen: list[tuple[str, str, str | None]] = []

    @tool
    def fragile() -> str:
        """Always fails."""
        raise RuntimeError("kaput")

    @hook("after_tool_call_failure")
    def rescue(state: Any, call: Any, result: Any) -> dict[str, str]:
        seen.append(("failure", result.status, result.error))
        return {"status": "success", "result": "recovered"}

    @hook("after_tool_call_success")
    def success(state: Any, call: Any, result: Any) -> None:
        seen.append(("success", result.status, result.result))

    env = await make_env(
        [Reply.tool_calls(Call("fragile", {})), Reply.text("done")],
        fragile,
        rescue,
        success,
        tools=("fragile",),
        agent={"hooks": ("rescue", "success")},
    )
    state = await env.thread()
    await env.turn(state, "go")
    assert seen == [("failure", "error", "kaput")]
    (result,) = [m for m in await stored(state) if m.role == "tool"]
    assert (result.tool_status, result.content) == ("success", "recovered")


async def test_c03_045_tool_hook_order_and_events(make_env: Any) -> None:
    """C03-045: hooks recording order → ``tool_call_started`` before ``tool_call_done``
    before ``after_tool_call_*`` before ``before_store_tool_result`` before
    ``before_create_message`` of the tool result; events ``tool_call_started`` and
    ``tool_call_done {id, name, status}`` are emitted."""
    order: list[str] = []

    @hook("tool_call_started")
    def started(state: Any, call: Any, progress: Any) -> None:
        order.append(f"tool_call_started:{call.id}")

    @hook("tool_call_done")
    def done(state: Any, call: Any, result: Any) -> None:
        order.append(f"tool_call_done:{call.id}:{result.status}")

    @hook("after_tool_call_success")
    def success(state: Any, call: Any, result: Any) -> None:
        order.append(f"after_tool_call_success:{call.id}")

    @hook("before_store_tool_result")
    def store(state: Any, call: Any, result: Any) -> None:
        order.append(f"before_store_tool_result:{call.id}")

    @hook("before_create_message")
    def create(state: Any, message: Message) -> None:
        if message.role == "tool":
            order.append(f"before_create_message:{message.tool_call_id}")

    env = await make_env(
        [Reply.tool_calls(Call("echo", {"v": 1}, id="call_1")), Reply.text("done")],
        started,
        done,
        success,
        store,
        create,
        agent={"hooks": ("started", "done", "success", "store", "create")},
    )
    state = await env.thread()
    sub = env.rt.events.subscribe(state.thread_id, kinds=["event"])
    await env.turn(state, "go")
    events = [(e.data["event_type"], e.data["data"]) for e in sub.drain()]
    sub.close()
    assert order == [
        "tool_call_started:call_1",
        "tool_call_done:call_1:success",
        "after_tool_call_success:call_1",
        "before_store_tool_result:call_1",
        "before_create_message:call_1",
    ]
    issuer = next(m for m in await stored(state) if m.tool_calls)
    assert [t for t, _ in events] == ["tool_call_started", "tool_call_done"]
    started_data, done_data = (d for _, d in events)
    assert {k: started_data[k] for k in ("id", "name", "message_id", "depth")} == {
        "id": "call_1",
        "name": "echo",
        "message_id": issuer.id,
        "depth": 0,
    }
    assert {k: done_data[k] for k in ("id", "name", "status", "message_id", "depth")} == {
        "id": "call_1",
        "name": "echo",
        "status": "success",
        "message_id": issuer.id,
        "depth": 0,
    }


async def test_c03_046_call_to_tool_not_offered_runs_only_storage_hooks(
    make_env: Any,
) -> None:
    """C03-046: a call to a tool not offered to P → only ``before_store_tool_result`` and
    the create hooks run for it; no ``tool_call_done`` (neither hook nor event).

    Reading: ``tool_call_started`` is announced once per model tool call while the
    response streams (spec 03 §3.6.12, spec 04 §4.26), before the allow-list is applied,
    so it is not asserted either way here.
    """
    ran: list[str] = []

    @tool
    def secret() -> str:
        """Registered but not offered to P."""
        return "secret"

    def recorder(name: str) -> Any:
        @hook(name, id=f"rec_{name}")
        def record(state: Any, *args: Any) -> None:
            if name.endswith("_create_message") and args[0].role != "tool":
                return
            ran.append(name)

        return record

    names = (
        "tool_call_done",
        "after_tool_call_success",
        "after_tool_call_failure",
        "before_store_tool_result",
        "before_create_message",
        "after_create_message",
    )
    env = await make_env(
        [Reply.tool_calls(Call("secret", {}, id="call_s")), Reply.text("done")],
        secret,
        *[recorder(n) for n in names],
        agent={"hooks": tuple(f"rec_{n}" for n in names)},
    )
    state = await env.thread()
    sub = env.rt.events.subscribe(state.thread_id, kinds=["event"])
    await env.turn(state, "go")
    event_types = [e.data["event_type"] for e in sub.drain()]
    sub.close()
    assert ran == ["before_store_tool_result", "before_create_message", "after_create_message"]
    assert "tool_call_done" not in event_types
    (result,) = [m for m in await stored(state) if m.role == "tool"]
    assert result.tool_status == "error"
    assert result.content == (
        'Failed to execute tool: Tool "secret" is not available for this prompt. You can '
        "only use tools that were explicitly configured for this prompt."
    )


async def test_c03_047_before_store_tool_result_rewrites_text(make_env: Any) -> None:
    """C03-047: ``before_store_tool_result`` rewriting the result text → the stored
    ``tool`` message uses the rewritten text (and so does the next request)."""

    @hook("before_store_tool_result")
    def rewrite(state: Any, call: Any, result: Any) -> dict[str, str]:
        return {"result": f"REWRITTEN ({result.result})"}

    env = await make_env(
        [Reply.tool_calls(Call("echo", {"v": 1})), Reply.text("done")],
        rewrite,
        agent={"hooks": ("rewrite",)},
    )
    state = await env.thread()
    await env.turn(state, "go")
    (result,) = [m for m in await stored(state) if m.role == "tool"]
    assert result.content == "REWRITTEN (echo 1)"
    assert ("tool", "REWRITTEN (echo 1)") in shape(env.provider.requests[1])


async def test_c03_048_finalisation_hooks(make_env: Any) -> None:
    """C03-048: ``before_create_message`` upper-casing content → the final assistant
    content is stored upper-cased; ``before_update_message`` at finalisation receives
    exactly the keys ``content, tool_calls, log_id, status, reasoning_content,
    reasoning_details, attachments``; ``after_update_message`` runs once."""
    updates_seen: list[tuple[str, dict[str, Any]]] = []
    updated: list[Message] = []

    @hook("before_create_message")
    def upper(state: Any, message: Message) -> dict[str, str] | None:
        return {"content": message.content.upper()} if message.content else None

    @hook("before_update_message")
    def before_update(state: Any, message_id: str, updates: dict[str, Any]) -> None:
        updates_seen.append((message_id, dict(updates)))

    @hook("after_update_message")
    def after_update(state: Any, message: Message) -> None:
        updated.append(message)

    env = await make_env(
        [Reply.text("hi there")],
        upper,
        before_update,
        after_update,
        agent={"hooks": ("upper", "before_update", "after_update")},
    )
    state = await env.thread()
    await env.turn(state, "hello")
    user, assistant = await stored(state)
    assert (user.content, assistant.content) == ("HELLO", "HI THERE")
    (message_id, updates) = updates_seen[0]
    assert len(updates_seen) == 1 and message_id == assistant.id
    assert set(updates) == {
        "content",
        "tool_calls",
        "log_id",
        "status",
        "reasoning_content",
        "reasoning_details",
        "attachments",
    }
    assert (updates["content"], updates["status"]) == ("HI THERE", "completed")
    assert updates["log_id"] == assistant.log_id
    assert len(updated) == 1
    assert (updated[0].id, updated[0].content) == (assistant.id, "HI THERE")


async def test_a_create_hook_returning_the_message_it_got_keeps_every_message(
    make_env: Any,
) -> None:
    """Spec 03 §3.6.6: a ``before_create_message`` hook that returns the message it was given
    changes nothing — also for the pending model message, whose content is ``None`` until it
    is finalised (spec 01 §1.4.13 rule 10); no hook error is recorded. A content a hook
    gives a pending message is not kept: it is published and stored without one, and the
    stored answer is the model's."""
    seen: list[tuple[str, str]] = []

    @hook("before_create_message")
    def same(state: Any, message: Message) -> Message:
        seen.append((message.role, message.status))
        return message

    @hook("before_create_message")
    def fill(state: Any, message: Message) -> dict[str, str] | None:
        return {"content": "not while pending"} if message.status == "pending" else None

    env = await make_env(
        [Reply.tool_calls(Call("echo", {"v": 1})), Reply.text("done")],
        same,
        fill,
        agent={"hooks": ("same", "fill")},
    )
    state = await env.thread()
    published = env.rt.events.subscribe(state.thread_id, kinds=["message"])
    await env.turn(state, "go")
    assert seen.count(("assistant", "pending")) == 2
    assert [(m.role, m.content, m.status) for m in await stored(state)] == [
        ("user", "go", "completed"),
        ("assistant", None, "completed"),
        ("tool", "echo 1", "completed"),
        ("assistant", "done", "completed"),
    ]
    pending = [
        m
        for m in (e.data["message"] for e in published.drain())
        if m["role"] == "assistant" and m["status"] == "pending"
    ]
    assert len(pending) == 2 and all(m["content"] is None for m in pending), pending
    rows = await env.rt.store.list_logs(state.thread_id, limit=None)
    assert not [r for r in rows if r.error_type == "hook_error"], [r.error for r in rows]


async def test_c03_049_concurrent_results_stored_in_call_order(make_env: Any) -> None:
    """C03-049: two concurrent tool calls where the second finishes first → results are
    stored in call order and their create hooks run in call order."""
    finished: list[str] = []
    created: list[tuple[str, str | None]] = []

    @tool
    async def sleepy(tag: str, delay: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(delay)
        finished.append(tag)
        return tag

    @hook("before_create_message")
    def before(state: Any, message: Message) -> None:
        if message.role == "tool":
            created.append(("before", message.tool_call_id))

    @hook("after_create_message")
    def after(state: Any, message: Message) -> None:
        if message.role == "tool":
            created.append(("after", message.tool_call_id))

    env = await make_env(
        [
            Reply.tool_calls(
                Call("sleepy", {"tag": "first", "delay": 0.2}, id="call_first"),
                Call("sleepy", {"tag": "second", "delay": 0.0}, id="call_second"),
            ),
            Reply.text("done"),
        ],
        sleepy,
        before,
        after,
        tools=("sleepy",),
        agent={"hooks": ("before", "after")},
    )
    state = await env.thread()
    await env.turn(state, "go")
    assert finished == ["second", "first"]
    results = [(m.tool_call_id, m.content) for m in await stored(state) if m.role == "tool"]
    assert results == [("call_first", "first"), ("call_second", "second")]
    assert created == [
        ("before", "call_first"),
        ("after", "call_first"),
        ("before", "call_second"),
        ("after", "call_second"),
    ]


async def test_c03_050_queued_entries_delivered_with_create_hooks_in_order(
    make_env: Any,
) -> None:
    """C03-050: three queued entries delivered in one step → ``before_create_message``
    and ``after_create_message`` run once per entry, in queue order. The entries are
    queued while a tool of the run blocks, so the next step delivers all three."""
    created: list[tuple[str, str, str | None]] = []
    blocker = Blocker()
    env = await make_env(
        [Reply.tool_calls(Call("block", {})), Reply.text("done")],
        blocker.tool(),
        *create_recorders(created),
        tools=("block",),
        agent={"hooks": ("rec_before", "rec_after")},
    )
    state = await env.thread()
    await env.rt.send_message(state.thread_id, "go")
    await asyncio.wait_for(blocker.started.wait(), WAIT)
    entries = [(await state.queue_message(role="user", content=f"e{i}")).id for i in (1, 2, 3)]
    blocker.release.set()
    await env.rt.wait_idle(state.thread_id, timeout=WAIT)
    for which in ("before", "after"):
        delivered = [c for w, _, c in created if w == which and c in ("e1", "e2", "e3")]
        assert delivered == ["e1", "e2", "e3"]
    assert [i for w, i, c in created if w == "after" and c in ("e1", "e2", "e3")] == entries
    assert [t for r, t in shape(env.provider.requests[1]) if r == "user"] == [
        "go",
        "e1",
        "e2",
        "e3",
    ]


async def test_c03_051_stop_settlement_runs_no_hooks(make_env: Any) -> None:
    """C03-051: ``stop()`` during a tool call → no create or update hook runs for the
    failure flips, the "stopped by user" results or the stop note. A second thread is
    stopped while its response streams, so its pending message is flipped to ``failed``
    (again without hooks)."""
    calls: list[tuple[str, str | None, str | None]] = []

    @hook("before_create_message")
    def bc(state: Any, message: Message) -> None:
        calls.append(("before_create", message.role, message.content))

    @hook("after_create_message")
    def ac(state: Any, message: Message) -> None:
        calls.append(("after_create", message.role, message.content))

    @hook("before_update_message")
    def bu(state: Any, message_id: str, updates: dict[str, Any]) -> None:
        calls.append(("before_update", message_id, updates.get("status")))

    @hook("after_update_message")
    def au(state: Any, message: Message) -> None:
        calls.append(("after_update", message.id, message.status))

    blocker = Blocker()
    env = await make_env(
        [
            Reply.tool_calls(Call("block", {}, id="call_blocked")),
            Reply(content="abcdefghijklmnop", chunk_size=1, chunk_delay=0.05),
        ],
        blocker.tool(),
        bc,
        ac,
        bu,
        au,
        tools=("block",),
        agent={"hooks": ("bc", "ac", "bu", "au")},
    )
    state = await env.thread()
    await env.rt.send_message(state.thread_id, "go")
    await asyncio.wait_for(blocker.started.wait(), WAIT)
    mark = len(calls)
    assert await env.rt.stop(state.thread_id) is True
    assert calls[mark:] == []
    messages = await stored(state)
    (result,) = [m for m in messages if m.role == "tool"]
    assert (result.tool_call_id, result.tool_status, result.content) == (
        "call_blocked",
        "error",
        "Execution stopped by user",
    )
    note = messages[-1]
    assert (note.role, note.content) == ("system", "Execution stopped by user")
    assert note.metadata == {"status_kind": "stopped_by_user"}
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "aborted_by_user")

    streaming = await env.thread()
    sub = env.rt.events.subscribe(streaming.thread_id)
    await env.rt.send_message(streaming.thread_id, "go")
    chunk = await next_event(sub, lambda e: e.kind == "message_chunk")
    sub.close()
    mark = len(calls)
    assert await env.rt.stop(streaming.thread_id) is True
    assert calls[mark:] == []
    failed = await streaming.get_message(chunk.data["message_id"])
    assert failed is not None and failed.status == "failed"
    assert failed.content and "abcdefghijklmnop".startswith(failed.content)


# --------------------------------------------------------------------------------------
# Spec 02 [engine] cases


async def test_c02_027_injected_message_is_last_in_history(make_env: Any) -> None:
    """C02-027: a tool that injects a message and then reads ``state.execution.message_
    history`` → the message is the last element; a second tool of the same response also
    sees it (it waits until the first tool's ``inject_message`` returned: calls run
    concurrently)."""
    seen: dict[str, Any] = {}
    written = asyncio.Event()

    @tool
    async def writer(state: Any) -> str:
        """Inject and read."""
        message = await state.inject_message(role="user", content="x")
        seen["id"] = message.id
        seen["last"] = state.execution.message_history[-1].id
        written.set()
        return "wrote"

    @tool
    async def reader(state: Any) -> str:
        """Read the live history."""
        await asyncio.wait_for(written.wait(), WAIT)
        seen["reader"] = [m.id for m in state.execution.message_history]
        return "read"

    env = await make_env(
        [Reply.tool_calls(Call("writer", {}), Call("reader", {})), Reply.text("done")],
        writer,
        reader,
        tools=("writer", "reader"),
    )
    state = await env.thread()
    await env.turn(state, "go")
    assert seen["last"] == seen["id"]
    assert seen["id"] in seen["reader"]


async def test_c02_033_queue_message_on_idle_thread_starts_turn(make_env: Any) -> None:
    """C02-033: idle T → ``queue_message(role="user", content="q")`` → a turn starts; "q"
    is stored with the entry's id, ``status == "completed"``, no queue keys in metadata,
    created before the first model request; the stored record's ``message`` event follows
    the pending view's ``message`` event for the same id."""
    env = await make_env([Reply.text("answer")])
    state = await env.thread()
    sub = env.rt.events.subscribe(state.thread_id, kinds=["message"])
    view = await state.queue_message(role="user", content="q")
    await env.rt.wait_idle(state.thread_id, timeout=WAIT)
    events = [e for e in sub.drain() if e.data["message"]["id"] == view.id]
    sub.close()
    q, answer = await stored(state)
    assert (q.id, q.role, q.content, q.status) == (view.id, "user", "q", "completed")
    assert not set(q.metadata or {}) & set(QUEUE_KEYS)
    assert shape(env.provider.requests[0]) == [("system", SYSTEM), ("user", "q")]
    assert q.created_at < answer.created_at
    assert [e.data["message"]["status"] for e in events] == ["pending", "completed"]
    assert events[0].data["message"]["metadata"]["queued"] is True
    assert events[0].seq is not None and events[1].seq is not None
    assert events[0].seq < events[1].seq
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "stop_on_response")


async def test_c02_034_entries_queued_during_tool_join_same_execution(make_env: Any) -> None:
    """C02-034: T running a long tool → two entries queued during the tool → both are
    stored, in order, before the next model request of the same execution; the request
    contains them. "Same execution": the delivering step runs under the tool's run id."""
    delivered_in: list[str] = []
    blocker = Blocker()

    @hook("before_create_message")
    def run_of(state: Any, message: Message) -> None:
        if message.content in ("e1", "e2"):
            delivered_in.append(state.execution.run_id)

    env = await make_env(
        [Reply.tool_calls(Call("block", {})), Reply.text("done")],
        blocker.tool(),
        run_of,
        tools=("block",),
        agent={"hooks": ("run_of",)},
    )
    state = await env.thread()
    await env.rt.send_message(state.thread_id, "go")
    await asyncio.wait_for(blocker.started.wait(), WAIT)
    first = await state.queue_message(role="user", content="e1")
    second = await state.queue_message(role="user", content="e2")
    blocker.release.set()
    await env.rt.wait_idle(state.thread_id, timeout=WAIT)
    messages = await stored(state)
    assert [m.content for m in messages] == ["go", None, "released", "e1", "e2", "done"]
    assert [messages[3].id, messages[4].id] == [first.id, second.id]
    assert len(env.provider.requests) == 2
    assert shape(env.provider.requests[1])[-2:] == [("user", "e1"), ("user", "e2")]
    assert delivered_in == blocker.run_ids * 2


async def test_c02_035_assistant_entry_parks_for_the_human(make_env: Any) -> None:
    """C02-035: idle T → ``queue_message(role="assistant", content="x")`` → side B (human)
    is to act: the run parks with reason ``awaiting_human``; no model request."""
    env = await make_env([Reply.text("never")])
    state = await env.thread()
    view = await state.queue_message(role="assistant", content="x")
    await env.rt.wait_idle(state.thread_id, timeout=WAIT)
    (x,) = await stored(state)
    assert (x.id, x.role, x.content, x.status) == (view.id, "assistant", "x", "completed")
    assert env.provider.requests == []
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "awaiting_human")


async def test_c02_036_queue_clears_stop_flag_subagent_traffic_does_not(
    make_env: Any,
) -> None:
    """C02-036: T stopped (stop flag set) → ``queue_message(role="assistant",
    content="q")`` → the stop flag is cleared and a run starts that delivers "q"; an entry
    queued while the flag is set by a child's delivery (``queue_source`` ``"subagent"``,
    here from the child's ``notify_parent``) stays pending and no run starts until a
    send, a ``queue_message()`` or a continue."""
    env = await make_env([Reply.text("answer")])
    state = await env.thread()
    tid = state.thread_id
    await env.rt.stop(tid)
    row = await env.rt.store.get_thread(tid)
    assert row is not None and row.stopped is True
    view = await state.queue_message(role="assistant", content="q")
    await env.rt.wait_idle(tid, timeout=WAIT)
    row = await env.rt.store.get_thread(tid)
    assert row is not None and row.stopped is False
    (q,) = await stored(state)
    assert (q.id, q.status) == (view.id, "completed")
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "awaiting_human")

    await env.rt.stop(tid)
    child = await env.rt.create_thread("chat", parent=tid)
    await child.notify_parent("50%")
    await asyncio.sleep(0.1)
    assert not env.rt.running(tid)
    (waiting,) = [m for m in await stored(state) if m.status == "pending"]
    assert waiting.metadata is not None and waiting.metadata["queue_source"] == "subagent"
    assert waiting.content == "50%" and waiting.subagent_id == child.thread_id
    assert await state.status() == status
    assert env.provider.requests == []
    await state.queue_message(role="user", content="go on")
    await env.rt.wait_idle(tid, timeout=WAIT)
    delivered = await state.get_message(waiting.id)
    assert delivered is not None and delivered.status == "completed"
    assert shape(env.provider.requests[0])[-2:] == [("user", "50%"), ("user", "go on")]


async def test_c02_043_streaming_model_message_cannot_change(make_env: Any) -> None:
    """C02-043 (engine part): a model message whose request is still streaming →
    ``update_message(id, content="x")`` and ``delete_message(id)`` raise
    ``MessageGenerating``; nothing changes (it reads ``pending`` with ``content None``
    meanwhile and is finalised with the full response)."""
    text = "streaming slowly"
    env = await make_env([Reply(content=text, chunk_size=2, chunk_delay=0.03)])
    state = await env.thread()
    sub = env.rt.events.subscribe(state.thread_id)
    await env.rt.send_message(state.thread_id, "hello")
    chunk = await next_event(sub, lambda e: e.kind == "message_chunk")
    sub.close()
    message_id = chunk.data["message_id"]
    with pytest.raises(MessageGenerating):
        await state.update_message(message_id, content="x")
    with pytest.raises(MessageGenerating):
        await state.delete_message(message_id)
    during = await state.get_message(message_id)
    assert during is not None and (during.status, during.content) == ("pending", None)
    await env.rt.wait_idle(state.thread_id, timeout=WAIT)
    final = await state.get_message(message_id)
    assert final is not None and (final.status, final.content) == ("completed", text)


async def test_c02_078_terminate_during_slow_response(make_env: Any) -> None:
    """C02-078: T running a slow scripted response → ``terminate()`` → the run ends; the
    pending model message is ``failed``; ``status()`` becomes ``{state: "idle", reason:
    "terminated"}``."""
    env = await make_env([Reply.text("too late", delay=5)])
    state = await env.thread()
    sub = env.rt.events.subscribe(state.thread_id)
    await env.rt.send_message(state.thread_id, "hello")
    pending = await next_event(sub, is_model_pending)
    sub.close()
    at = await env.rt.terminate(state.thread_id)
    assert isinstance(at, int)
    assert not env.rt.running(state.thread_id)
    message = await state.get_message(pending.data["message"]["id"])
    assert message is not None and (message.status, message.content) == ("failed", None)
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "terminated")
    record = await env.rt.get_thread_record(state.thread_id)
    assert record.terminated == at
    note = (await stored(state))[-1]  # the settlement's note (spec 04 §4.20.1 step 3.4)
    assert (note.role, note.content) == ("system", "Thread terminated")
    assert note.metadata == {"status_kind": "terminated"}


async def test_c02_084_notify_parent_marks_the_tool_result(make_env: Any) -> None:
    """C02-084: a tool of child C calls ``notify_parent("50%")`` → C's stored tool result
    has ``metadata.parent_notification is True`` and ``parent_notification_content ==
    "50%"``. (The child is created with ``create_thread(parent=...)``; it runs agent
    ``kid`` on its own scripted model. The parent answers with the default reply.)"""

    @tool
    async def report(state: Any) -> str:
        """Tell the parent."""
        await state.notify_parent("50%")
        return "reported"

    kid_provider = ScriptedProvider(
        [Reply.tool_calls(Call("report", {}, id="call_r")), Reply.text("child done")]
    )
    env = await make_env(
        None,
        report,
        Model(name="MK", provider=kid_provider, model="scripted-kid"),
        Prompt(name="PK", model="MK", system="You are a child.", tools=("report",)),
        chat_agent("kid", "PK"),
    )
    parent = await env.thread()
    child = await env.rt.create_thread("kid", parent=parent.thread_id)
    await env.turn(child, "work")
    await env.rt.wait_idle(parent.thread_id, timeout=WAIT)
    (result,) = [m for m in await stored(child) if m.role == "tool"]
    assert result.tool_call_id == "call_r" and result.content == "reported"
    assert result.metadata is not None
    assert result.metadata["parent_notification"] is True
    assert result.metadata["parent_notification_content"] == "50%"
    (note,) = [m for m in await stored(parent) if m.subagent_id == child.thread_id]
    assert (note.content, note.silent, note.status) == ("50%", True, "completed")


async def test_c06_012_notify_parent_on_a_root_thread_inside_a_tool(make_env: Any) -> None:
    """C06-012: ``notify_parent`` on a root thread inside a tool → nothing queued anywhere;
    the tool result still carries the ``parent_notification`` metadata."""

    @tool
    async def report(state: Any) -> str:
        """Tell the parent, if there is one."""
        await state.notify_parent("50%")
        return "reported"

    env = await make_env(
        [Reply.tool_calls(Call("report", {}, id="call_r")), Reply.text("done")],
        report,
        tools=("report",),
    )
    bystander = await env.thread()
    root = await env.thread()
    await env.turn(root, "work")
    (result,) = [m for m in await stored(root) if m.role == "tool"]
    assert (result.content, result.tool_status) == ("reported", "success")
    assert result.metadata is not None
    assert result.metadata["parent_notification"] is True
    assert result.metadata["parent_notification_content"] == "50%"
    # nothing queued: not on the root itself, not on any other thread of the store
    for thread_id in (root.thread_id, bystander.thread_id):
        assert await env.rt.store.list_queue(thread_id) == []
    assert [m.role for m in await stored(root)] == ["user", "assistant", "tool", "assistant"]
    assert await stored(bystander) == []


async def test_c02_087_context_shared_in_run_and_reset_per_run(make_env: Any) -> None:
    """C02-087 (without the sub-prompt part): a tool sets ``state.context["k"] = 1``; a
    later tool of the same run reads 1; the next run starts with ``context == {}``."""
    seen: list[dict[str, Any]] = []

    @tool
    def set_k(state: Any) -> str:
        """Set k."""
        state.context["k"] = 1
        return "set"

    @tool
    def read_k(state: Any) -> str:
        """Read the context."""
        seen.append(dict(state.context))
        return "read"

    env = await make_env(
        [
            Reply.tool_calls(Call("set_k", {})),
            Reply.tool_calls(Call("read_k", {})),
            Reply.text("done"),
            Reply.tool_calls(Call("read_k", {})),
            Reply.text("done again"),
        ],
        set_k,
        read_k,
        tools=("set_k", "read_k"),
    )
    state = await env.thread()
    await env.turn(state, "first run")
    await env.turn(state, "second run")
    assert seen == [{"k": 1}, {}]


# --------------------------------------------------------------------------------------
# Spec 01 [engine] cases


async def test_c01_021_delivered_entry_keeps_id_and_gets_new_stamp(make_env: Any) -> None:
    """C01-021: deliver a queue entry → the stored message keeps the entry id; its
    ``created_at`` is greater than every earlier stored message's; its metadata has none
    of ``queued``, ``queue_status``, ``queue_source``. The entry waits while a tool runs,
    so the tool result is stored after the enqueue and before the delivery."""
    blocker = Blocker()
    env = await make_env(
        [Reply.tool_calls(Call("block", {})), Reply.text("done")],
        blocker.tool(),
        tools=("block",),
    )
    state = await env.thread()
    await env.rt.send_message(state.thread_id, "go")
    await asyncio.wait_for(blocker.started.wait(), WAIT)
    view = await state.queue_message(role="user", content="later", metadata={"k": 1})
    blocker.release.set()
    await env.rt.wait_idle(state.thread_id, timeout=WAIT)
    messages = await stored(state)
    index = next(i for i, m in enumerate(messages) if m.id == view.id)
    delivered = messages[index]
    assert (delivered.status, delivered.content) == ("completed", "later")
    assert delivered.metadata == {"k": 1}
    assert index >= 3 and messages[index - 1].role == "tool"
    assert all(m.created_at < delivered.created_at for m in messages[:index])
    assert delivered.created_at > view.created_at


async def test_c01_023_run_status_reasons(make_env: Any) -> None:
    """C01-023: a run that ends with a text answer in a chat agent → status ``{state:
    "idle", reason: "stop_on_response"}``; a run whose model always errors → ``{state:
    "failed", reason: "step_error"}`` (both attempts fail; backoff shortened)."""
    env = await make_env([Reply.text("Hi"), Reply.error("boom"), Reply.error("boom")])
    state = await env.thread()
    await env.turn(state, "hello")
    status = await state.status()
    assert (status.state, status.reason) == ("idle", "stop_on_response")
    await env.turn(state, "again")
    status = await state.status()
    assert (status.state, status.reason) == ("failed", "step_error")
    assert len(env.provider.requests) == 3
    assert (await stored(state))[-1].status == "failed"


async def test_c01_024_reasoning_fields_none_when_absent(make_env: Any) -> None:
    """C01-024: a model response with reasoning text "think" and no details →
    ``reasoning_content == "think"``, ``reasoning_details is None``; a response with no
    reasoning → both ``None``; a response with empty reasoning text →
    ``reasoning_content is None``."""
    env = await make_env(
        [
            Reply.reasoning("one", "think"),
            Reply.text("two"),
            Reply(content="three", reasoning_content=""),
        ]
    )
    state = await env.thread()
    for text in ("a", "b", "c"):
        await env.turn(state, text)
    answers = [m for m in await stored(state) if m.role == "assistant"]
    assert [(m.content, m.reasoning_content, m.reasoning_details) for m in answers] == [
        ("one", "think", None),
        ("two", None, None),
        ("three", None, None),
    ]


async def test_c01_025_reasoning_details_stored_byte_for_byte(make_env: Any) -> None:
    """C01-025: a response with provider reasoning details → ``reasoning_details`` equals,
    byte for byte, the JSON text of what the adapter produced (compact, key order and
    non-ASCII kept, spec 01 §1.1.5), after a restart too."""
    details = [
        {"type": "reasoning.text", "text": "réflexion", "format": "anthropic-claude-v1", "z": 1},
        {"type": "reasoning.encrypted", "data": "QUJD==", "format": "anthropic-claude-v1"},
    ]
    expected = '[{"type":"reasoning.text","text":"réflexion","format":"anthropic-claude-v1",'
    expected += '"z":1},{"type":"reasoning.encrypted","data":"QUJD==","format":'
    expected += '"anthropic-claude-v1"}]'
    env = await make_env([Reply.reasoning("Hi", "hmm", details)])
    state = await env.thread()
    await env.turn(state, "hello")
    answer = (await stored(state))[1]
    assert answer.reasoning_details == expected
    rt = await env.reopen()
    again = await (await rt.thread(state.thread_id)).get_message(answer.id)
    assert again is not None and again.reasoning_details == expected


async def test_c01_040_entry_of_terminated_thread_never_delivered(make_env: Any) -> None:
    """C01-040 (engine half): a thread with a waiting queue entry is terminated → the
    entry's pending view reads ``queue_status == "cancelled"`` and it is never delivered:
    not by the terminated run, and not by the start-up wake of a reopened runtime."""
    blocker = Blocker()
    env = await make_env(
        [Reply.tool_calls(Call("block", {})), Reply.text("never")],
        blocker.tool(),
        tools=("block",),
    )
    state = await env.thread()
    await env.rt.send_message(state.thread_id, "go")
    await asyncio.wait_for(blocker.started.wait(), WAIT)
    view = await state.queue_message(role="user", content="waiting")
    await env.rt.terminate(state.thread_id)
    await env.rt.wait_idle(state.thread_id, timeout=WAIT)
    entry = await state.get_message(view.id)
    assert entry is not None and entry.status == "pending"
    assert entry.metadata is not None
    assert (entry.metadata["queued"], entry.metadata["queue_status"]) == (True, "cancelled")
    rt = await env.reopen()
    await asyncio.sleep(0.1)
    await rt.wait_idle(state.thread_id, timeout=WAIT)
    reopened = await rt.thread(state.thread_id)
    entry = await reopened.get_message(view.id)
    assert entry is not None and entry.status == "pending"
    assert entry.metadata is not None and entry.metadata["queue_status"] == "cancelled"
    assert len(env.provider.requests) == 1


async def test_c01_041_system_entry_delivered_as_system_message(make_env: Any) -> None:
    """C01-041 (engine half): queue an entry with ``role: "system"`` → delivered as a
    stored ``system`` message with the entry's id; as the last entry of its batch it makes
    side A act (spec 02 §2.6.3), and the request presents it as ``system``."""
    env = await make_env([Reply.text("noted")])
    state = await env.thread()
    view = await state.queue_message(role="system", content="sys note")
    assert view.role == "system"
    await env.rt.wait_idle(state.thread_id, timeout=WAIT)
    note, answer = await stored(state)
    assert (note.id, note.role, note.content, note.status) == (
        view.id,
        "system",
        "sys note",
        "completed",
    )
    assert (answer.role, answer.content) == ("assistant", "noted")
    assert shape(env.provider.requests[0]) == [("system", SYSTEM), ("system", "sys note")]
    assert isinstance(env.provider.requests[0].messages[1], SystemMessage)
    assert not any(isinstance(m, UserMessage) for m in env.provider.requests[0].messages)
