"""Compaction (spec 23): a summary written by the model stands for the older part of a
thread's history in later requests; the record is durable and the messages stay.

``Compactor.compact`` chooses the range (from the thread's first top-level message to the
last one before the messages it keeps, ending before a user message so no tool exchange is
cut), asks the model for a summary — folding the previous compaction's summary with the
messages after it, and, when the model's context window is known, in chunks that each fit
it — stores the record and makes the thread's live histories use it. ``maybe_compact`` is
the threshold trigger a step calls when its model sets ``compact_at``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from threadloom.define.model import Model
from threadloom.engine.request.compacted import (
    COMPACTION_KEY,
    active_compaction,
    native_in,
    summary_messages,
)
from threadloom.engine.request.presentation import (
    RequestMessage,
    convert,
    normalize,
    provider_message,
)
from threadloom.engine.run.compaction_calls import NATIVE_ENDPOINT, Requests
from threadloom.errors import (
    CompactionNotFound,
    InvalidArgument,
    NothingToCompact,
    ProviderError,
    ThreadNotFound,
)
from threadloom.providers.base import generate
from threadloom.providers.types import ProviderRequest, SystemMessage, Usage, UserMessage
from threadloom.records import Compaction, LogRow, Message, new_id
from threadloom.records.compaction import CompactionTrigger
from threadloom.thread.history import MessageHistory
from threadloom.thread.hub import ThreadHub

logger = logging.getLogger("threadloom.engine")

SUMMARY_INSTRUCTIONS = (
    "You compact a conversation between a user and an AI assistant so that the assistant "
    "can continue it from your summary alone. Write a concise summary of the conversation "
    "below: the user's goals and requests, decisions made, facts and results learnt (from "
    "tools too), names, numbers and identifiers that matter, and what is still open. Keep "
    "it factual; do not add instructions of your own. If a previous summary is given, "
    "your summary replaces it: carry over what still matters."
)

CHUNK_FRACTION = 0.6
"""The part of the context window one summary request's conversation may fill."""


def estimate_tokens(text: str | None) -> int:
    """The token estimate compaction uses: ceil(characters / 4) (the scripted model's)."""
    return math.ceil(len(text) / 4) if text else 0


def message_tokens(message: Message) -> int:
    """The estimated tokens of a message: its content and its tool calls' text."""
    return estimate_tokens(message.content) + estimate_tokens(message.tool_calls)


def eligible(records: Sequence[Message]) -> list[Message]:
    """The messages a request may carry: top-level and completed."""
    return [m for m in records if m.depth == 0 and m.status == "completed"]


def _start(messages: Sequence[Message], active: Compaction | None) -> int:
    """The index of the first message after the active compaction's range."""
    if active is None:
        return 0
    for index, message in enumerate(messages):
        if message.id == active.last_message_id:
            return index + 1
    return 0


def choose_cut(
    messages: Sequence[Message], start: int, keep_tokens: int | None, keep_messages: int | None
) -> int:
    """The index of the first message kept live: the most recent messages within the
    budget are kept (at least one), then the cut moves back to a user message, so the
    range ends with a whole exchange. ``<= start``: nothing to compact."""
    end = len(messages)
    if keep_messages is not None:
        cut = max(end - keep_messages, 0)
    else:
        budget = keep_tokens or 0
        cut = end - 1 if end else 0
        used = message_tokens(messages[cut]) if end else 0
        while cut - 1 > start and used + message_tokens(messages[cut - 1]) <= budget:
            cut -= 1
            used += message_tokens(messages[cut])
    while start < cut < end and messages[cut].role != "user":
        cut -= 1
    return cut


def transcript_line(message: Message) -> str:
    """One message as a line of the transcript the summarising model reads."""
    who = message.role if not message.name else f"{message.role} ({message.name})"
    parts = [message.content or ""]
    for call in message.decoded_tool_calls():
        parts.append(f"[called {call.function.name}({call.function.arguments})]")
    text = " ".join(p for p in parts if p)
    if message.role == "tool":
        return f"tool result ({message.name or message.tool_call_id}): {text}"
    return f"{who}: {text}"


def chunks(lines: list[str], budget: int | None) -> list[list[str]]:
    """The transcript in chunks of at most ``budget`` estimated tokens (one chunk when
    ``budget`` is None); a single longer line is cut to fit."""
    if budget is None:
        return [lines]
    out: list[list[str]] = [[]]
    used = 0
    for line in lines:
        if estimate_tokens(line) > budget:
            line = line[: max(budget * 4 - 20, 1)] + " […]"
        cost = estimate_tokens(line) + 1
        if out[-1] and used + cost > budget:
            out.append([])
            used = 0
        out[-1].append(line)
        used += cost
    return out


