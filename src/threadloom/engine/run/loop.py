"""The run loop: steps, turns, sessions and stop conditions (spec 04 §4.8–§4.10, §4.13,
§4.15, §4.19, §4.21).

A :class:`Run` is one asyncio task per running thread. Each step delivers the queue,
assembles the context, makes one model request, finalises the model message, runs the
tool calls and evaluates the stop conditions.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from threadloom.define.agent import Agent
from threadloom.define.hook import HookContext, HookDefinition
from threadloom.define.model import Model
from threadloom.define.registry import Definitions, ResolvedTool
from threadloom.engine.env import ExecutionState, StepEnv, StepManager, StepTracing
from threadloom.engine.options import EngineOptions
from threadloom.engine.request.context import context_part
from threadloom.engine.run.budget import Quotas, RunBudget, open_budget
from threadloom.engine.run.children import spawn_immediate
from threadloom.engine.run.client_tools import AWAITING as AWAITING_CLIENT
from threadloom.engine.run.results import SessionResult, ended_result, final_message
from threadloom.engine.run.resume import resume_calls
from threadloom.engine.run.subagents import runtime_tools
from threadloom.engine.step.dispatch import dispatch
from threadloom.engine.step.model_call import ModelFailed, StepError, format_exception
from threadloom.engine.step.outcome import CallOutcome, ModelResult
from threadloom.engine.step.step import model_step, role_of
from threadloom.engine.step.tools import run_decided
from threadloom.errors import LeaseLost
from threadloom.providers.base import Provider, ProviderRegistry
from threadloom.records import FAILED_REASONS, LogRow, Message, StatusError, new_id, one_line
from threadloom.store.base import Fence, Store, StoredEvent, ThreadRow, delivered_message
from threadloom.thread import messages as thread_messages
from threadloom.thread.history import MessageHistory
from threadloom.thread.hub import ThreadHub
from threadloom.thread.state import ThreadState

logger = logging.getLogger("threadloom.engine")
RUN_FAILED = {"threadloom_run_failed": True}
"""``extra`` of the log records of failed runs: a front end that shows the failure itself
(``threadloom run``) leaves them out."""

BREAKER_SIZE = 8
BREAKER_NOTE = (
    "I stopped because the same tool error happened 8 times in a row:\n\n{error}\n\n"
    "Retrying is not helping. Please check what is failing, then ask me to continue."
)


class RunTracing(StepTracing, Protocol):
    """The spans of runs, and of their steps (``engine/telemetry.py``'s ``Tracing``)."""

    def start_run(self, run: Run) -> None: ...
    def end_run(self, run: Run, reason: str) -> None: ...


class Manager(StepManager, Protocol):
    """What a run needs of the manager of the runs (``runs.py``'s ``RunManager``), which
    starts it and ends it (``ending.py``)."""

    @property
    def hub(self) -> ThreadHub: ...
    @property
    def quotas(self) -> Quotas: ...
    @property
    def options(self) -> EngineOptions: ...
    @property
    def providers(self) -> ProviderRegistry: ...
    @property
    def tracing(self) -> RunTracing | None: ...
    def create_hooks_registered(self) -> bool: ...
    async def publish_delivery(
        self, thread_id: str, events: list[StoredEvent], delivered: list[Message]
    ) -> list[Message]: ...
    async def end_of_run(self, run: Run, reason: str) -> bool: ...
    async def resume_decided(self, thread_id: str) -> bool: ...
    @property
    def background(self) -> set[asyncio.Task[Any]]: ...
    async def settle(self, run: Run, reason: str) -> None: ...
    def release(self, run: Run) -> None: ...
    def lease_lost(self, run: Run) -> None: ...
    def broken(self, run: Run, exc: BaseException) -> None: ...
    async def finish_run(self, run: Run, message: Message, log: LogRow, reason: str) -> Message: ...
    async def finish_run_locked(
        self, run: Run, message: Message, log: LogRow, reason: str, *, new: bool = False
    ) -> Message: ...


class Run:
    """One run of the loop on one thread."""

    __slots__ = (
        # what __init__ and _reset set, in slots instead of a dictionary: a run has more
        # attributes than CPython shares the keys of (30), so its dictionary was 1.6 KB of
        # every active thread (issue 40); __dict__ holds the rest (the trace's below, set
        # only while the runtime traces)
        *("manager", "hub", "listened", "definitions", "options", "thread_id", "row"),
        *("agent", "side", "has_registry", "event_seq", "task", "started_at", "abort_reason"),
        *("_run_context", "finished", "settled", "unwritten_row", "terminate_requested"),
        *("partial", "partial_reasoning", "root_message_id", "session", "pre_delivered"),
        *("client_tools", "parked", "resumed", "resuming", "ended", "rewake", "fence"),
        *("budget", "run_id", "context", "run_steps", "side_steps", "turn_side", "anchor"),
        *("tool_rows", "began_at", "ending", "failure", "execution", "step_side"),
        "__dict__",
    )

    # the run's trace (``engine/telemetry.py``), set only while the runtime traces: class
    # defaults, so a run that is not traced pays nothing for them
    span: Any = None
    """The span of the run in progress."""
    trace_token: Any = None
    trace_links: tuple[Any, ...] = ()
    """Callers whose sends joined the run while no span was open: linked at the next."""
    trace_previous: Any = None
    """The span context of this task's previous run (the next one links to it)."""
    trace_cost: float = 0.0

    def __init__(self, manager: Manager, row: ThreadRow, agent: Any, side: str) -> None:
        self.manager = manager
        self.hub = manager.hub
        self.listened = manager.hub.bus.listened
        """False while nobody listens to any thread (``EventBus.listened``): callers of
        ``publish_telemetry`` build its fields only when it is true."""
        self.definitions: Definitions = manager.hub.definitions
        self.options = manager.options
        self.thread_id = row.id
        self.row = row
        self.agent: Agent = agent
        self.side = side
        self.has_registry = row.has_children is not False  # unknown: read it
        """Whether the thread has subagent registry entries (offers ``subagents``)."""
        self.event_seq = row.event_seq
        """The thread's durable event number when the run started (the start gate sets
        it after its status write): a warm history is reused only if it matches."""
        self.task: asyncio.Task[Any] | None = None
        self.started_at = 0
        self.abort_reason: str | None = None
        self._run_context: str | None = None
        """The thread's run context as a system text part, once read (spec 13 §13.2.11)."""
        self.finished = False
        self.settled = False
        self.unwritten_row: LogRow | None = None
        """The runtime log row of a step error that could not be written (the store was
        unreachable): written before the run's settlement (``ending.broken``)."""
        self.terminate_requested = False
        self.partial: dict[str, str] = {}
        self.partial_reasoning: dict[str, str] = {}
        """Reasoning text streamed so far per message being generated (stream catch-up)."""
        self.root_message_id: str | None = None
        self.session = {"a": row.session_turns_a, "b": row.session_turns_b}
        self.pre_delivered: list[Message] | None = None
        """Entries the start gate delivered with the status write: the first step's."""
        self.client_tools: Sequence[ResolvedTool] = ()
        """Tools the client offered with the request that started the run and runs itself
        (spec 13 §13.7): offered to side a's top-level steps after the prompt's own."""
        self.parked = False
        """The thread was parked for approval when the run started (``RunBegin.parked``):
        its decided calls run before the first step (spec 14 §14.4)."""
        self.resumed = False
        """The run resumes a lost run (spec 16 §16.4): the lost run's open tool calls are
        answered before the first step, and the thread's count of resumes in a row is
        cleared when the run ends (``ending``)."""
        self.resuming = False
        """``resumed`` until the lost run's open calls were answered."""
        self.ended: tuple[str, bool] | None = None
        """``(reason, settled)`` once the end-of-run check committed with the run's last
        message (``RunManager.finish_run``)."""
        self.rewake = False
        self.fence: Fence | None = None
        """The lease this run's writes are checked against (a store several nodes share);
        ``None`` again once the run released it (``ending._unfence``). Passed to each write
        of the run: its ThreadStates' (``state``) and its own (``store``)."""
        self.budget: RunBudget | None = None
        """The run's budget (spec 15), opened as the run begins; ``None``: no limit applies."""
        self._reset()

    def _reset(self) -> None:
        self.run_id = new_id()
        self.context: dict[str, Any] = {}
        self.run_steps = 0
        self.side_steps = {"a": 0, "b": 0}
        self.turn_side: str | None = None
        self.anchor: tuple[str | None, int | None] = (None, None)
        self.tool_rows: Sequence[Message] = ()
        """The run's stored tool results; a tuple until the first (``keep_tool_rows``): an
        empty list is an object the garbage collector tracks, for every run (issue 40)."""
        self.rewake = False
        self.began_at = self.hub.clock()
        """When this run began: rule 10 of a child's session result looks from here."""
        self.ending: Message | None = None
        """The stored result of the successful session_stop/session_fail call."""
        self.failure: StatusError | None = None
        """Why the run failed, kept with its ``failed`` status (spec 01 §1.7.4)."""
        history = getattr(self, "execution", None)
        self.execution = ExecutionState(
            run_id=self.run_id,
            current_side="b" if self.side == "b" else "a",
            prompt=None,
            prompt_path=(),
            depth=0,
            message_history=history.message_history if history else MessageHistory(),
        )

    # -- helpers -----------------------------------------------------------------------
    def keep_tool_rows(self, rows: Sequence[Message]) -> None:
        """Add stored tool results to ``tool_rows``."""
        if rows:
            kept = self.tool_rows
            if isinstance(kept, list):
                kept.extend(rows)
            else:
                self.tool_rows = [*kept, *rows]

    def partial_texts(self) -> dict[str, str]:
        return {k: v for k, v in self.partial.items() if v}

    def state(self, execution: Any = None, arguments: Any = None) -> ThreadState:
        return ThreadState(
            self.hub,
            self.row,
            execution=execution or self.execution,
            context=self.context,
            arguments=arguments,
            fenced_by=self,
        )

    @property
    def store(self) -> Store:
        """The store the run writes through: its writes checked against its fence."""
        return self.hub.store.fenced(self.fence)

    def hooks_for(
        self, name: str, execution: ExecutionState | None = None
    ) -> Sequence[tuple[HookDefinition, HookContext]]:
        """The hooks named ``name`` for the prompt of ``execution`` (a step's; the run's
        by default) now (spec 03 §3.3)."""
        execution = execution or self.execution
        return self.hub.resolve_hooks(
            name, self.agent.name, execution.prompt, execution.prompt_hooks
        )

    def hookless(self, execution: ExecutionState | None = None) -> bool:
        """True when no hook of any name runs for the prompt of ``execution`` now
        (``ThreadHub.hookless``): asked once where several names would be, with nothing
        awaited in between, so the registry cannot move."""
        execution = execution or self.execution
        return self.hub.hookless(self.agent.name, execution.prompt_hooks)

    async def finish_run(self, message: Message, log: LogRow, reason: str) -> Message:
        """Finalise this run's last model message and commit its end with it
        (``RunManager.finish_run``)."""
        return await self.manager.finish_run(self, message, log, reason)

    async def finish_run_locked(
        self, message: Message, log: LogRow, reason: str, *, new: bool = False
    ) -> Message:
        """``finish_run`` under the thread's write lock (``RunManager.finish_run_locked``)."""
        return await self.manager.finish_run_locked(self, message, log, reason, new=new)

    def providers_for(self, model: Model) -> Provider:
        provider = model.provider
        if isinstance(provider, str):
            return self.manager.providers.get(provider)
        found: Provider = provider
        return found

    def publish_telemetry(self, kind: str, **fields: Any) -> None:
        if not self.hub.bus.wants(self.thread_id):
            return  # an ephemeral event nobody would receive (the bus keeps no history)
        self.hub.publish(
            self.thread_id,
            "telemetry",
            None,
            {"type": kind, **fields, "timestamp": int(time.time() * 1000)},
        )

    def session_result(self, reason: str) -> SessionResult | None:
        """The session result of this run ended with ``reason`` (a child's, spec 06
        §6.8.1); ``None`` for a thread without a parent."""
        if self.row.parent_id is None or reason == "awaiting_approval":
            return None  # a parked child's session goes on after the decision
        final = final_message(self.execution.message_history.raw(), self.began_at)
        stop_text = self.execution.stop_session_result
        return ended_result(reason, self.agent, self.ending, final, stop_text)

    def stop_requested(self) -> bool:
        return self.terminate_requested or self.execution.stop_session_requested

    def _side_def(self, side: str) -> Any:
        if side == "a":
            return self.agent.side_a
        return self.agent.side_b

    def _is_human(self, side: str) -> bool:
        return side == "b" and self.agent.type == "ai_human"

    # -- the run -----------------------------------------------------------------------
    async def execute(self) -> None:
        history = await self.hub.run_history(self.thread_id, self.event_seq)
        self.execution.message_history = history
        tracing = self.manager.tracing
        metrics = self.manager.metrics
        reason: str | None = None
        try:
            while True:
                if tracing is not None:
                    tracing.start_run(self)
                metrics.runs_started.add((self.agent.name,))
                reason = await self._loop()
                if self.budget is not None and self.budget.unsent:  # spec 19: the outbox
                    await self.budget.send_warnings(self.hub.store)
                if self.ended is None and self.listened:
                    self.publish_telemetry("stopped", reason=reason, side=self.side)
                if reason == "terminated":
                    await self.manager.settle(self, "terminated")
                    return
                if reason in (
                    "stop_on_response",
                    "stop_tool",
                    "awaiting_human",
                    "session_stop",
                    "session_fail",
                    "state_stop_session",
                    "max_session_turns",
                ):
                    self._reset_session()
                again = await self.manager.end_of_run(self, reason)
                metrics.run_ended(reason, reason in FAILED_REASONS)
                if tracing is not None:
                    tracing.end_run(self, reason)
                if not again:
                    if reason == "awaiting_approval":  # decided while it parked?
                        self._resume_later()
                    return
                self.side = "a"
                self._reset()
                reason = None
        except asyncio.CancelledError:
            return
        except LeaseLost:
            self.manager.lease_lost(self)
            return
        except Exception as exc:  # its own failure handling could not write (the store
            self.manager.broken(self, exc)  # is unreachable): settled when it can be
            return
        finally:
            if tracing is not None:  # aborted, or lost: the reason its settlement records
                tracing.end_run(self, reason or self.abort_reason or "execution_lost")
            self.execution.step = None  # the run's last step, which points back at the run
            self.hub.warm_grown(self.thread_id, history)
            if self.ended is not None and self.ended[1] and not self.finished:
                self.manager.release(self)  # cancelled after its run end was committed

    async def _loop(self) -> str:
        if self.parked or self.resuming:
            parked = await self._guarded(self._before_first_step)
            if parked is not None:
                return parked
        row = self.row
        self.budget = None
        if self.agent.budget or row.budgets or row.user_id is not None:  # else none applies
            self.budget = await open_budget(
                self.agent,
                row,
                self.hub.store,
                self.manager.quotas,
                self.hub.clock,
                self.publish_telemetry,
            )
        sides = (self.agent.side_a, self.agent.side_b)
        ceiling = max(
            self.agent.max_run_steps or self.options.max_run_steps,
            *[(s.max_steps or 0) if s is not None else 0 for s in sides],
        )
        while True:
            reason = await self._guarded(self._step)
            if reason == "step_error":
                return reason
            self.run_steps += 1
            self.manager.metrics.steps.add((self.agent.name,))
            if reason is not None:
                return reason
            if await self._breaker():
                return "repeated_tool_error"
            if self.run_steps >= ceiling:
                return "max_total_steps"

    async def _guarded(self, work: Callable[[], Awaitable[str | None]]) -> str | None:
        """``work()``'s reason; an exception other than a cancellation or a lost lease ends
        the run with ``step_error`` (spec 04 §4.9.1)."""
        try:
            return await work()
        except (asyncio.CancelledError, LeaseLost):
            raise
        except Exception as exc:
            await self._step_error(exc)
            return "step_error"

    async def _before_first_step(self) -> str | None:
        """A resumed run's lost calls (spec 16), then a parked run's decided calls (spec
        14 §14.4); a reason when the run parks (again) instead of going on."""
        self.parked = False
        if self.resuming:
            self.resuming = False
            parked = await resume_calls(self)
            if parked is not None:
                return parked
        return await self._decided_calls()

    async def _deliver(self) -> list[Message]:
        """Deliver every waiting entry, in order (spec 04 §4.10): the first step's were
        delivered by the start gate; a queue this process knows to be empty is not read;
        without create hooks all entries go in one transaction, else one at a time
        through the create lifecycle."""
        delivered: list[Message] = []
        tid = self.thread_id
        if self.pre_delivered is not None:
            delivered, self.pre_delivered = self.pre_delivered, None
        elif self.hub.queue_known_empty(tid):
            pass
        elif not self.manager.create_hooks_registered():
            async with self.hub.lock(tid):
                pairs = await self.store.deliver_queue(tid)
                events = [event for _, event in pairs]
                messages = [message for message, _ in pairs]
                delivered = await self.manager.publish_delivery(tid, events, messages)
                self.hub.note_queue_empty(tid)
        else:
            state = self.state()
            for entry in await self.hub.store.list_queue(tid):
                candidate = delivered_message(entry)
                stored = await thread_messages.deliver(state, entry.id, candidate)
                if stored is not None:
                    delivered.append(stored)
        if delivered:
            self.root_message_id = delivered[0].id
            self.execution.root_message_id = self.root_message_id
        return delivered

    async def _step(self) -> str | None:
        if self.terminate_requested:
            return "terminated"
        self._activate(self.side)  # deliveries run the acting side's prompt hooks (§3.3)
        delivered = await self._deliver()
        if delivered:
            forced = "b" if delivered[-1].role == "assistant" else "a"
            if any(m.role == "user" for m in delivered) and self._is_human("b"):
                await self._count_turn("b")
            if forced != self.side:
                self.side = forced
                self.turn_side = None
        side = self.side
        self.step_side = side  # the acting side of this step, whatever the stop rules switch
        self.execution.current_side = "b" if side == "b" else "a"
        if self.turn_side != side:
            self.turn_side = side
            self.anchor = self._newest_completed()
            if not self._is_human(side):
                await self._spawn_immediate(side)
        if self._is_human(side):
            return "awaiting_human"
        if min(self.session["a"], self.session["b"]) >= self.agent.max_session_turns:
            return "max_session_turns"
        side_def = self._side_def(side)
        if side_def.max_steps and self.side_steps[side] >= side_def.max_steps:
            return "max_side_steps"
        if self.budget is not None and await self._over_budget():
            return "budget_exceeded"
        self.side_steps[side] += 1
        self.execution.step_count += 1
        self.execution.side_step_counts[side] = self.side_steps[side]
        if self.listened:
            self.publish_telemetry("step_started", step=self.run_steps, side=side)
        prompt = self.definitions.prompt(side_def.prompt)
        if prompt is None:
            raise StepError(f'Prompt "{side_def.prompt}" is not defined')
        self.execution.prompt = prompt.name
        self.execution.prompt_path = (prompt.name,)
        self.execution.prompt_hooks = tuple(prompt.hooks or ())
        env = StepEnv(
            run=self,
            state=self.state(),
            side=side,
            prompt=prompt,
            side_def=side_def,
            tools=await runtime_tools(self, prompt),
            anchor_id=self.anchor[0],
            anchor_created=self.anchor[1],
            execution=self.execution,
            dispatch=dispatch,
        )
        if self.client_tools and side == "a":  # the client's tools (spec 13 §13.7)
            env.tools = [*env.tools, *self.client_tools]
            env.client = frozenset(t.name for t in self.client_tools)
            env.offered.update((t.name, t) for t in self.client_tools)
        outcome = await model_step(env)
        if outcome.blocked:
            reason: str | None = "hook_blocked"
        elif outcome.round.awaiting:
            reason = "awaiting_approval"
        elif outcome.round.client:
            reason = AWAITING_CLIENT
        elif outcome.guard or outcome.retry or outcome.result is None:
            reason = None
        elif outcome.handoff is not None:
            await self._handoff(env, outcome.handoff)
            reason = None
        else:
            reason = await self._stop_conditions(env, outcome.result, outcome.round.outcomes)
        if self.ended is None and self.listened:  # else published with the run's end
            self.publish_telemetry(
                "step_completed", step=self.run_steps, stopped=reason is not None
            )
        return reason

    async def _decided_calls(self) -> str | None:
        """A run of a thread parked for approval (spec 14 §14.4): ``awaiting_approval``
        while any approval is pending; else the decided calls without a result run (or
        get their rejection) before the first step, on the side that issued them."""
        answered = {
            m.tool_call_id
            for m in self.execution.message_history.raw()
            if m.role == "tool" and m.tool_call_id
        }
        open_ = [
            a
            for a in await self.store.list_approvals(self.thread_id)
            if a.tool_call_id not in answered and a.state != "cancelled"
        ]
        if any(a.state == "pending" for a in open_):
            return "awaiting_approval"
        decided = [a for a in open_ if a.state == "rejected" or a.started_at is None]
        if not decided:
            return None
        issued: dict[str, Message] = {}
        for approval in decided:
            if approval.message_id not in issued:
                found = await self.store.get_message(self.thread_id, approval.message_id)
                if found is not None:
                    issued[found.id] = found
        env = await self.issuing_env(issued.get(decided[0].message_id))
        round_ = await run_decided(env, decided, issued)
        self.keep_tool_rows(round_.stored)
        return None

    async def issuing_env(self, issued: Message | None) -> StepEnv:
        """The environment of calls of the stored model message ``issued`` that run
        outside its step (decided approvals, a resumed run's open calls): its side and
        prompt become the acting ones."""
        side = "b" if issued is not None and issued.role == "user" else "a"
        side_def = self._side_def(side)
        name = (issued.prompt if issued is not None else None) or side_def.prompt
        prompt = self.definitions.prompt(name or "")
        if prompt is None:
            raise StepError(f'Prompt "{name}" is not defined')
        self.side = side
        self._activate(side)
        env = StepEnv(
            run=self,
            state=self.state(),
            side=side,
            prompt=prompt,
            side_def=side_def,
            tools=await runtime_tools(self, prompt),
            anchor_id=None,
            anchor_created=None,
            execution=self.execution,
            dispatch=dispatch,
        )
        env.pending_id = issued.id if issued is not None else ""
        self.execution.step = env
        return env

    def _resume_later(self) -> None:
        """After parking: a decision that landed while the run parked found it running,
        so the run's end checks once more (the start gate lets one start through)."""
        task = asyncio.get_running_loop().create_task(self.manager.resume_decided(self.thread_id))
        self.manager.background.add(task)
        task.add_done_callback(self.manager.background.discard)

    async def _spawn_immediate(self, side: str) -> None:
        """Turn start: the side's immediate subagents (spec 06 §6.9)."""
        side_def = self._side_def(side)
        prompt = self.definitions.prompt(side_def.prompt) if side_def.prompt else None
        if prompt is None:
            return
        self._activate(side)  # its after_subagent_created hooks are the side's prompt's
        await spawn_immediate(self, side, prompt)

    def _activate(self, side: str) -> None:
        """Make ``side``'s prompt the active one (none for a human side)."""
        side_def = self._side_def(side)
        prompt = None
        if side_def is not None and not self._is_human(side) and side_def.prompt:
            prompt = self.definitions.prompt(side_def.prompt)
        self.execution.prompt = prompt.name if prompt is not None else None
        self.execution.prompt_path = (prompt.name,) if prompt is not None else ()
        self.execution.prompt_hooks = tuple(prompt.hooks or ()) if prompt is not None else ()

    def _newest_completed(self) -> tuple[str | None, int | None]:
        history = self.execution.message_history
        newest = max(len(history) - 8, 0)  # the newest records first: no whole-history copy
        for message in reversed(history.records_from(newest)):
            if message.status == "completed":
                return message.id, message.created_at
        for message in reversed(history.records_from(0)[:newest]):
            if message.status == "completed":
                return message.id, message.created_at
        return None, None

    async def _stop_conditions(
        self, env: StepEnv, result: ModelResult, outcomes: Sequence[CallOutcome]
    ) -> str | None:
        """Spec 04 §4.15, first matching rule."""
        if self.terminate_requested:
            return "terminated"
        if self.execution.stop_session_requested:
            return "state_stop_session"
        side_def = env.side_def
        called = {o.call.function.name: o for o in outcomes}
        for binding, reason in (
            (getattr(side_def, "session_fail", None), "session_fail"),
            (getattr(side_def, "session_stop", None), "session_stop"),
        ):
            name = getattr(binding, "name", binding)
            if not name:
                continue
            matching = [o for o in outcomes if o.call.function.name == name]
            if matching:
                ended = [o for o in matching if o.result.status == "success"]
                if ended:
                    self.ending = next(
                        (m for m in self.tool_rows if m.id == ended[0].message_id), None
                    )
                    return reason
                return None
        stop_tool = side_def.stop_tool
        by_tool = bool(stop_tool) and stop_tool in called
        by_text = (
            side_def.stop_on_response and not result.tool_calls and bool(result.content.strip())
        )
        sibling = "b" if env.side == "a" else "a"
        if by_tool or by_text:
            await self._count_turn(env.side)
            if self._is_human(sibling):
                return "stop_tool" if by_tool else "stop_on_response"
            self.side = sibling
            self.turn_side = None
            return None
        if not side_def.stop_on_response and not stop_tool and not self._is_human(sibling):
            await self._count_turn(env.side)
            self.side = sibling
            self.turn_side = None
        return None

    async def run_context(self) -> str:
        """The thread's run context as a part of the system text (spec 13 §13.2.11): read
        once a run, and only when the thread keeps one (its row says so)."""
        if not self.row.has_run_context:
            return ""
        if self._run_context is None:
            self._run_context = context_part(await self.store.get_run_context(self.thread_id))
        return self._run_context

    async def _handoff(self, env: StepEnv, outcome: CallOutcome) -> None:
        """Bind the thread to the handoff's agent and restart on its side a (spec 04 §4.18)."""
        target: Any = (
            getattr(outcome, "target", None) or env.offered[outcome.call.function.name].target
        )
        row = await self.store.set_agent(self.thread_id, target.name)
        self.row = row
        self.agent = target
        try:
            arguments = json.loads(outcome.call.function.arguments or "{}")
        except ValueError:
            arguments = {}
        if isinstance(arguments, dict):
            self.context.update(arguments)
        self.side = "a"
        self.turn_side = None
        self.hub.publish(
            self.thread_id, "thread_updated", None, {"thread": row.record().model_dump()}
        )
        self.publish_telemetry(
            "agent_handoff", new_agent_id=target.name, new_agent_title=target.display_title
        )

    async def _count_turn(self, side: str) -> None:
        """A completed turn (spec 04 §4.8.4). A dual_ai session spans many turns, so its
        counters are written at once; an ai_human session ends when the run parks, so its
        counters are only written by the end-of-run transaction."""
        self.session[side] += 1
        self.manager.metrics.turns.add((self.agent.name, side))
        if self.agent.type == "dual_ai":
            await self.store.set_session_turns(self.thread_id, self.session["a"], self.session["b"])

    def _reset_session(self) -> None:
        self.session = {"a": 0, "b": 0}

    async def _breaker(self) -> bool:
        """The repeated-tool-error breaker (spec 04 §4.19)."""
        rows = [m for m in self.tool_rows if m.depth == 0][-BREAKER_SIZE:]
        if len(rows) < BREAKER_SIZE or any(m.tool_status != "error" for m in rows):
            return False
        signatures = {_signature(m.content or "") for m in rows}
        if len(signatures) != 1 or not next(iter(signatures)):
            return False
        acting = getattr(self, "step_side", self.side)
        side_def = self._side_def(acting)
        prompt = self.execution.prompt
        await thread_messages.create(
            self.state(),
            Message(
                id=new_id(),
                role=role_of(acting),
                name=side_def.label,
                prompt=prompt,
                content=BREAKER_NOTE.format(error=(rows[-1].content or "")[:300]),
                metadata={"status_kind": "repeated_tool_error"},
            ),
            propagate=False,
            require_live=False,
        )
        last = rows[-1]
        log_id = last.log_id
        call_id = last.tool_call_id
        if log_id is None and call_id:  # the row of the model message that made the call
            for message in reversed(self.execution.message_history.raw()):
                if message.tool_calls and call_id in message.tool_calls:
                    log_id = message.log_id
                    break
        self.failure = StatusError(
            type="RepeatedToolError",
            message=one_line(
                f'Tool "{last.name}" failed 8 times in a row: '
                + (last.content or "").removeprefix("Failed to execute tool: ")
            ),
            log_id=log_id,
        )
        logger.error(
            "thread %s (agent %s): the run failed: %s",
            self.thread_id,
            self.agent.name,
            self.failure.message,
            extra=RUN_FAILED,
        )
        return True

    async def _over_budget(self) -> bool:
        """Spec 15 §15.5: before the step's model request, whether a limit is reached;
        then the run ends ``failed`` / ``budget_exceeded`` with nothing half-written."""
        assert self.budget is not None
        failure = await self.budget.check(self.hub.store, self.has_registry)
        if failure is None:
            return False
        self.failure = failure
        logger.error(
            "thread %s (agent %s): the run failed: %s",
            self.thread_id,
            self.agent.name,
            failure.message,
            extra=RUN_FAILED,
        )
        return True

    async def _step_error(self, exc: BaseException) -> None:
        """Spec 04 §4.21: fail the pending message, write a complete runtime row."""
        for message_id in list(self.partial):
            try:
                await thread_messages.runtime_update(
                    self.state(),
                    message_id,
                    {"status": "failed", "content": self.partial.get(message_id) or None},
                    allowed=thread_messages.FAILURE_KEYS,
                )
            except Exception:
                pass
        self.partial.clear()
        self.partial_reasoning.clear()
        row = LogRow(
            id=new_id(),
            kind=None,
            provider="system",
            model=f"Step {self.run_steps + 1}, Side {self.side}",
            created_at=0,
            is_complete=True,
            error=format_exception(exc),
            error_type="step_execution_error",
            error_origin="runtime",
        )
        stored = await self.hub.write_runtime_log(
            self.thread_id, row, self.root_message_id, fence=self.fence
        )
        if stored is None:  # the store refused it: written with the run's settlement
            self.unwritten_row = row
        log_id = stored.id if stored is not None else None
        if isinstance(exc, ModelFailed):  # the cause is the model's: its request's row
            self.failure = StatusError.of_exception(exc.error, exc.log_id, exc.summary)
            logger.error(
                "thread %s (agent %s): the run failed: %s (log row %s)",
                self.thread_id,
                self.agent.name,
                exc.summary,
                exc.log_id,
                extra=RUN_FAILED,
            )
        else:
            self.failure = StatusError.of_exception(exc, log_id)
            logger.error(
                "thread %s (agent %s): the run failed: %s: %s (log row %s)",
                self.thread_id,
                self.agent.name,
                type(exc).__name__,
                self.failure.message,
                log_id,
                exc_info=exc,
                extra=RUN_FAILED,
            )


_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")
_PATHS = re.compile(r"/\S+")
_DIGITS = re.compile(r"\d")


def _signature(content: str) -> str:
    text = content.lower()
    text = text.removeprefix("failed to execute tool:")
    text = _QUOTED.sub("", text)
    text = _PATHS.sub("", text)
    text = _DIGITS.sub("", text)
    return " ".join(text.split())[:120]
