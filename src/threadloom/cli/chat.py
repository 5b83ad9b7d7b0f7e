"""``threadloom run``'s chat: what a run does, shown as it happens in the terminal.

Each message is labelled with its speaker (the side's label: ``Support:``, or ``Writer:`` and
``Critic:`` for the two sides of a ``dual_ai`` agent); text streams as it is generated; tool
calls show as ``⚙ name …`` and their outcome (a failed call with the error the model got);
a spinner runs while the model works (on a terminal); the end of a run says why in words, and
a failed run prints its cause on stderr.
The prompt has line editing and history (readline) when the input is a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.status import Status
from rich.text import Text

from threadloom.engine.run.runtime import Runtime
from threadloom.errors import ThreadloomError
from threadloom.thread.events import Subscription

#: Why a run ended, in the words the chat shows (``None``: nothing to say, the answer is
#: on the screen). A failed run shows its error instead (spec 01 §1.7.4).
REASON_WORDS: Mapping[str, str | None] = {
    "stop_on_response": None,
    "awaiting_human": None,
    "awaiting_approval": "a tool call waits for approval",
    "awaiting_client_tool": "a tool call waits for the client's result",
    "stop_tool": None,
    "session_stop": "the session ended",
    "session_fail": "the session ended without success",
    "state_stop_session": "the session was ended by code",
    "max_session_turns": "the session reached its limit of turns",
    "max_side_steps": "the agent reached its limit of steps for this turn",
    "max_total_steps": "the run reached its limit of steps",
    "hook_blocked": "a hook stopped the model request",
    "aborted_by_user": "stopped",
    "interrupted": "interrupted by a new message",
    "terminated": "the thread was terminated",
}


ERROR_SHOWN = 300
"""At most this many characters of a failed tool call's error on its line."""


def failure_text(status: Mapping[str, Any]) -> str:
    """The one line that says why a failed run failed: its error's message, else (a store
    written before failures kept their cause) the reason code."""
    error = status.get("error") or {}
    return str(error.get("message") or status.get("reason") or "unknown cause")


def ended_text(status: Mapping[str, Any]) -> str | None:
    """What the chat says when a run ends idle with this status (``None``: nothing)."""
    reason = status.get("reason")
    if reason is None:
        return None
    if reason in REASON_WORDS:
        return REASON_WORDS[reason]
    return f"the run ended ({reason})"


