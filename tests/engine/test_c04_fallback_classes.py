"""Fallbacks by error class (spec 04 §4.3, §4.12.3; issue 39 item 3), cases C04-139 …
C04-146: a model's fallbacks are used only on the error classes its ``fallback_on`` names
(default: rate limit, overload, 5xx, timeout/connection), never on a refused request; the
switch is recorded in the LLM row, the ``fallback_triggered`` event and the failed status.

A real Runtime on both stores with scripted providers (one per model, so the requests each
model received are counted). The fallback path with the real adapters and their fake HTTP
servers (reasoning never crossing providers) is C04-147 / C04-148 in
``test_cross_provider_replay.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pydantic
import pytest

from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.engine.options import EngineOptions
from threadloom.errors import DEFAULT_FALLBACK_ON, ProviderErrorCode
from threadloom.providers.script import Reply
from threadloom.providers.scripted import ScriptedProvider

FAST = EngineOptions(backoff_base_s=0.01)


@pytest.fixture
async def open_rt(db_url: str) -> AsyncIterator[Callable[..., Any]]:
    opened: list[Runtime] = []

    async def make(*definitions: Any) -> Runtime:
        runtime = await Runtime.open(
            db_url, definitions=Definitions().add(*definitions), options=FAST
        )
        opened.append(runtime)
        return runtime

    yield make
    for runtime in opened:
        await runtime.close(drain=0)


def chain(*models: Model) -> list[Any]:
    """The models, a prompt on the first, and the chat agent."""
    return [
        *models,
        Prompt(name="P", model=models[0].name, system="You are P."),
        Agent(name="chat", side_a=Side(prompt="P", label="Agent"), side_b=Side(label="User")),
    ]


class Turn:
    """One thread's turn: its events, LLM rows, runtime rows and status."""

    def __init__(self, events: list[Any], logs: Sequence[Any], status: Any, last: Any) -> None:
        self.telemetry = [
            dict(e.data)
            for e in events
            if e.kind == "telemetry" and e.data.get("type") == "fallback_triggered"
        ]
        self.rows = [r for r in logs if r.kind is None and r.provider != "system"]
        self.runtime_rows = [r for r in logs if r.provider == "system"]
        self.status = status
        self.last = last

    def entries(self) -> list[dict[str, Any]]:
        """The single ``errors`` entry of each failed LLM row, in order."""
        out = []
        for row in self.rows:
            if row.errors is not None:
                (entry,) = json.loads(row.errors)
                out.append(entry)
        return out


async def run_turn(rt: Runtime) -> Turn:
    state = await rt.create_thread("chat")
    tid = state.thread_id
    with rt.events.subscribe(tid, kinds=["telemetry"]) as sub:
        await rt.send_message(tid, "go")
        await rt.wait_idle(tid, timeout=10)
        events = sub.drain()
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    return Turn(events, await rt.store.list_logs(tid), await state.status(), page.messages[-1])


async def test_c04_139_rate_limited_model_left_for_its_fallback(open_rt: Any) -> None:
    pm = ScriptedProvider(
        [Reply.error("slow down", "rate_limit"), Reply.error("slow down", "rate_limit")],
        name="pm",
    )
    pf = ScriptedProvider([Reply.text("ok")], name="pf")
    rt = await open_rt(
        *chain(
            Model(name="M", provider=pm, model="m-1", fallbacks=("F",)),
            Model(name="F", provider=pf, model="f-1"),
        )
    )
    turn = await run_turn(rt)
    assert (len(pm.requests), len(pf.requests)) == (2, 1)
    first, second, served = turn.rows
    assert (first.model, second.model, served.model) == ("M", "M", "F")
    first_entry, second_entry = turn.entries()
    assert "fallback" not in first_entry  # M was retried after it, not left
    assert second_entry["fallback"] == {"from": "M", "to": "F", "reason": "rate_limit"}
    assert second_entry["type"] == "rate_limit"
    assert served.retry_of_log_id == second.id and served.error is None
    assert [{k: t[k] for k in ("from", "to", "reason", "log_id")} for t in turn.telemetry] == [
        {"from": "M", "to": "F", "reason": "rate_limit", "log_id": second.id}
    ]
    assert (turn.last.content, turn.last.log_id) == ("ok", served.id)
    assert turn.status.state == "idle"


