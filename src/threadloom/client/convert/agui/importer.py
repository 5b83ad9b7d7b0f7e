"""AG-UI events → a ``ThreadView`` (spec 11 §11.7.3, "Import"), by the threadplane AG-UI
reducer rules.

AG-UI has no explicit completion of an assistant message: a new assistant id within a run
completes the previous one (the only place rule 7 of §11.5.4 is relaxed), and ``RUN_FINISHED``
completes the rest of the run's messages. Events with a ``subagent_run_id`` go to that child's
own importer (``importer.children``), never to the parent's messages.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Event,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from pydantic import TypeAdapter

from threadloom.client.chat import (
    AgentError,
    Delivery,
    Message,
    Outcome,
    Phase,
    TextBlock,
    ToolCall,
    ToolUseBlock,
    decode_json,
    frozen,
)
from threadloom.client.convert.agui.messages import from_agui_messages
from threadloom.client.models import SubagentEntry
from threadloom.client.view import ThreadView, empty_view
from threadloom.records import ThreadStatus

__all__ = ["AguiImporter", "parse_event"]

_EVENT: TypeAdapter[Any] = TypeAdapter(Event)


def parse_event(event: BaseEvent | Mapping[str, Any]) -> BaseEvent:
    """An AG-UI event model from a model or a plain dict (wire or attribute names)."""
    if isinstance(event, BaseEvent):
        return event
    parsed: BaseEvent = _EVENT.validate_python(dict(event))
    return parsed


def _now_ms() -> int:
    return int(time.time() * 1000)


def _run_id_of(event: BaseEvent) -> str | None:
    """The run an event names: ``run_id`` of the run events, or a ``runId`` carried along."""
    value = getattr(event, "run_id", None)
    if value is None:
        extra = event.model_extra or {}
        value = extra.get("runId", extra.get("run_id"))
    return value if isinstance(value, str) else None


def _with_block(m: Message, block: ToolUseBlock) -> Message:
    blocks = () if isinstance(m.content, str) else m.content
    if any(isinstance(b, ToolUseBlock) and b.id == block.id for b in blocks):
        return m
    head = (TextBlock(text=m.text),) if m.text else ()
    rest = tuple(b for b in blocks if not isinstance(b, TextBlock))
    return replace(m, content=head + rest + (block,))


def _with_text(m: Message, text: str) -> Message:
    if isinstance(m.content, str):
        return replace(m, content=text)
    rest = tuple(b for b in m.content if not isinstance(b, TextBlock))
    return replace(m, content=((TextBlock(text=text),) if text else ()) + rest)


def _parse_args(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return None


class AguiImporter:
    """Folds AG-UI events into a ``ThreadView``: ``importer.feed(event)`` returns the new view.

    Times (``reasoning_duration_ms`` = END − START arrival) come from ``at_ms`` when given,
    else from ``clock`` (milliseconds). Interrupts of the last ``RUN_FINISHED`` are kept in
    ``interrupts``, ``CUSTOM`` events in ``custom_events``.
    """

    def __init__(
        self,
        thread_id: str = "",
        *,
        clock: Callable[[], int] = _now_ms,
        subagent_run_id: str | None = None,
    ) -> None:
        self.view: ThreadView = empty_view(thread_id)
        self.children: dict[str, AguiImporter] = {}
        self.run_id: str | None = None
        self.interrupts: list[Interrupt] = []
        self.custom_events: list[CustomEvent] = []
        self.subagent_run_id = subagent_run_id
        self._clock = clock
        self._messages: list[Message] = []
        self._calls: dict[str, ToolCall] = {}
        self._current: str | None = None  # the run's current assistant message
        self._finalized: set[str] = set()  # assistant ids this run completed
        self._buffers: dict[str, str] = {}  # tool call id → argument text so far
        self._reasoning_start: tuple[str, int] | None = None
        self._open: set[str] = set()  # user/system text messages between START and END
        self._last_call: str | None = None

    # -- entry ---------------------------------------------------------------------------------

    def child(self, subagent_run_id: str) -> AguiImporter:
        """The importer of one child's transcript (created on first use: buffer, never drop)."""
        found = self.children.get(subagent_run_id)
        if found is None:
            found = AguiImporter(
                subagent_run_id, clock=self._clock, subagent_run_id=subagent_run_id
            )
            self.children[subagent_run_id] = found
        return found

    def feed(self, event: BaseEvent | Mapping[str, Any], *, at_ms: int | None = None) -> ThreadView:
        ev = parse_event(event)
        at = at_ms if at_ms is not None else self._clock()
        if self.subagent_run_id is None and not isinstance(ev, RunStartedEvent):
            run_id = _run_id_of(ev)
            if run_id is not None and run_id != self.run_id:
                return self.view  # a foreign or finished run
        target = getattr(ev, "subagent_run_id", None)
        lifecycle = isinstance(
            ev, SubagentStartedEvent | SubagentFinishedEvent | SubagentErrorEvent
        )
        if isinstance(target, str) and target != self.subagent_run_id and not lifecycle:
            self.child(target).feed(ev, at_ms=at)  # child events never reach the parent
            return self.view
        fields = self._apply(ev, at)
        self._publish(**fields)
        return self.view

    def _publish(self, **fields: Any) -> None:
        messages = tuple(self._messages)
        calls = frozen(self._calls)
        if messages == self.view.messages and calls == self.view.tool_calls and not fields:
            return
        self.view = replace(self.view, messages=messages, tool_calls=calls, **fields)

    # -- the messages --------------------------------------------------------------------------

    @property
    def _generation(self) -> str:
        if self.view.generation is not None:
            return self.view.generation
        return f"subagent:{self.subagent_run_id}" if self.subagent_run_id else "run:?"

    def _index(self, message_id: str) -> int | None:
        for i, m in enumerate(self._messages):
            if m.id == message_id:
                return i
        return None

    def _new(self, message_id: str, role: Any = "assistant", **fields: Any) -> int:
        if role == "assistant":
            fields.setdefault("delivery", Delivery.streaming(self._generation))
        else:
            fields.setdefault("delivery", Delivery.static(message_id))
        self._messages.append(
            Message(id=message_id, key=message_id, role=role, content="", **fields)
        )
        return len(self._messages) - 1

    def _complete(self, index: int, outcome: Outcome) -> None:
        m = self._messages[index]
        if m.delivery.phase is Phase.STREAMING:
            self._messages[index] = replace(
                m, delivery=Delivery.complete(m.delivery.generation, outcome)
            )
        if m.role == "assistant":
            self._finalized.add(m.id)

    def _own(self, message_id: str) -> int | None:
        """The streaming assistant ``message_id``, created if new; a new id completes the
        previous step with SUCCESS. None when the message is already complete."""
        index = self._index(message_id)
        if index is not None and (
            message_id in self._finalized or self._messages[index].delivery.is_complete
        ):
            return None
        if self._current is not None and self._current != message_id:
            previous = self._index(self._current)
            if previous is not None:
                self._complete(previous, Outcome.SUCCESS)
        self._current = message_id
        return index if index is not None else self._new(message_id)

    def _append(self, message_id: str | None, delta: str, *, reasoning: bool) -> None:
        message_id = message_id or self._current
        if message_id is None:
            return
        index = self._index(message_id)
        if index is None:
            index = self._own(message_id)
        if index is None:
            return
        m = self._messages[index]
        if m.delivery.is_complete and m.id not in self._open:
            return  # stale content for a completed step
        if reasoning:
            self._messages[index] = replace(m, reasoning=(m.reasoning or "") + delta)
        else:
            self._messages[index] = _with_text(m, m.text + delta)

    def _end_generation(self, outcome: Outcome) -> None:
        generation = self.view.generation
        for i, m in enumerate(self._messages):
            if m.delivery.phase is Phase.STREAMING and (
                generation is None or m.delivery.generation == generation
            ):
                self._complete(i, outcome)

    # -- dispatch ------------------------------------------------------------------------------

    def _apply(self, ev: BaseEvent, at: int) -> dict[str, Any]:
        if isinstance(ev, RunStartedEvent | RunFinishedEvent | RunErrorEvent):
            return self._run(ev, at)
        if isinstance(ev, TextMessageStartEvent | TextMessageContentEvent | TextMessageEndEvent):
            self._text(ev)
        elif isinstance(ev, TextMessageChunkEvent):
            message_id = ev.message_id or self._current
            if message_id is not None and self._index(message_id) is None:
                self._text(TextMessageStartEvent(message_id=message_id, role=ev.role))
            if ev.delta:
                self._append(message_id, ev.delta, reasoning=False)
        elif isinstance(ev, ReasoningMessageStartEvent):
            index = self._own(ev.message_id)
            if index is not None:
                m = self._messages[index]
                self._messages[index] = replace(m, reasoning="", reasoning_duration_ms=None)
                self._reasoning_start = (ev.message_id, at)
        elif isinstance(ev, ReasoningMessageContentEvent | ReasoningMessageChunkEvent):
            if ev.delta is not None:
                self._append(ev.message_id, ev.delta, reasoning=True)
        elif isinstance(ev, ReasoningMessageEndEvent):
            self._reasoning_end(ev.message_id, at)
        elif isinstance(
            ev, ToolCallStartEvent | ToolCallArgsEvent | ToolCallEndEvent | ToolCallChunkEvent
        ):
            self._tool_call(ev)
        elif isinstance(ev, ToolCallResultEvent):
            self._tool_result(ev)
        elif isinstance(ev, MessagesSnapshotEvent):
            self._snapshot(ev)
        elif isinstance(ev, SubagentStartedEvent | SubagentFinishedEvent | SubagentErrorEvent):
            return self._subagent(ev)
        elif isinstance(ev, CustomEvent):
            self.custom_events.append(ev)
        return {}  # anything else (RAW, STEP_*, STATE_*, unknown) changes nothing

    def _run(
        self, ev: RunStartedEvent | RunFinishedEvent | RunErrorEvent, at: int
    ) -> dict[str, Any]:
        if isinstance(ev, RunStartedEvent):
            if self.run_id is not None:
                self._end_generation(Outcome.INTERRUPTED)
            self.run_id = ev.run_id
            self._current, self._reasoning_start = None, None
            self._finalized.clear()
            self._buffers.clear()
            self.interrupts = []
            return {
                "thread_id": self.view.thread_id or ev.thread_id,
                "status": ThreadStatus(state="running", since=at * 1000),
                "generation": f"run:{ev.run_id}",
                "error": None,
            }
        if isinstance(ev, RunFinishedEvent):
            if self.run_id is None:
                return {}
            outcome, reason = Outcome.SUCCESS, None
            if isinstance(ev.outcome, RunFinishedInterruptOutcome):
                outcome, reason = Outcome.PAUSED, "awaiting_human"
                self.interrupts = list(ev.outcome.interrupts)
            elif isinstance(ev.outcome, RunFinishedCancelledOutcome):
                outcome, reason = Outcome.ABORTED, "aborted_by_user"
            self._end_generation(outcome)
            self.run_id, self._current = None, None
            status = ThreadStatus(state="idle", since=at * 1000, reason=reason)
            return {"status": status, "generation": None}
        self._end_generation(Outcome.ERROR)
        self.run_id, self._current = None, None
        code = ev.code or "error"
        error = AgentError(
            kind="server", message=ev.message, retryable=True, recovery="check", detail=ev.code
        )
        status = ThreadStatus(state="failed", since=at * 1000, reason=code)
        return {"status": status, "generation": None, "error": error}

    def _text(
        self, ev: TextMessageStartEvent | TextMessageContentEvent | TextMessageEndEvent
    ) -> None:
        if isinstance(ev, TextMessageStartEvent):
            if ev.role in (None, "assistant"):
                self._own(ev.message_id)
            elif self._index(ev.message_id) is None:
                role = "system" if ev.role == "developer" else ev.role
                self._new(ev.message_id, role, name=ev.name)
                self._open.add(ev.message_id)
        elif isinstance(ev, TextMessageContentEvent):
            self._append(ev.message_id, ev.delta, reasoning=False)
        else:
            self._open.discard(ev.message_id)  # END completes nothing (AG-UI has no completion)

    def _reasoning_end(self, message_id: str, at: int) -> None:
        pending = self._reasoning_start
        if pending is None or pending[0] != message_id:
            return
        self._reasoning_start = None  # consumed once
        index = self._index(message_id)
        if index is None or self.subagent_run_id is not None or message_id != self._current:
            return  # child reasoning is not timed
        m = self._messages[index]
        if m.delivery.phase is Phase.STREAMING and m.delivery.generation == self._generation:
            self._messages[index] = replace(m, reasoning_duration_ms=max(0, at - pending[1]))

    # -- tool calls ----------------------------------------------------------------------------

    def _tool_call(
        self, ev: ToolCallStartEvent | ToolCallArgsEvent | ToolCallEndEvent | ToolCallChunkEvent
    ) -> None:
        if isinstance(ev, ToolCallChunkEvent):
            call_id = ev.tool_call_id or self._last_call
            if call_id is None:
                return
            if call_id not in self._calls:
                start = ToolCallStartEvent(
                    tool_call_id=call_id,
                    tool_call_name=ev.tool_call_name or "",
                    parent_message_id=ev.parent_message_id,
                )
                self._tool_call(start)
            if ev.delta:
                self._tool_call(ToolCallArgsEvent(tool_call_id=call_id, delta=ev.delta))
            return
        call_id = ev.tool_call_id
        if isinstance(ev, ToolCallStartEvent):
            self._start_call(ev)
            return
        call = self._calls.get(call_id)
        if call is None:
            return
        if isinstance(ev, ToolCallArgsEvent):
            text = self._buffers.get(call_id, "") + ev.delta
            self._buffers[call_id] = text
            parsed = _parse_args(text)
            args = parsed if parsed is not None else call.args  # the last good args
            self._calls[call_id] = replace(call, args=args, args_raw=text)
            return
        text = self._buffers.pop(call_id, call.args_raw or "")
        parsed = _parse_args(text)
        args = parsed if parsed is not None else call.args
        done = call if call.settled else replace(call, status="complete")
        self._calls[call_id] = replace(done, args=args, args_raw=text or None)
        index = self._index(call.message_id) if call.message_id else None
        if index is not None:
            block = ToolUseBlock(id=call_id, name=call.name, args=args, args_raw=text or None)
            self._messages[index] = _with_block(self._messages[index], block)

    def _start_call(self, ev: ToolCallStartEvent) -> None:
        call_id = ev.tool_call_id
        self._last_call = call_id
        parent = ev.parent_message_id
        if parent is not None:
            index = self._own(parent)
            if index is None:
                index = self._index(parent)
            owner = parent
        else:  # the owner is an assistant message whose id is the call id
            index = self._index(call_id)
            owner = call_id
        if index is None:
            index = self._new(owner)
        m = self._messages[index]
        if call_id not in m.tool_call_ids:
            self._messages[index] = replace(m, tool_call_ids=(*m.tool_call_ids, call_id))
        known = self._calls.get(call_id)
        if known is None or not known.settled:
            self._calls[call_id] = ToolCall(
                id=call_id, name=ev.tool_call_name, args={}, status="running", message_id=owner
            )
        self._buffers[call_id] = ""

    def _tool_result(self, ev: ToolCallResultEvent) -> None:
        extra: dict[str, Any] = {}
        if isinstance(ev.content, str):
            text, result = ev.content, decode_json(ev.content)
        else:
            texts = [p.text for p in ev.content if isinstance(p, TextPart)]
            text = "".join(texts)
            result = decode_json(texts[0]) if len(texts) == 1 else text
            extra["parts"] = [p.model_dump(by_alias=True) for p in ev.content]
        generation = self.view.generation
        delivery = Delivery.complete(generation, Outcome.SUCCESS) if generation else None
        message = Message(
            id=ev.message_id,
            key=ev.message_id,
            role="tool",
            content=text,
            delivery=delivery or Delivery.static(ev.message_id),
            tool_call_id=ev.tool_call_id,
            extra=frozen(extra),
        )
        index = self._index(ev.message_id)
        if index is None:
            self._messages.append(message)
        else:
            self._messages[index] = message
        call = self._calls.get(ev.tool_call_id)
        if call is None:
            call = ToolCall(id=ev.tool_call_id, name="", args=None, status="complete")
        self._calls[ev.tool_call_id] = replace(call, status="complete", result=result)

    # -- snapshots and subagents ---------------------------------------------------------------

    def _snapshot(self, ev: MessagesSnapshotEvent) -> None:
        restored = from_agui_messages(ev.messages)
        current = self._index(self._current) if self._current else None
        live = self._messages[current] if current is not None else None
        streaming = live is not None and live.delivery.phase is Phase.STREAMING
        out: list[Message] = []
        for m in restored:
            if streaming and live is not None and m.id == live.id:
                m = replace(m, delivery=live.delivery)  # the run's assistant keeps streaming
            out.append(m)
        if streaming and live is not None and all(m.id != live.id for m in restored):
            out.append(live)  # omitted, still being generated
        answered = {m.tool_call_id: m for m in restored if m.role == "tool" and m.tool_call_id}
        for m in restored:
            for block in m.tool_uses:
                if block.id in self._calls:
                    continue  # first writer wins: the streamed entry is richer
                result = answered.get(block.id)
                self._calls[block.id] = ToolCall(
                    id=block.id,
                    name=block.name,
                    args=block.args,
                    status="complete" if result is not None else "pending",
                    result=decode_json(result.text) if result is not None else None,
                    args_raw=block.args_raw,
                    message_id=m.id,
                )
        self._messages = out

    def _subagent(
        self, ev: SubagentStartedEvent | SubagentFinishedEvent | SubagentErrorEvent
    ) -> dict[str, Any]:
        child_id = ev.subagent_run_id
        child = self.child(child_id)
        known = self.view.subagents.get(child_id) or SubagentEntry(id=child_id)
        if isinstance(ev, SubagentStartedEvent):
            entry = known.model_copy(
                update={"relationship": ev.name, "description": ev.description, "status": "running"}
            )
        elif isinstance(ev, SubagentFinishedEvent):
            suspended = isinstance(ev.outcome, SubagentFinishedSuspendedOutcome)
            if not suspended:
                child._end_generation(Outcome.SUCCESS)
                child._publish()
            entry = known.model_copy(update={"status": "running" if suspended else "idle"})
        else:
            child._end_generation(Outcome.ERROR)
            child._publish()
            entry = known.model_copy(update={"status": "failed"})
        return {"subagents": frozen({**self.view.subagents, child_id: entry})}