class Renderer:
    """Turns the bus events of one thread into terminal output."""

    def __init__(self, agent: Any, console: Console, errors: Console) -> None:
        self.agent = agent
        self.console = console
        self.errors = errors
        self.streaming: str | None = None
        self.streamed: set[str] = set()
        self.shown: set[str] = set()
        """Ids of the messages already on the screen (typed by the user, or printed)."""
        self.labels: dict[str, str] = {}
        self.failure: str | None = None
        """Why the last run failed (its status's error), ``None`` when it did not."""
        self.failed_calls: dict[str, str] = {}
        """Tool calls that failed (id: name), shown once their tool message arrives."""
        self._spinner: Status | None = None
        self.spins = console.is_terminal

    # -- labels ------------------------------------------------------------------------
    def side_label(self, side: str) -> str:
        definition = self.agent.side_a if side == "a" else self.agent.side_b
        label = getattr(definition, "label", None)
        if label:
            return str(label)
        if self.agent.type == "dual_ai":
            return "Side A" if side == "a" else "Side B"
        return "Agent" if side == "a" else "You"

    def you(self) -> str:
        """The label of what the user types: the human side's, or ``You`` beside two AI
        sides."""
        return "You" if self.agent.type == "dual_ai" else self.side_label("b")

    def speaker(self, message: Mapping[str, Any]) -> str:
        """The label of a message's speaker: its ``name``, else its side's label (side a
        speaks as ``assistant``, side b as ``user``)."""
        name = message.get("name")
        if name:
            return str(name)
        return self.side_label("a" if message.get("role") == "assistant" else "b")

    # -- the spinner -------------------------------------------------------------------
    def spin(self, text: str) -> None:
        if not self.spins or self.streaming is not None:
            return
        if self._spinner is None:
            self._spinner = self.console.status(Text(text, style="dim"), spinner="dots")
            self._spinner.start()
        else:
            self._spinner.update(Text(text, style="dim"))

    def still(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()
            self._spinner = None

    # -- output ------------------------------------------------------------------------
    def end_stream(self) -> None:
        if self.streaming is not None:
            self.console.print()
            self.streaming = None

    def say(self, label: str, text: str) -> None:
        self.still()
        self.end_stream()
        self.console.print(Text(f"{label}: ", style="bold cyan"), end="")
        self.console.print(text, soft_wrap=True, highlight=False, markup=False)

    def handle(self, kind: str, data: Mapping[str, Any]) -> None:
        if kind == "message_chunk":
            message_id = data["message_id"]
            if self.streaming != message_id:
                self.still()
                self.end_stream()
                self.streaming = message_id
                self.streamed.add(message_id)
                label = self.labels.get(message_id) or self.side_label("a")
                self.console.print(Text(f"{label}: ", style="bold cyan"), end="")
            self.console.print(data["chunk"], end="", soft_wrap=True, markup=False)
        elif kind == "reasoning_chunk":
            reasoning_id = "reasoning:" + data["message_id"]
            if self.streaming != reasoning_id:
                self.still()
                self.end_stream()
                self.streaming = reasoning_id
                self.console.print(Text("(thinking) ", style="dim"), end="")
            self.console.print(Text(data["chunk"], style="dim italic"), end="")
        elif kind == "event":
            self._tool_event(data)
        elif kind == "telemetry" and data.get("type") == "step_started":
            self.end_stream()
            self.spin(f"{self.side_label(str(data.get('side') or 'a'))} is thinking…")
        elif kind == "message":
            self._message(data.get("message") or {})
        elif kind == "status":
            self._status(data.get("status") or {})

    def _tool_event(self, data: Mapping[str, Any]) -> None:
        event = data.get("event_type")
        detail = data.get("data") or {}
        if event == "tool_call_started":
            self.still()
            self.end_stream()
            self.console.print(Text(f"  ⚙ {detail.get('name')} …", style="yellow"))
            self.spin(f"running {detail.get('name')}…")
        elif event == "tool_call_done":
            self.still()
            status = detail.get("status")
            if status == "error" and isinstance(detail.get("id"), str):
                # its line waits for the tool message, which says what the model was told
                self.failed_calls[detail["id"]] = str(detail.get("name"))
                return
            style = "green" if status == "success" else "red"
            self.console.print(Text(f"  ⚙ {detail.get('name')} → {status}", style=style))

    def _tool_failed(self, name: str, told: str | None) -> None:
        """The line of a failed tool call, with the error the model got (its first line)."""
        self.still()
        self.end_stream()
        line = f"  ⚙ {name} → error"
        first = told.strip().splitlines()[0] if told and told.strip() else ""
        if len(first) > ERROR_SHOWN:
            first = first[: ERROR_SHOWN - 1] + "…"
        if first:
            line += f": {first}"
        self.console.print(Text(line, style="red"), soft_wrap=True)

    def _flush_failed_calls(self) -> None:
        for name in self.failed_calls.values():
            self._tool_failed(name, None)
        self.failed_calls.clear()

    def _message(self, message: Mapping[str, Any]) -> None:
        message_id = message.get("id")
        role = message.get("role")
        if role == "tool" and message.get("tool_call_id") in self.failed_calls:
            name = self.failed_calls.pop(str(message["tool_call_id"]))
            content = message.get("content")
            self._tool_failed(name, content if isinstance(content, str) else None)
            return
        if not isinstance(message_id, str) or role not in ("assistant", "user"):
            return
        if message.get("depth"):
            return  # a sub-prompt's inner messages: its result shows as the tool's
        if message.get("status") == "pending" or message.get("name"):
            self.labels.setdefault(message_id, self.speaker(message))
        if message.get("status") != "completed" or message_id in self.shown:
            return
        if message_id in self.streamed:
            self.shown.add(message_id)
            self.end_stream()
            return
        content = message.get("content")
        if content and (role == "assistant" or self.agent.type == "dual_ai"):
            self.shown.add(message_id)
            self.say(self.labels.get(message_id) or self.speaker(message), str(content))

    def _status(self, status: Mapping[str, Any]) -> None:
        state = status.get("state")
        if state == "running":
            self.failure = None
            self.spin(f"{self.side_label('a')} is thinking…")
            return
        self.still()
        self.end_stream()
        self._flush_failed_calls()
        if state == "failed":
            self.failure = failure_text(status)
            self.errors.print(
                Text(f"The run failed: {self.failure}", style="bold red"), soft_wrap=True
            )
            log_id = (status.get("error") or {}).get("log_id")
            if log_id:
                self.errors.print(Text(f"  details: log row {log_id}", style="dim"))
            return
        words = ended_text(status)
        if words:
            self.console.print(Text(f"({words})", style="dim"))


async def _pump(subscription: Subscription, renderer: Renderer, done: asyncio.Event) -> None:
    async for event in subscription:
        renderer.handle(event.kind, event.data)
        if event.kind == "status" and (event.data.get("status") or {}).get("state") != "running":
            done.set()


def enable_line_editing() -> bool:
    """Arrow keys, history and the usual shortcuts at the prompt (readline), when the
    input is a terminal that has it."""
    import sys

    if not sys.stdin.isatty():
        return False
    try:
        import readline  # noqa: F401  (importing it is what gives input() line editing)
    except ImportError:  # pragma: no cover - Windows without pyreadline
        return False
    return True


def ask(prompt: str) -> str | None:
    try:
        return input(prompt)
    except EOFError:
        return None


async def _decide_parked(
    runtime: Runtime, thread_id: str, console: Console, interactive: bool
) -> bool:
    """A run parked for approval (spec 14): each pending call shown with its arguments,
    approved or rejected at the prompt; ``True`` when a decision was made (the run goes
    on). Not interactive (``-m``), or at end of input: nothing is decided."""
    state = await runtime.thread(thread_id)
    if (await state.status()).reason != "awaiting_approval":
        return False
    decided = False
    for approval in await state.get_approvals(pending_only=True):
        arguments = json.dumps(approval.arguments, ensure_ascii=False)
        console.print(Text(f"  ⏸ {approval.tool} {arguments}", style="yellow"), soft_wrap=True)
        if not interactive:
            continue
        answer = await asyncio.to_thread(ask, "  Approve this call? [y/N] ")
        if answer is None:
            return decided
        approve = answer.strip().lower() in ("y", "yes")
        reason = None
        if not approve:
            reason = (await asyncio.to_thread(ask, "  Reason (optional): ") or "").strip()
        try:
            await state.decide_approval(
                approval.tool_call_id,
                approve=approve,
                arguments_hash=approval.arguments_hash if approve else None,
                reason=reason or None,
                decided_by="cli",
            )
        except ThreadloomError as exc:  # decided elsewhere meanwhile
            console.print(Text(f"  ({exc})", style="dim"), soft_wrap=True)
            continue
        console.print(Text("  approved" if approve else "  rejected", style="dim"))
        decided = True
    return decided


async def _show_history(runtime: Runtime, thread_id: str, renderer: Renderer) -> None:
    """The last messages of a resumed thread, labelled as the chat shows them."""
    state = await runtime.thread(thread_id)
    page = await state.get_messages(order="desc", limit=10)
    for message in reversed(page.messages):
        if message.role in ("assistant", "user") and message.content and message.depth == 0:
            renderer.say(renderer.speaker(message.to_wire()), message.content)
            renderer.shown.add(message.id)


async def chat(
    project: Path,
    agent: str | None,
    store: str,
    thread_id: str | None,
    message: str | None,
    console: Console,
    errors: Console,
) -> str | None:
    """The chat; returns why the last run failed, ``None`` when it did not."""
    runtime = await Runtime.open(store, project=project)
    try:
        names = sorted(a.name for a in runtime.definitions.agents())
        listed = ", ".join(names) or "none"
        if thread_id is not None:
            record = await runtime.store.get_thread(thread_id)
            if record is None:
                raise typer.BadParameter(f"there is no thread {thread_id} in {store}")
            if agent is not None and agent != record.agent_id:
                raise typer.BadParameter(
                    f"thread {thread_id} belongs to agent {record.agent_id!r}, not {agent!r}"
                )
            agent = record.agent_id
        if agent is None:  # the one agent a user starts threads of, subagents aside
            primary = [a.name for a in runtime.definitions.primary_agents()]
            if len(primary) != 1:
                raise typer.BadParameter(
                    f"the project has {len(primary)} agents to start a thread of"
                    f" ({', '.join(primary) or 'none'}): choose one with --agent"
                )
            agent = primary[0]
        definition = runtime.definitions.agent(agent)
        if definition is None:
            raise typer.BadParameter(f"agent {agent!r} is not defined in {project} ({listed})")
        state = await runtime.thread(thread_id) if thread_id else await runtime.create_thread(agent)
        renderer = Renderer(definition, console, errors)
        console.print(Text(f"{definition.display_title} · thread {state.thread_id}", style="dim"))
        if thread_id:
            await _show_history(runtime, state.thread_id, renderer)
        elif message is None:
            console.print(Text("Type a message; /quit or Ctrl-D ends.", style="dim"))
        if message is None:
            enable_line_editing()
        subscription = runtime.events.subscribe(state.thread_id)
        while True:
            if message is not None:
                text: str | None = message
                console.print(Text(f"{renderer.you()}: ", style="bold"), end="")
                console.print(message, markup=False, highlight=False)
            else:
                text = await asyncio.to_thread(ask, f"{renderer.you()}: ")
            if text is None or text.strip() in ("/quit", "/exit"):
                return renderer.failure
            if not text.strip():
                continue
            done = asyncio.Event()
            pump = asyncio.create_task(_pump(subscription, renderer, done))
            sent = await runtime.send_message(state.thread_id, text)
            renderer.shown.add(sent.id)
            while True:
                await runtime.wait_idle(state.thread_id)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), 0.5)
                await asyncio.sleep(0.02)  # let the last events through
                pump.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await pump
                renderer.still()
                renderer.end_stream()
                if not await _decide_parked(runtime, state.thread_id, console, message is None):
                    break
                done = asyncio.Event()  # the run goes on: follow it as before
                pump = asyncio.create_task(_pump(subscription, renderer, done))
                await asyncio.sleep(0.05)
            if message is not None:
                return renderer.failure
    finally:
        await runtime.close(drain=5)