@pytest.mark.parametrize(
    "code", ["rate_limit", "overloaded", "server_error", "timeout", "connection"]
)
async def test_c04_140_each_default_class_uses_the_fallback(
    open_rt: Any, code: ProviderErrorCode
) -> None:
    pm = ScriptedProvider([Reply.error(f"{code} happened", code)], name="pm")
    pf = ScriptedProvider([Reply.text("ok")], name="pf")
    rt = await open_rt(
        *chain(
            Model(name="M", provider=pm, model="m-1", fallbacks=("F",), max_attempts=1),
            Model(name="F", provider=pf, model="f-1"),
        )
    )
    turn = await run_turn(rt)
    assert (len(pm.requests), len(pf.requests)) == (1, 1)
    assert [(t["from"], t["to"], t["reason"]) for t in turn.telemetry] == [("M", "F", code)]
    assert turn.entries()[0]["fallback"] == {"from": "M", "to": "F", "reason": code}
    assert turn.last.content == "ok"


@pytest.mark.parametrize(
    "code", ["invalid_request", "context_length", "content_filter", "authentication", "permission"]
)
async def test_c04_141_a_refused_request_never_falls_back(
    open_rt: Any, code: ProviderErrorCode
) -> None:
    pm = ScriptedProvider([Reply.error("refused as sent", code)], name="pm")
    pf = ScriptedProvider([Reply.text("should not be asked")], name="pf")
    rt = await open_rt(
        *chain(
            Model(name="M", provider=pm, model="m-1", fallbacks=("F",)),
            Model(name="F", provider=pf, model="f-1"),
        )
    )
    turn = await run_turn(rt)
    assert (len(pm.requests), len(pf.requests)) == (1, 0)  # not retried, no fallback
    assert turn.telemetry == []
    (row,) = turn.rows
    assert "fallback" not in turn.entries()[0]
    assert (turn.status.state, turn.status.reason) == ("failed", "step_error")
    assert turn.status.error is not None
    assert turn.status.error.message == 'Model "M" (pm): refused as sent'
    assert (turn.status.error.code, turn.status.error.log_id) == (code, row.id)
    (runtime_row,) = turn.runtime_rows
    assert runtime_row.error is not None
    assert runtime_row.error.startswith(
        "All retry attempts exhausted for model M and 0 fallbacks: refused as sent"
    )


class Broken:
    """A provider whose stream raises a plain exception (an ``unknown`` error)."""

    name = "broken"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: Any) -> Any:
        self.calls += 1
        raise RuntimeError("socket in a strange state")
        yield  # pragma: no cover - makes this an async generator


async def test_c04_142_unknown_errors_fall_back_only_when_named(open_rt: Any) -> None:
    quiet, opted = Broken(), Broken()
    pf = ScriptedProvider([Reply.text("ok")], name="pf")
    rt = await open_rt(
        *chain(
            Model(name="M", provider=quiet, model="m-1", fallbacks=("F",)),
            Model(name="F", provider=pf, model="f-1"),
        ),
        Model(
            name="U",
            provider=opted,
            model="u-1",
            fallbacks=("F",),
            fallback_on=(*DEFAULT_FALLBACK_ON, "unknown"),
        ),
        Prompt(name="PU", model="U", system="You are U."),
        Agent(name="opted", side_a=Side(prompt="PU", label="Agent"), side_b=Side(label="User")),
    )
    turn = await run_turn(rt)
    assert (quiet.calls, len(pf.requests)) == (2, 0)  # retried (retryable), then stopped
    assert turn.telemetry == []
    assert turn.status.error is not None
    assert (
        turn.status.error.message == 'Model "M" (broken): RuntimeError: socket in a strange state'
    )
    assert turn.status.error.code == "unknown"

    state = await rt.create_thread("opted")
    await rt.send_message(state.thread_id, "go")
    await rt.wait_idle(state.thread_id, timeout=10)
    page = await state.get_messages(order="asc", limit=None, include_silent=True)
    assert (opted.calls, len(pf.requests)) == (2, 1)
    assert page.messages[-1].content == "ok"


