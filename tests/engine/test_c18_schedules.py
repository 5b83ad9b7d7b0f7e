"""Spec 18: schedules fired by a real runtime on a real store (SQLite and PostgreSQL), its
clock a settable one so that due times, downtimes and DST changes are exact."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client import generate_latest

from fakes import FakeClock
from store_probe import StoreProbe
from threadloom import Agent, Definitions, Runtime, Schedule, Side
from threadloom.define import Model, Prompt
from threadloom.engine.run.schedules import ScheduleOptions, fire_key
from threadloom.errors import (
    AgentNotFound,
    DefinitionError,
    InvalidArgument,
    ScheduleExists,
    ScheduleNotFound,
    ThreadNotFound,
)
from threadloom.providers.scripted import Reply, ScriptedProvider

S = 1_000_000
MIN = 60 * S
HOUR = 60 * MIN
DAY = 24 * HOUR


def us(*args: int) -> int:
    """A UTC date and time as µs since the epoch."""
    return round(datetime(*args, tzinfo=UTC).timestamp() * S)  # type: ignore[misc]


def definitions(provider: ScriptedProvider | None = None, *extra: Any) -> Definitions:
    return Definitions().add(
        Model(name="m", provider=provider or ScriptedProvider(), model="m"),
        Prompt(name="p", model="m", system="You report."),
        Agent(name="reporter", side_a=Side(prompt="p"), side_b=Side(label="User")),
        *extra,
    )


Opener = Callable[..., Any]


@pytest.fixture
async def open_rt(db_url: str) -> AsyncIterator[Opener]:
    opened: list[Runtime] = []

    async def opener(clock: FakeClock, *extra: Any, **kw: Any) -> Runtime:
        rt = await Runtime.open(
            db_url,
            definitions=kw.pop("defs", None) or definitions(kw.pop("provider", None), *extra),
            clock=clock,
            schedules=ScheduleOptions(tick_s=None, **kw),
        )
        opened.append(rt)
        return rt

    yield opener
    for rt in opened:
        await rt.close(drain=0)


async def _user_texts(rt: Runtime, thread_id: str) -> list[str]:
    page = await (await rt.thread(thread_id)).get_messages(order="asc")
    return [m.content for m in page.messages if m.role == "user"]


# -- the definition and its times -------------------------------------------------------------


def test_c18_001_a_schedule_names_one_time_rule_and_one_target() -> None:
    """C18-001: exactly one of cron/interval_s and of thread_id/agent; a cron expression
    cronsim cannot read, a time zone that is not IANA's, an id out of its alphabet, an
    interval under a second and ``new_thread`` with a thread target are refused."""
    Schedule(id="daily", message="go", cron="30 2 * * *", timezone="Europe/Berlin", agent="a")
    Schedule(id="tick.1", message="go", interval_s=600, thread_id="t")
    bad: list[dict[str, Any]] = [
        {"cron": "30 2 * * *", "interval_s": 60, "agent": "a"},
        {"agent": "a"},
        {"cron": "30 2 * * *"},
        {"cron": "30 2 * * *", "agent": "a", "thread_id": "t"},
        {"cron": "61 2 * * *", "agent": "a"},
        {"cron": "30 2 * * *", "agent": "a", "timezone": "Mars/Olympus"},
        {"interval_s": 0, "agent": "a"},
        {"interval_s": 60, "thread_id": "t", "overlap": "new_thread"},
        {"interval_s": 60, "thread_id": "t", "arguments": {"x": 1}},
        {"interval_s": 60, "agent": "a", "overlap": "sometimes"},
        {"interval_s": 60, "agent": "a", "catchup": "all"},
        {"interval_s": 60, "agent": "a", "arguments": {"not json": object()}},
    ]
    for fields in bad:
        with pytest.raises(ValueError):
            Schedule(id="s", message="go", **fields)
    with pytest.raises(ValueError):
        Schedule(id="no spaces", message="go", interval_s=60, agent="a")
    with pytest.raises(ValueError):
        Schedule(id="s", message="", interval_s=60, agent="a")


def test_c18_002_cron_times_are_read_in_the_schedule_time_zone() -> None:
    """C18-002: ``0 9 * * *`` in Europe/Berlin is 08:00 UTC in winter and 07:00 UTC in
    summer; in UTC (the default) 09:00 UTC; the next time is strictly after the given one."""
    berlin = Schedule(id="s", message="m", cron="0 9 * * *", timezone="Europe/Berlin", agent="a")
    assert berlin.next_after(us(2026, 1, 10, 12, 0)) == us(2026, 1, 11, 8, 0)
    assert berlin.next_after(us(2026, 7, 10, 12, 0)) == us(2026, 7, 11, 7, 0)
    assert berlin.next_after(us(2026, 7, 11, 7, 0)) == us(2026, 7, 12, 7, 0)
    utc = Schedule(id="s", message="m", cron="0 9 * * *", agent="a")
    assert utc.next_after(us(2026, 1, 10, 8, 59)) == us(2026, 1, 10, 9, 0)


def test_c18_003_a_time_skipped_by_spring_forward_fires_once_after_the_gap() -> None:
    """C18-003: 02:30 daily in Europe/Berlin; on 2026-03-29 02:00 CET becomes 03:00 CEST,
    so 02:30 does not exist that day: the schedule fires once, at 03:00 CEST (01:00 UTC),
    then at 02:30 CEST (00:30 UTC) the next day."""
    s = Schedule(id="s", message="m", cron="30 2 * * *", timezone="Europe/Berlin", agent="a")
    first = s.next_after(us(2026, 3, 28, 12, 0))
    assert first == us(2026, 3, 29, 1, 0)
    assert s.next_after(first) == us(2026, 3, 30, 0, 30)
    assert s.next_after(us(2026, 3, 27, 12, 0)) == us(2026, 3, 28, 1, 30)  # 02:30 CET


def test_c18_004_a_time_repeated_by_fall_back_fires_once_at_its_first_occurrence() -> None:
    """C18-004: 02:30 daily in Europe/Berlin; on 2026-10-25 03:00 CEST becomes 02:00 CET,
    so 02:30 happens twice: the schedule fires once, at 02:30 CEST (00:30 UTC), not again
    at 02:30 CET (01:30 UTC); the next day at 02:30 CET (01:30 UTC). An expression whose
    hour is ``*`` fires at both 02:30s, which are distinct instants."""
    s = Schedule(id="s", message="m", cron="30 2 * * *", timezone="Europe/Berlin", agent="a")
    first = s.next_after(us(2026, 10, 24, 12, 0))
    assert first == us(2026, 10, 25, 0, 30)
    assert s.next_after(first) == us(2026, 10, 26, 1, 30)
    hourly = Schedule(id="h", message="m", cron="30 * * * *", timezone="Europe/Berlin", agent="a")
    times = [hourly.next_after(us(2026, 10, 24, 23, 45))]
    for _ in range(3):
        times.append(hourly.next_after(times[-1]))
    assert times == [
        us(2026, 10, 25, 0, 30),
        us(2026, 10, 25, 1, 30),
        us(2026, 10, 25, 2, 30),
        us(2026, 10, 25, 3, 30),
    ]


async def test_c18_005_dst_days_fire_once_each_through_the_runtime(open_rt: Opener) -> None:
    """C18-005: a runtime whose clock walks over both 2026 DST changes of Europe/Berlin,
    ticking every 10 minutes, fires the 02:30 schedule once a day: at 01:00 UTC on
    2026-03-29 (spring-forward) and at 00:30 UTC on 2026-10-25 (fall-back), one thread
    each."""
    for start, expected in (
        (
            us(2026, 3, 27, 12, 0),
            [us(2026, 3, 28, 1, 30), us(2026, 3, 29, 1, 0), us(2026, 3, 30, 0, 30)],
        ),
        (
            us(2026, 10, 23, 12, 0),
            [us(2026, 10, 24, 0, 30), us(2026, 10, 25, 0, 30), us(2026, 10, 26, 1, 30)],
        ),
    ):
        clock = FakeClock(start)
        rt = await open_rt(clock)
        sid = f"dst{start}"
        await rt.schedules.create(
            Schedule(
                id=sid,
                message="report",
                cron="30 2 * * *",
                timezone="Europe/Berlin",
                agent="reporter",
            )
        )
        fired: list[int] = []
        while clock.now < start + 3 * DAY:
            clock.now += 10 * MIN
            for fire in await rt.schedules.tick():
                if fire.status == "fired":
                    fired.append(fire.due_us)
                    # the fake clock jumps a day in milliseconds: let the run end first, or
                    # a loaded machine's slow run makes the next day's fire `skipped` (the
                    # overlap rule), which is not what this test is about
                    assert fire.thread_id is not None
                    await rt.wait_idle(fire.thread_id, timeout=30)
        assert fired == expected
        assert (await rt.schedules.get(sid)).fire_count == 3
        await rt.schedules.delete(sid)
        await rt.close(drain=0)


# -- firing -------------------------------------------------------------------------------------


async def test_c18_010_a_due_fire_starts_a_thread_of_the_agent_and_fires_once(
    open_rt: Opener,
) -> None:
    """C18-010: an agent-target schedule, due → one tick creates a thread of the agent with
    the schedule's arguments and owner (its id a UUID4 in form), sends the message (its
    ``client_message_id`` the fire's key), and the run settles; a second tick at the same
    time fires nothing; the row records the fire (count, last due time, status, thread) and
    the next time."""
    clock = FakeClock(us(2026, 5, 4, 8, 59))
    rt = await open_rt(clock)
    row = await rt.schedules.create(
        Schedule(
            id="morning",
            message="write the report",
            cron="0 9 * * *",
            agent="reporter",
            arguments={"team": "ops"},
            user_id="u1",
        )
    )
    assert row.next_fire_us == us(2026, 5, 4, 9, 0) and row.source == "api"
    assert await rt.schedules.tick() == []  # not yet due
    clock.now = us(2026, 5, 4, 9, 0, 2)
    fires = await rt.schedules.tick()
    assert [(f.schedule_id, f.due_us, f.status) for f in fires] == [
        ("morning", us(2026, 5, 4, 9, 0), "fired")
    ]
    thread_id = fires[0].thread_id
    assert thread_id is not None and uuid.UUID(thread_id).version == 4  # decision D6
    await rt.wait_idle(thread_id, timeout=10)
    record = await rt.get_thread_record(thread_id)
    assert record.agent_id == "reporter" and record.user_id == "u1"
    assert record.arguments == {"team": "ops"} and "schedule:morning" in record.tags
    page = await (await rt.thread(thread_id)).get_messages(order="asc")
    assert [(m.role, m.content) for m in page.messages] == [
        ("user", "write the report"),
        ("assistant", "Test response received."),
    ]
    meta = page.messages[0].metadata or {}
    assert meta["client_message_id"] == fire_key("morning", us(2026, 5, 4, 9, 0))
    assert await rt.schedules.tick() == []
    row = await rt.schedules.get("morning")
    assert (row.fire_count, row.last_fire_us, row.last_status, row.last_thread_id) == (
        1,
        us(2026, 5, 4, 9, 0),
        "fired",
        thread_id,
    )
    assert row.next_fire_us == us(2026, 5, 5, 9, 0) and row.fire_due_us is None


async def test_c18_011_a_thread_target_gets_the_message_in_its_thread(open_rt: Opener) -> None:
    """C18-011: a schedule whose target is an existing thread sends its message there, at
    each fire."""
    clock = FakeClock(us(2026, 5, 4, 12, 0))
    rt = await open_rt(clock)
    state = await rt.create_thread("reporter")
    await rt.schedules.create(
        Schedule(id="ping", message="ping", interval_s=300, thread_id=state.thread_id)
    )
    for _ in range(2):
        clock.now += 300 * S
        [fire] = await rt.schedules.tick()
        assert fire.status == "fired" and fire.thread_id == state.thread_id
        await rt.wait_idle(state.thread_id, timeout=10)
    assert await _user_texts(rt, state.thread_id) == ["ping", "ping"]


async def test_c18_012_interval_times_count_from_creation(open_rt: Opener) -> None:
    """C18-012: an interval schedule's first fire is one interval after its creation, and
    each next one a whole number of intervals after that, whatever the tick's delay."""
    t0 = us(2026, 5, 4, 12, 0)
    clock = FakeClock(t0)
    rt = await open_rt(clock)
    row = await rt.schedules.create(
        Schedule(id="every10", message="m", interval_s=600, agent="reporter")
    )
    assert row.next_fire_us == t0 + 600 * S
    clock.now = t0 + 600 * S + 7 * S  # a tick 7 s late
    [fire] = await rt.schedules.tick()
    assert fire.due_us == t0 + 600 * S
    assert (await rt.schedules.get("every10")).next_fire_us == t0 + 1200 * S


