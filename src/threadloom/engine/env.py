"""The environment of a running execution and of one step of it: data and views only.

``ExecutionState`` is the ``execution`` of an in-flow ThreadState (spec 04 §4.16.1): the
engine owns and mutates it; tools and hooks read it. Its ``message_history`` is live
(spec 02 §2.3.5). :class:`StepEnv` is everything one step of the acting side needs; the
step's behaviour lives in the modules of its concepts (``step/step.py``, ``step/pending.py``,
``step/tools.py``, ``step/dispatch.py``). The protocols say what a step needs of the run
around it (:class:`RunView`, :class:`StepManager`), so the step's modules need not import
the run's (``run/loop.py``, ``run/runs.py``), which import them.

A leaf of ``engine/``: it imports no engine module that imports it back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from threadloom.define.agent import Agent, Side
from threadloom.define.hook import HookContext, HookDefinition
from threadloom.define.model import Model
from threadloom.define.prompt import Prompt
from threadloom.define.registry import Definitions, ResolvedTool
from threadloom.define.tool import ToolResult
from threadloom.engine.options import EngineOptions
from threadloom.engine.request.presentation import RequestMessage
from threadloom.engine.request.request_head import Heads
from threadloom.engine.step.outcome import CallOutcome, ModelResult
from threadloom.engine.step.threads import ToolThreads
from threadloom.metrics import Metrics
from threadloom.providers.base import Provider
from threadloom.providers.types import ProviderRequest
from threadloom.records import LogRow, Message, ToolCall
from threadloom.store.base import Store, ThreadRow
from threadloom.thread.history import MessageHistory
from threadloom.thread.hub import ThreadHub
from threadloom.thread.state import ThreadState

SideName = Literal["a", "b"]


@dataclass(eq=False, slots=True)
class ExecutionState:
    """One run of the engine on one thread (a nested sub-prompt gets its own)."""

    run_id: str
    current_side: SideName
    prompt: str | None
    prompt_path: tuple[str, ...]
    depth: int
    message_history: MessageHistory
    step_count: int = 0
    side_step_counts: dict[str, int] = field(default_factory=lambda: {"a": 0, "b": 0})
    current_tool_call: ToolCall | None = None
    parent_id: str | None = None
    prompt_hooks: Sequence[str] = ()
    root_message_id: str | None = None
    # Requests made in-flow, read by the loop at its checkpoints.
    stop_session_result: str | None = None
    stop_session_requested: bool = False
    terminate_requested: bool = False
    # Empty tuples until something is added (each time a new list): an empty list is an
    # object the garbage collector tracks, for every run in flight (issue 40)
    parent_notifications: Sequence[dict[str, Any]] = ()
    queued_calls: Sequence[ToolCall] = ()
    """Calls added by ``queue_tool`` during the current step (run after the model's)."""
    output_attempts: dict[str, int] = field(default_factory=dict)
    """Per prompt name, the answers of this run in a row that did not match the prompt's
    output type (spec 24 §24.3); a matching answer clears its entry."""
    step: StepEnv | None = None
    """The step running now, for ``invoke_tool``."""

    @property
    def prompt_name(self) -> str | None:
        return self.prompt

    def record_parent_notification(self, content: str) -> None:
        """``notify_parent`` during a tool call: the call's stored result carries it."""
        call = self.current_tool_call
        self.parent_notifications = [
            *self.parent_notifications,
            {
                "content": content,
                "tool_call_id": call.id if call else None,
                "tool_name": call.function.name if call else None,
            },
        ]


class StepTracing(Protocol):
    """The spans a step opens when the runtime traces (``engine/telemetry.py``'s
    ``Tracing``); spans and tokens are OpenTelemetry's, opaque here."""

    def start_chat(
        self,
        env: StepEnv,
        provider_name: str,
        model: Model,
        request: ProviderRequest,
        attempt: int,
        log_id: str,
    ) -> tuple[Any, Any]: ...
    def end_chat(
        self, env: StepEnv, span: Any, token: Any, result: ModelResult, request_model: str
    ) -> None: ...
    def fail_chat(self, span: Any, token: Any, error: BaseException, code: str) -> None: ...
    def cancel(self, span: Any, token: Any) -> None: ...
    def start_tool(self, env: StepEnv, call: ToolCall) -> tuple[Any, Any]: ...
    def end_tool(self, span: Any, token: Any, outcome: CallOutcome) -> None: ...


class StepManager(Protocol):
    """What a step needs of the runs' manager (``run/runs.py``'s ``RunManager``)."""

    @property
    def request_heads(self) -> Heads: ...
    @property
    def slow_models(self) -> set[str]: ...
    @property
    def tracing(self) -> StepTracing | None: ...
    @property
    def threads(self) -> ToolThreads: ...
    @property
    def metrics(self) -> Metrics: ...


class BudgetView(Protocol):
    """What a step tells the budget of its run (``run/budget.py``'s ``RunBudget``)."""

    def spent(self, row: LogRow) -> None: ...


class RunView(Protocol):
    """What a step needs of its run (``run/loop.py``'s ``Run``)."""

    @property
    def budget(self) -> BudgetView | None:
        """The run's budget (spec 15); ``None`` when no limit applies."""
        ...

    @property
    def manager(self) -> StepManager: ...
    @property
    def options(self) -> EngineOptions: ...
    @property
    def hub(self) -> ThreadHub: ...
    @property
    def definitions(self) -> Definitions: ...
    @property
    def agent(self) -> Agent: ...
    @property
    def row(self) -> ThreadRow: ...
    @property
    def thread_id(self) -> str: ...
    @property
    def execution(self) -> ExecutionState: ...
    @property
    def store(self) -> Store: ...

    """The store of the run's writes (fenced with its lease where threads carry leases)."""

    @property
    def listened(self) -> object: ...

    """Truthy while anybody listens to any thread (``EventBus.listened``)."""

    @property
    def has_registry(self) -> bool: ...
    @property
    def root_message_id(self) -> str | None: ...
    @property
    def context(self) -> dict[str, Any]: ...
    @property
    def partial(self) -> dict[str, str]: ...
    @property
    def partial_reasoning(self) -> dict[str, str]: ...
    @property
    def tool_rows(self) -> Sequence[Message]: ...
    def keep_tool_rows(self, rows: Sequence[Message]) -> None: ...

    trace_cost: float

    def state(self, execution: Any = None, arguments: Any = None) -> ThreadState: ...
    def hooks_for(
        self, name: str, execution: ExecutionState | None = None
    ) -> Sequence[tuple[HookDefinition, HookContext]]: ...
    def hookless(self, execution: ExecutionState | None = None) -> bool: ...
    def providers_for(self, model: Model) -> Provider: ...
    def publish_telemetry(self, kind: str, **fields: Any) -> None: ...
    def stop_requested(self) -> bool: ...
    async def run_context(self) -> str:
        """The thread's run context as a part of the system text (spec 13 §13.2.11): ``""``
        when it keeps none."""
        ...

    async def finish_run(self, message: Message, log: LogRow, reason: str) -> Message: ...
    async def finish_run_locked(
        self, message: Message, log: LogRow, reason: str, *, new: bool = False
    ) -> Message: ...


class Held(Protocol):
    """A step's pending message and first LLM row held back from the store
    (``step/pending.py``'s ``HeldPending``)."""

    @property
    def stored_row(self) -> LogRow | None: ...
    @property
    def error(self) -> BaseException | None: ...
    def publish(self, kind: str, data: dict[str, Any]) -> bool: ...
    async def release(self) -> bool: ...
    def current(self, row: LogRow) -> LogRow: ...
    async def finalise(
        self, fields: Mapping[str, Any], log: LogRow, reason: str | None
    ) -> Message | None: ...


class NestedView(Protocol):
    """What a nested (sub-prompt) step sees (``step/subprompt.py``'s ``Nested``)."""

    @property
    def extra(self) -> list[RequestMessage]: ...
    def snapshot(self) -> list[Message]: ...


Dispatch = Callable[
    ["StepEnv", ResolvedTool, ThreadState, dict[str, Any], str], Awaitable[ToolResult]
]
"""Runs one tool call by its kind (``step/dispatch.py``; spec 04 §4.14.3 step 3)."""


@dataclass(slots=True)
class StepEnv:
    """Everything one step of the acting side needs (a nested step sets ``nested``)."""

    run: RunView
    state: ThreadState
    side: str
    prompt: Prompt
    side_def: Side
    tools: list[ResolvedTool]
    anchor_id: str | None
    anchor_created: int | None
    execution: ExecutionState
    """The run's execution, or the nested step's own."""
    dispatch: Dispatch
    pending_id: str = ""
    depth: int = 0
    parent_message_id: str | None = None
    parent_log_id: str | None = None
    current_log: LogRow | None = None
    tool_results: Sequence[dict[str, Any]] = ()
    """The results logged on ``current_log`` (a new list each one; empty: a tuple, which
    the garbage collector does not track)."""
    original_arguments: dict[str, str] = field(default_factory=dict)
    queued_tools: Sequence[dict[str, Any]] = ()
    announced: dict[str, asyncio.Task[None] | None] = field(default_factory=dict)
    pending_candidate: Message | None = None
    pending: Message | None = None
    """The step's pending model message, once stored (with the first LLM row) or held."""
    held: Held | None = None
    """The pending message and first LLM row while held back (``step/pending.py``)."""
    nested: NestedView | None = None
    """For a sub-prompt step: its snapshot and in-memory messages (``subprompt.Nested``)."""
    client: frozenset[str] = frozenset()
    """The names of ``tools`` that the client runs (spec 13 §13.7): their calls are left
    to it, and the run ends ``awaiting_client_tool``."""
    offered: dict[str, ResolvedTool] = field(init=False)
    """``tools`` by name."""

    def __post_init__(self) -> None:
        self.offered = {t.name: t for t in self.tools}
