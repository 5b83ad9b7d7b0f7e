"""Resuming a lost run (spec 16 §16.4): before its first model step, the run that resumes
a lost one answers the lost run's open tool calls from the effect ledger.

A top-level tool call of the stored history without a result is, by what the ledger
holds:

- an approval's (pending, approved and not started, rejected): left to the approvals'
  path (``Run._decided_calls``, spec 14 §14.4), which runs after this one;
- started (a recorded start) by a tool declared idempotent: run again;
- started by anything else, a consumed approval's call included (an approval runs its call
  once): answered with the error :data:`INTERRUPTED` — it may or may not have taken
  effect, and the model decides what to do;
- never started: run as a model step runs it (approval gate, recorded start).

Calls are answered in the order the model made them, one at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from threadloom.define.agent import Agent
from threadloom.engine.env import ExecutionState, StepEnv
from threadloom.engine.step.approvals import NOT_APPROVED
from threadloom.engine.step.tools import is_idempotent, run_resumed
from threadloom.records import Message, ToolCall
from threadloom.store.base import Store

INTERRUPTED = (
    "Interrupted: the runtime stopped while this call ran; it may or may not have taken effect."
)
"""The error result of a call that started in the lost run and may not run again."""


class Resuming(Protocol):
    """What resuming needs of its run (``loop.py``'s ``Run``)."""

    side: str

    @property
    def agent(self) -> Agent: ...
    @property
    def thread_id(self) -> str: ...
    @property
    def store(self) -> Store: ...
    @property
    def execution(self) -> ExecutionState: ...
    @property
    def tool_rows(self) -> Sequence[Message]: ...
    def keep_tool_rows(self, rows: Sequence[Message]) -> None: ...
    async def issuing_env(self, issued: Message | None) -> StepEnv: ...


def open_calls(history: list[Message]) -> list[tuple[Message, list[ToolCall]]]:
    """The calls without a result of the newest top-level model message that made calls
    (the lost run's last response: a step answers every call of its response before the
    next one), in the order the model made them; none when all are answered. Older
    messages are not read again: a call of theirs without a result is an approval's (the
    approvals' path reads the ledger) or lost its result to a deletion."""
    issued = next((m for m in reversed(history) if m.tool_calls and m.depth == 0), None)
    if issued is None:
        return []
    answered = {m.tool_call_id for m in history if m.role == "tool" and m.tool_call_id}
    calls = [c for c in issued.decoded_tool_calls() if c.id not in answered]
    return [(issued, calls)] if calls else []


def _acting_side(history: list[Message]) -> str | None:
    """The side of the newest model message (``None`` when there is none)."""
    for message in reversed(history):
        if message.depth == 0 and message.prompt and message.role in ("assistant", "user"):
            return "b" if message.role == "user" else "a"
    return None


def _answered(history: list[Message], agent: Agent) -> bool:
    """Whether the lost run had ended its turn: the newest top-level message is side a's
    completed answer with text and no calls, which ends the run of an ``ai_human`` agent
    whose side a stops on a response (spec 04 §4.15) — the run was lost after it stored
    the answer and before it committed its end."""
    newest = next((m for m in reversed(history) if m.depth == 0 and not m.silent), None)
    return (
        newest is not None
        and agent.type == "ai_human"
        and agent.side_a.stop_on_response
        and newest.role == "assistant"
        and bool(newest.prompt)
        and newest.status == "completed"
        and not newest.tool_calls
        and bool((newest.content or "").strip())
    )


async def resume_calls(run: Resuming) -> str | None:
    """Answer the lost run's open top-level calls (module docstring); the acting side
    becomes the side of the newest model message. Returns ``stop_on_response`` when the
    lost run had already stored its answer (the resumed run then asks nothing)."""
    history = run.execution.message_history.raw()
    pending = open_calls(history)
    if not pending:
        if _answered(history, run.agent):
            run.side = "a"
            return "stop_on_response"
        side = _acting_side(history)
        if side is not None:
            run.side = side
        return None
    approvals = {a.tool_call_id: a for a in await run.store.list_approvals(run.thread_id)}
    starts = await run.store.tool_starts(run.thread_id)
    for message, calls in pending:
        env = await run.issuing_env(message)
        errors: dict[str, str] = {}
        again: set[str] = set()
        plan: list[ToolCall] = []
        for call in calls:
            approval = approvals.get(call.id)
            started = call.id in starts
            if approval is not None and not started:
                if approval.state != "cancelled":
                    continue  # the approvals' path runs it, rejects it or waits
                errors[call.id] = NOT_APPROVED.format(state="cancelled")
            elif started and approval is None and is_idempotent(env, call.function.name):
                again.add(call.id)  # (an approval runs its call once: spec 14 §14.4)
            elif started:
                errors[call.id] = INTERRUPTED
            plan.append(call)
        if plan:
            round_ = await run_resumed(env, plan, errors, again)
            run.keep_tool_rows(round_.stored)
    return None