async def test_c18_020_after_a_downtime_catchup_once_fires_once(open_rt: Opener) -> None:
    """C18-020: a 10-minute schedule whose runtime was down for three days (about 430
    missed times) with ``catchup="once"`` (the default): the first tick fires once, for
    the earliest missed due time, and the next time is the first one after now — no
    burst."""
    t0 = us(2026, 5, 4, 12, 0)
    clock = FakeClock(t0)
    rt = await open_rt(clock)
    await rt.schedules.create(Schedule(id="tenmin", message="m", interval_s=600, agent="reporter"))
    clock.now = t0 + 3 * DAY + 30 * S
    fires = await rt.schedules.tick()
    assert [(f.due_us, f.status) for f in fires] == [(t0 + 600 * S, "fired")]
    assert await rt.schedules.tick() == []
    row = await rt.schedules.get("tenmin")
    assert row.next_fire_us == t0 + 3 * DAY + 600 * S and row.fire_count == 1
    records, total = await rt.list_threads()
    assert total == 1 and len(records) == 1


async def test_c18_021_after_a_downtime_catchup_skip_fires_nothing(open_rt: Opener) -> None:
    """C18-021: the same downtime with ``catchup="skip"``: the first tick records the missed
    fire (status ``missed``, no message, no thread) and moves the next time after now; a
    fire found within the misfire grace (60 s) is not missed."""
    t0 = us(2026, 5, 4, 12, 0)
    clock = FakeClock(t0)
    rt = await open_rt(clock)
    await rt.schedules.create(
        Schedule(id="skipper", message="m", interval_s=600, agent="reporter", catchup="skip")
    )
    clock.now = t0 + 3 * DAY + 30 * S
    assert [f.status for f in await rt.schedules.tick()] == ["missed"]
    row = await rt.schedules.get("skipper")
    assert (row.last_status, row.fire_count, row.last_thread_id) == ("missed", 0, None)
    assert row.next_fire_us == t0 + 3 * DAY + 600 * S
    clock.now = row.next_fire_us + 59 * S  # late, within the grace
    assert [f.status for f in await rt.schedules.tick()] == ["fired"]