async def test_c04_143_a_model_names_its_classes(open_rt: Any) -> None:
    only_429 = ScriptedProvider(
        [Reply.error("busy", "overloaded"), Reply.error("too many", "rate_limit")], name="pm"
    )
    never = ScriptedProvider([Reply.error("too many", "rate_limit")], name="pn")
    pf = ScriptedProvider([Reply.text("ok")], name="pf")
    rt = await open_rt(
        *chain(
            Model(
                name="M",
                provider=only_429,
                model="m-1",
                fallbacks=("F",),
                fallback_on=("rate_limit",),
                max_attempts=1,
            ),
            Model(name="F", provider=pf, model="f-1"),
        ),
        Model(
            name="N", provider=never, model="n-1", fallbacks=("F",), fallback_on=(), max_attempts=1
        ),
        Prompt(name="PN", model="N", system="You are N."),
        Agent(name="never", side_a=Side(prompt="PN", label="Agent"), side_b=Side(label="User")),
    )
    overloaded = await run_turn(rt)  # overloaded is not named: no fallback
    assert (len(only_429.requests), len(pf.requests)) == (1, 0)
    assert overloaded.status.error is not None
    assert overloaded.status.error.message == 'Model "M" (pm): busy'
    limited = await run_turn(rt)  # rate_limit is named
    assert (len(only_429.requests), len(pf.requests)) == (2, 1)
    assert [(t["from"], t["reason"]) for t in limited.telemetry] == [("M", "rate_limit")]
    assert limited.last.content == "ok"

    state = await rt.create_thread("never")
    await rt.send_message(state.thread_id, "go")
    await rt.wait_idle(state.thread_id, timeout=10)
    status = await state.status()
    assert (len(never.requests), len(pf.requests), status.state) == (1, 1, "failed")


async def test_c04_144_the_chain_stops_at_an_error_it_does_not_name(open_rt: Any) -> None:
    pm = ScriptedProvider([Reply.error("slow down", "rate_limit")], name="pm")
    pf = ScriptedProvider([Reply.error("unknown field", "invalid_request")], name="pf")
    pg = ScriptedProvider([Reply.text("never")], name="pg")
    rt = await open_rt(
        *chain(
            Model(name="M", provider=pm, model="m-1", fallbacks=("F", "G"), max_attempts=1),
            Model(name="F", provider=pf, model="f-1"),
            Model(name="G", provider=pg, model="g-1"),
        )
    )
    turn = await run_turn(rt)
    assert (len(pm.requests), len(pf.requests), len(pg.requests)) == (1, 1, 0)
    assert [(t["from"], t["to"]) for t in turn.telemetry] == [("M", "F")]
    assert turn.status.error is not None
    assert turn.status.error.message == (
        'Model "M" and its fallbacks failed (M: rate_limit); the last, '
        'Model "F" (pf): unknown field'
    )
    m_entry, f_entry = turn.entries()
    assert m_entry["fallback"]["to"] == "F" and "fallback" not in f_entry
    (runtime_row,) = turn.runtime_rows
    assert runtime_row.error is not None
    assert runtime_row.error.startswith("All retry attempts exhausted for model M and 1 fallbacks")


async def test_c04_145_every_model_of_the_chain_left_and_why(open_rt: Any) -> None:
    providers = [
        ScriptedProvider([Reply.error(f"{n} busy", "overloaded")], name=f"p{n.lower()}")
        for n in "MFG"
    ]
    rt = await open_rt(
        *chain(
            Model(
                name="M", provider=providers[0], model="m-1", fallbacks=("F", "G"), max_attempts=1
            ),
            # F's own settings do not steer M's chain
            Model(name="F", provider=providers[1], model="f-1", fallback_on=(), max_attempts=1),
            Model(name="G", provider=providers[2], model="g-1", max_attempts=1),
        )
    )
    turn = await run_turn(rt)
    assert [len(p.requests) for p in providers] == [1, 1, 1]
    rows = turn.rows
    assert [(t["from"], t["to"], t["reason"], t["log_id"]) for t in turn.telemetry] == [
        ("M", "F", "overloaded", rows[0].id),
        ("F", "G", "overloaded", rows[1].id),
    ]
    assert [e.get("fallback") for e in turn.entries()] == [
        {"from": "M", "to": "F", "reason": "overloaded"},
        {"from": "F", "to": "G", "reason": "overloaded"},
        None,
    ]
    assert [r.retry_of_log_id for r in rows] == [None, rows[0].id, rows[1].id]
    assert turn.status.error is not None
    assert turn.status.error.message == (
        'Model "M" and its fallbacks failed (M: overloaded, F: overloaded); the last, '
        'Model "G" (pg): G busy'
    )
    assert turn.status.error.log_id == rows[2].id


def test_c04_146_fallback_on_is_typed_and_defaults_to_the_four_classes() -> None:
    model = Model(name="M", provider="openai", model="gpt-x", fallbacks=("F",))
    assert model.fallback_on == ("rate_limit", "overloaded", "server_error", "timeout")
    assert Model(name="M", provider="openai", model="gpt-x", fallback_on=()).fallback_on == ()
    with pytest.raises(pydantic.ValidationError, match="fallback_on"):
        Model(name="M", provider="openai", model="gpt-x", fallback_on=("bad_request",))  # type: ignore[arg-type]