def summary_request(model: Model, previous: str | None, lines: list[str]) -> ProviderRequest:
    """The request that asks ``model`` for a summary."""
    parts = []
    if previous:
        parts.append(f"Previous summary:\n{previous}")
    parts.append("Conversation:\n" + "\n".join(lines))
    max_out = model.max_output_tokens
    if model.context_window is not None:
        cap = max(model.context_window // 8, 16)
        max_out = min(max_out, cap) if max_out is not None else cap
    return ProviderRequest(
        model=model.model,
        messages=[
            SystemMessage(content=SUMMARY_INSTRUCTIONS),
            UserMessage(content="\n\n".join(parts)),
        ],
        max_output_tokens=max_out,
        provider_options=dict(model.provider_options),
        metadata={"purpose": "compaction"},
    )


def _provider_name(provider: Any, model: Model) -> str:
    """The adapter's name for a log row (the model's provider when it has none)."""
    name = getattr(provider, "name", None)
    return name if isinstance(name, str) else str(model.provider)


def _generating(
    provider: Any, request: ProviderRequest
) -> Callable[[], Awaitable[tuple[Any, Usage, dict[str, Any]]]]:
    """A summary request as ``Requests.send`` calls it: the response, its usage and the
    response body its row keeps."""

    async def call() -> tuple[Any, Usage, dict[str, Any]]:
        response = await generate(provider, request)
        usage = response.usage or Usage()
        body = {
            "content": response.content,
            "finish_reason": response.finish_reason,
            "usage": usage.model_dump(),
        }
        return response, usage, body

    return call


def native_request(
    model: Model, active: Compaction | None, provider: Any, records: Sequence[Message]
) -> ProviderRequest:
    """The request of a provider's own compaction (spec 23 §23.2 rule 7): the active
    compaction's summary and acknowledgement (its native item in their place when it is
    the provider's, ``native_in``), then the messages to fold, as the agent's side sees
    them."""
    presented = [convert(m, "assistant", include_reasoning=True) for m in records]
    folded = [p.request for p in presented if p is not None]
    if active is not None:
        pair = summary_messages(active)
        folded[0:0] = [
            RequestMessage(role="user", content=pair[0].content, source_id=pair[0].id),
            RequestMessage(role="assistant", content=pair[1].content, source_id=pair[1].id),
        ]
    normalized = normalize(folded, bool(getattr(model, "supports_images", True)))
    return ProviderRequest(
        model=model.model,
        messages=[provider_message(m) for m in normalized],
        native_compaction=native_in(active, normalized, provider, model.model),
        metadata={"purpose": "compaction"},
    )


async def _native(
    requests: Requests,
    provider: Any,
    model: Model,
    active: Compaction | None,
    records: Sequence[Message],
) -> Any:
    """The provider's own compaction item, where its adapter makes one (``compact``);
    None otherwise, when the adapter's ``compactable`` (a free check, no row) says the
    provider would not compact these messages or cannot tell, or when the provider
    refused (its row says why; the text summary stands alone)."""
    compact = getattr(provider, "compact", None)
    if getattr(provider, "native_compaction", None) is None or not callable(compact):
        return None
    request = native_request(model, active, provider, records)
    compactable = getattr(provider, "compactable", None)
    if callable(compactable):
        try:
            if not await compactable(request):
                return None
        except ProviderError as exc:
            logger.warning(
                "compaction: %s could not count the range's tokens: %s", exc.provider, exc
            )
            return None

    async def call() -> tuple[Any, Usage, dict[str, Any]]:
        done = await compact(request)
        return done.item, done.usage, done.body

    try:
        return await requests.send(request, call, endpoint=NATIVE_ENDPOINT)
    except ProviderError:
        return None


class Compactor:
    """Compacts threads for one runtime (``hub.compact`` for ``ThreadState.compact``)."""

    def __init__(self, hub: ThreadHub, providers: Any, tracing: Any = None) -> None:
        self.hub = hub
        self.providers = providers
        self.tracing = tracing
        """The runtime's tracing (``engine.telemetry``), when on; set after opening."""

    def _provider(self, model: Model) -> Any:
        if isinstance(model.provider, str):
            return self.providers.get(model.provider)
        return model.provider

    def model_of(self, agent_id: str, name: str | None) -> Model:
        """The model that writes the summary: ``name``, else the model of the thread's
        agent's first side."""
        defs = self.hub.definitions
        if name is None:
            agent = defs.agent(agent_id)
            side = agent.side_a if agent is not None else None
            prompt = defs.prompt(side.prompt) if side is not None and side.prompt else None
            name = prompt.model if prompt is not None else None
        model = defs.model(name) if name is not None else None
        if model is None:
            raise InvalidArgument(f'compaction: model "{name}" is not defined')
        return model

    def histories(self, thread_id: str) -> list[MessageHistory]:
        return self.hub.live_histories(thread_id)

    def reflect(self, thread_id: str, active: Compaction | None) -> None:
        """Make the thread's live histories use ``active`` from their next request."""
        for history in self.histories(thread_id):
            history.caches[COMPACTION_KEY] = active

    def announce(self, kind: str, record: Compaction, active: Compaction | None) -> None:
        """The stream's ephemeral ``event`` of a compaction made or undone (spec 09
        §9.9.4): the record and the id of the compaction active now."""
        if not self.hub.bus.wants(record.thread_id):
            return
        data = {"compaction": record.to_wire(), "active": active.id if active else None}
        self.hub.publish(record.thread_id, "event", None, {"event_type": kind, "data": data})

    async def compact(
        self,
        thread_id: str,
        *,
        keep_messages: int | None = None,
        model_name: str | None = None,
        trigger: CompactionTrigger = "explicit",
        history: MessageHistory | None = None,
        span: Any = None,
        fence: Any = None,
        on_row: Callable[[LogRow], None] | None = None,
    ) -> Compaction:
        """Compact the thread now (spec 23 §23.2); ``NothingToCompact`` when no message lies
        between the active compaction and the messages kept. Each model request is an LLM
        log row of the thread (``compaction_calls``), written under ``fence`` and told to
        ``on_row`` (a run's budget)."""
        store = self.hub.store
        row = await store.get_thread(thread_id)
        if row is None:
            raise ThreadNotFound(thread_id)
        if keep_messages is not None and keep_messages < 1:
            raise InvalidArgument("keep_messages must be at least 1")
        model = self.model_of(row.agent_id, model_name)
        if history is not None:
            records = history.raw()
            active = await active_compaction(store, thread_id, history)
        else:
            records = await store.top_level_history(thread_id)
            found = await store.list_compactions(thread_id, active_only=True)
            active = found[-1] if found else None
        messages = eligible(records)
        start = _start(messages, active)
        keep_tokens = (
            int(model.context_window * model.compact_keep)
            if model.context_window is not None
            else None
        )
        if keep_messages is None and keep_tokens is None:
            keep_messages = 1
        cut = choose_cut(messages, start, keep_tokens, keep_messages)
        if cut <= start:
            raise NothingToCompact("Nothing to compact: no message lies before those kept")
        summary = active.summary if active is not None else None
        budget = None
        if model.context_window is not None:
            budget = int(model.context_window * CHUNK_FRACTION)
        lines = [transcript_line(m) for m in messages[start:cut]]
        provider = self._provider(model)
        requests = Requests(
            self.hub, thread_id, model, _provider_name(provider, model), fence, on_row
        )
        for chunk in chunks(lines, budget and max(budget - estimate_tokens(summary), 16)):
            request = summary_request(model, summary, chunk)
            response = await requests.send(request, _generating(provider, request))
            summary = (response.content or "").strip()
        item = await _native(requests, provider, model, active, messages[start:cut])
        spent = requests.spent
        record = Compaction(
            id=new_id(),
            thread_id=thread_id,
            first_message_id=messages[0].id,
            last_message_id=messages[cut - 1].id,
            message_count=cut,
            summary=summary or "",
            model=model.name,
            trigger=trigger,
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            cost=round(spent.cost, 12) if spent.cost is not None else None,
            provider_item=item,
        )
        stored = await store.add_compaction(record)
        if stored is None:
            raise ThreadNotFound(thread_id)
        self.reflect(thread_id, stored)
        self.announce("compaction_created", stored, stored)
        if self.tracing is not None:
            self.tracing.compacted(span, stored)
        return stored

    async def undo(self, thread_id: str, compaction_id: str) -> Compaction:
        """Undo a compaction (spec 23 §23.5): the record stays, marked undone; the next
        request uses the originals again (or the compaction active before it)."""
        undone = await self.hub.store.undo_compaction(thread_id, compaction_id)
        if undone is None:
            if await self.hub.store.get_thread(thread_id) is None:
                raise ThreadNotFound(thread_id)
            raise CompactionNotFound(compaction_id)
        found = await self.hub.store.list_compactions(thread_id, active_only=True)
        active = found[-1] if found else None
        self.reflect(thread_id, active)
        self.announce("compaction_undone", undone, active)
        return undone


def context_estimate(
    messages: Sequence[Message], active: Compaction | None, system: str | None
) -> int:
    """The estimated tokens of the next request's context: the system text, the active
    summary and the messages after its range."""
    start = _start(messages, active)
    total = estimate_tokens(system)
    if active is not None and start:
        total += estimate_tokens(active.summary) + 40
    for message in messages[start:]:
        total += message_tokens(message)
    return total


async def maybe_compact(env: Any, model: Model) -> Compaction | None:
    """The threshold trigger (spec 23 §23.3): compact before this step's request when its
    estimated context exceeds ``compact_at`` of the model's window."""
    run = env.run
    compactor: Compactor | None = getattr(run.manager, "compactor", None)
    if compactor is None or model.context_window is None or model.compact_at is None:
        return None
    history = run.execution.message_history
    active = await active_compaction(env.state.hub.store, env.state.thread_id, history)
    system = run.definitions.render_system(env.prompt, env.state.arguments, env.state.context)
    estimate = context_estimate(eligible(history.raw()), active, system)
    if estimate <= model.context_window * model.compact_at:
        return None
    try:
        return await compactor.compact(
            env.state.thread_id,
            model_name=model.name,
            trigger="threshold",
            history=history,
            span=getattr(run, "span", None),
            fence=env.state.fence,
            on_row=run.budget.spent if run.budget is not None else None,
        )
    except NothingToCompact:
        return None