class _Gate:
    """A scripted model that holds its first answer until released (a run that lasts)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.calls = 0

    async def __call__(self, request: Any) -> Reply:
        self.calls += 1
        if self.calls == 1:
            await self.release.wait()
        return Reply.text(f"answer {self.calls}")


@pytest.mark.parametrize("overlap", ["skip", "queue", "new_thread"])
async def test_c18_030_overlap_while_the_previous_fire_still_runs(
    open_rt: Opener, overlap: str
) -> None:
    """C18-030: the thread of the previous fire still runs at the next due time →
    ``skip``: the fire is recorded ``skipped``, nothing sent; ``queue``: the message is
    queued in that thread and delivered after its run; ``new_thread``: a new thread of the
    agent gets it."""
    gate = _Gate()
    t0 = us(2026, 5, 4, 12, 0)
    clock = FakeClock(t0)
    rt = await open_rt(clock, provider=ScriptedProvider(gate))
    await rt.schedules.create(
        Schedule(id="busy", message="work", interval_s=60, agent="reporter", overlap=overlap)
    )
    clock.now = t0 + 60 * S
    [first] = await rt.schedules.tick()
    assert first.thread_id is not None
    for _ in range(200):
        if (await rt.store.get_thread(first.thread_id)).status.state == "running":  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.01)
    clock.now = t0 + 120 * S
    [second] = await rt.schedules.tick()
    gate.release.set()
    await rt.wait_idle(first.thread_id, timeout=10)
    if overlap == "skip":
        assert (second.status, second.thread_id) == ("skipped", first.thread_id)
        assert await _user_texts(rt, first.thread_id) == ["work"]
    elif overlap == "queue":
        assert (second.status, second.thread_id) == ("fired", first.thread_id)
        for _ in range(200):
            if len(await _user_texts(rt, first.thread_id)) == 2:
                break
            await asyncio.sleep(0.01)
        await rt.wait_idle(first.thread_id, timeout=10)
        assert await _user_texts(rt, first.thread_id) == ["work", "work"]
    else:
        assert second.status == "fired" and second.thread_id not in (None, first.thread_id)
        assert second.thread_id is not None
        await rt.wait_idle(second.thread_id, timeout=10)
        assert await _user_texts(rt, second.thread_id) == ["work"]


async def test_c18_040_a_fire_whose_node_died_is_taken_over_and_sent_once(
    open_rt: Opener,
) -> None:
    """C18-040: a node claimed a fire, created its thread and sent its message, and died
    before settling it; once the claim's lease (60 s) ran out, a tick takes the fire over
    for the same due time: the same thread, the message not sent again, the fire settled
    ``fired``; before the lease ran out, nothing."""
    t0 = us(2026, 5, 4, 12, 0)
    clock = FakeClock(t0)
    rt = await open_rt(clock)
    await rt.schedules.create(Schedule(id="dies", message="m", interval_s=600, agent="reporter"))
    due = t0 + 600 * S
    clock.now = due + S
    dead = await rt.store.claim_schedule_fire(
        "dies",
        due,
        "dead-node",
        clock.now + 60 * S,
        expect_next_us=due,
        new_next_us=due + 600 * S,
    )
    assert dead is not None and dead.fire_node == "dead-node"
    # what the dead node did before it died: the fire's first half, through the same code
    half = await rt.schedules._send(dead, due)
    assert half.thread_id is not None
    await rt.wait_idle(half.thread_id, timeout=10)
    clock.now = due + 30 * S
    assert await rt.schedules.tick() == []  # the lease holds
    clock.now = due + 62 * S
    [fire] = await rt.schedules.tick()
    assert (fire.due_us, fire.status, fire.thread_id) == (due, "fired", half.thread_id)
    assert await _user_texts(rt, half.thread_id) == ["m"]
    row = await rt.schedules.get("dies")
    assert row.fire_due_us is None and row.fire_count == 1 and row.next_fire_us == due + 600 * S
    assert not await rt.store.finish_schedule_fire("dies", due, "dead-node", "fired", None, None)


async def test_c18_041_of_concurrent_claims_of_one_fire_one_wins(open_rt: Opener) -> None:
    """C18-041: twenty claims of the same due fire at once, from twenty node names → one
    returns the claimed row, the others None."""
    t0 = us(2026, 5, 4, 12, 0)
    clock = FakeClock(t0)
    rt = await open_rt(clock)
    await rt.schedules.create(Schedule(id="race", message="m", interval_s=600, agent="reporter"))
    due = t0 + 600 * S
    clock.now = due
    claims = await asyncio.gather(
        *(
            rt.store.claim_schedule_fire(
                "race",
                due,
                f"n{i}",
                due + 60 * S,
                expect_next_us=due,
                new_next_us=due + 600 * S,
            )
            for i in range(20)
        )
    )
    won = [c for c in claims if c is not None]
    assert len(won) == 1 and won[0].fire_due_us == due and won[0].next_fire_us == due + 600 * S


async def test_c18_042_a_later_release_s_stored_fields_do_not_break_reads(
    open_rt: Opener, db_url: str
) -> None:
    """C18-042: a stored definition with a field this release does not know (written by a
    later release during a rolling upgrade) is read with the fields it knows, and fires."""
    t0 = us(2026, 5, 4, 12, 0)
    clock = FakeClock(t0)
    rt = await open_rt(clock)
    await rt.schedules.create(Schedule(id="later", message="m", interval_s=60, agent="reporter"))
    probe = StoreProbe(db_url)
    [(text,)] = probe.rows("SELECT spec FROM schedules WHERE id = 'later'")
    newer = {**json.loads(text), "jitter_s": 5}
    probe.execute("UPDATE schedules SET spec = ? WHERE id = 'later'", (json.dumps(newer),))
    assert (await rt.schedules.get("later")).schedule.message == "m"
    clock.now = t0 + 60 * S
    assert [f.status for f in await rt.schedules.tick()] == ["fired"]


# -- declared and managed -------------------------------------------------------------------


async def test_c18_050_declared_schedules_are_applied_at_start(open_rt: Opener) -> None:
    """C18-050: ``Schedule(...)`` in ``Definitions`` is stored at the runtime's start
    (source ``project``); a start with its definition changed changes it (its next time
    computed again when its times changed); one no longer declared is deleted; one created
    over the API stays."""
    t0 = us(2026, 5, 4, 12, 0)
    clock = FakeClock(t0)
    daily = Schedule(id="daily", message="m", cron="0 9 * * *", agent="reporter")
    hourly = Schedule(id="hourly", message="m", cron="0 * * * *", agent="reporter")
    rt = await open_rt(clock, daily, hourly)
    rows = {r.id: r for r in await rt.schedules.list()}
    assert set(rows) == {"daily", "hourly"} and rows["daily"].source == "project"
    assert rows["daily"].next_fire_us == us(2026, 5, 5, 9, 0)
    await rt.schedules.create(Schedule(id="mine", message="m", interval_s=60, agent="reporter"))
    await rt.close(drain=0)
    changed = daily.model_copy(update={"cron": "0 10 * * *", "message": "new"})
    rt = await open_rt(clock, changed)
    rows = {r.id: r for r in await rt.schedules.list()}
    assert set(rows) == {"daily", "mine"}
    assert rows["daily"].schedule.message == "new"
    assert rows["daily"].next_fire_us == us(2026, 5, 5, 10, 0)


def test_c18_051_a_declared_schedule_names_a_defined_agent() -> None:
    """C18-051: a declared schedule whose agent is not defined fails validation (V23); two
    different schedules of one id are refused when added."""
    defs = definitions(None, Schedule(id="x", message="m", interval_s=60, agent="nobody"))
    with pytest.raises(DefinitionError, match="schedule x: agent 'nobody' is not defined"):
        defs.validate()
    with pytest.raises(DefinitionError):
        definitions(
            None,
            Schedule(id="x", message="m", interval_s=60, agent="reporter"),
            Schedule(id="x", message="other", interval_s=60, agent="reporter"),
        )


async def test_c18_060_schedules_are_managed_at_run_time(open_rt: Opener) -> None:
    """C18-060: create, get, list, update, delete and fire now; a taken id, an unknown id,
    an unknown agent or thread and a bad change are refused and change nothing; disabling
    clears the next time, enabling computes it again; a fire now leaves the next time."""
    t0 = us(2026, 5, 4, 12, 0)
    clock = FakeClock(t0)
    rt = await open_rt(clock)
    spec = Schedule(id="s1", message="m", interval_s=3600, agent="reporter")
    await rt.schedules.create(spec)
    with pytest.raises(ScheduleExists):
        await rt.schedules.create(spec)
    with pytest.raises(AgentNotFound):
        await rt.schedules.create(Schedule(id="s2", message="m", interval_s=60, agent="ghost"))
    with pytest.raises(ThreadNotFound):
        await rt.schedules.create(
            Schedule(
                id="s3",
                message="m",
                interval_s=60,
                thread_id="00000000-0000-4000-8000-000000000000",
            )
        )
    assert [r.id for r in await rt.schedules.list()] == ["s1"]
    with pytest.raises(ScheduleNotFound):
        await rt.schedules.get("nope")
    with pytest.raises(InvalidArgument):
        await rt.schedules.update("s1", {"interval_s": 0})
    off = await rt.schedules.update("s1", {"enabled": False})
    assert off.next_fire_us is None and not off.schedule.enabled
    clock.now += 7200 * S
    assert await rt.schedules.tick() == []
    on = await rt.schedules.update("s1", {"enabled": True, "message": "again"})
    assert on.next_fire_us == clock.now + 3600 * S and on.schedule.message == "again"
    fire = await rt.schedules.fire_now("s1")
    assert fire.status == "fired" and fire.due_us == clock.now
    assert (await rt.schedules.get("s1")).next_fire_us == on.next_fire_us
    assert fire.thread_id is not None
    await rt.wait_idle(fire.thread_id, timeout=10)
    assert await _user_texts(rt, fire.thread_id) == ["again"]
    with pytest.raises(ScheduleNotFound):
        await rt.schedules.fire_now("nope")
    await rt.schedules.delete("s1")
    with pytest.raises(ScheduleNotFound):
        await rt.schedules.delete("s1")
    assert await rt.schedules.list() == []


async def test_c17_089_schedule_fires_are_counted_by_outcome(open_rt: Opener) -> None:
    """C17-089: a fire ``fired`` (its run held open), the next one ``skipped`` by the
    overlap rule, one ``missed`` after a downtime (catch-up ``skip``), one ``failed`` (its
    thread was deleted) → ``threadloom_schedule_fires_total`` holds one of each."""
    gate = _Gate()
    t0 = us(2026, 5, 4, 12, 0)
    clock = FakeClock(t0)
    rt = await open_rt(clock, provider=ScriptedProvider(gate))
    await rt.schedules.create(
        Schedule(id="busy", message="work", interval_s=60, agent="reporter", overlap="skip")
    )
    clock.now = t0 + 60 * S
    [first] = await rt.schedules.tick()
    assert first.status == "fired" and first.thread_id is not None
    for _ in range(200):
        if (await rt.store.get_thread(first.thread_id)).status.state == "running":  # type: ignore[union-attr]
            break
        await asyncio.sleep(0.01)
    clock.now = t0 + 120 * S
    assert [f.status for f in await rt.schedules.tick()] == ["skipped"]
    gate.release.set()
    await rt.wait_idle(first.thread_id, timeout=10)
    await rt.schedules.delete("busy")
    await rt.schedules.create(
        Schedule(id="late", message="m", interval_s=600, agent="reporter", catchup="skip")
    )
    clock.now += DAY
    assert [f.status for f in await rt.schedules.tick()] == ["missed"]
    await rt.schedules.delete("late")
    await rt.schedules.create(
        Schedule(id="gone", message="m", interval_s=600, thread_id=first.thread_id)
    )
    await rt.delete_thread(first.thread_id)
    clock.now += 601 * S
    assert [f.status for f in await rt.schedules.tick()] == ["failed"]
    counted = rt.metrics.schedule_fires.values
    assert counted == {("fired",): 1, ("skipped",): 1, ("missed",): 1, ("failed",): 1}
    exposed = generate_latest(rt.metrics.registry).decode()
    assert 'threadloom_schedule_fires_total{outcome="failed"} 1.0' in exposed
