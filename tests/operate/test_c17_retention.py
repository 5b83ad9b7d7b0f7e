"""Retention (spec 17 §17.2), on both stores: each rule, nothing without a setting, active
trees kept, a root and its children together, the dry run, the runtime's sweeper, the
settings, and (PostgreSQL) one node's pass at a time. Real Runtime on a real store; the
clock the store stamps rows with is the test's, moved forward by days."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from typer.testing import CliRunner

from store_probe import probe
from threadloom import RetentionPolicy, Runtime
from threadloom.cli.commands import app
from threadloom.errors import InvalidArgument
from threadloom.records import LogRow, ThreadStatus, new_id
from threadloom.server.app import serve_app
from threadloom.server.settings import ServerSettings, SettingsError
from threadloom.store.base import RequestDelta, ThreadQuery

DAY_US = 86_400_000_000


class Clock:
    """A clock the test moves: microseconds since the epoch."""

    def __init__(self, now: int = 1_800_000_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        self.now += 1  # strictly increasing, as a real clock reads
        return self.now

    def days(self, n: float) -> None:
        self.now += round(n * DAY_US)


async def opened(db_url: str, clock: Clock, **policy: Any) -> Runtime:
    return await Runtime.open(
        db_url, clock=clock, retention=RetentionPolicy(interval_s=None, **policy)
    )


async def exists(rt: Runtime, *thread_ids: str) -> list[bool]:
    return [await rt.store.get_thread(t) is not None for t in thread_ids]


async def activity(rt: Runtime, clock: Clock, thread_id: str) -> None:
    """A run starts and ends on the thread now: its last activity (and its ancestors')."""
    await rt.store.set_status(thread_id, ThreadStatus(state="running", since=clock()))
    await rt.store.set_status(thread_id, ThreadStatus(state="idle", since=clock()))


def llm_row(body: str | None = None, **fields: Any) -> LogRow:
    return LogRow(
        id=new_id(),
        provider="scripted",
        model="m",
        created_at=0,
        is_complete=True,
        endpoint="chat.completions",
        request_body=body,
        response_body='{"choices":[{"message":{"content":"hi"}}]}',
        total_tokens=42,
        cost_total=0.25,
        **fields,
    )


async def test_c17_020_no_setting_deletes_nothing(db_url: str) -> None:
    """C17-020: every rule is off by default; a pass (and the settings read from an empty
    environment) deletes nothing — old, terminated and per-user threads and old log
    bodies all stay."""
    clock = Clock()
    rt = await opened(db_url, clock)
    try:
        old = (await rt.create_thread("a", user_id="u")).thread_id
        ended = await rt.create_thread("a", user_id="u")
        await ended.terminate()
        await rt.store.insert_log(old, llm_row('{"messages":[]}'))
        clock.days(3650)
        assert not RetentionPolicy().enabled
        assert not RetentionPolicy.from_env({}).enabled
        assert ServerSettings.from_env({}).retention == RetentionPolicy()
        report = await rt.apply_retention()
        assert report.ran and report.outcomes == [] and report.threads == 0
        assert await exists(rt, old, ended.thread_id) == [True, True]
        logs = await rt.store.list_logs(old)
        assert logs[0].request_body == '{"messages":[]}'
        assert logs[0].response_body is not None
    finally:
        await rt.close()


async def test_c17_021_inactive_threads_go_with_everything_of_theirs(db_url: str) -> None:
    """C17-021: ``inactive_days`` deletes a root thread whose last activity is older than
    N days, with its messages, logs, files and children; age is the last activity, not
    the creation: an old thread with a recent message stays."""
    clock = Clock()
    rt = await opened(db_url, clock, inactive_days=30)
    try:
        gone = await rt.create_thread("a", user_id="u")
        child = await rt.create_thread("a", user_id="u", parent=gone.thread_id)
        said = await gone.inject_message(role="user", content="hello")
        child_said = await child.inject_message(role="user", content="hello child")
        await rt.store.insert_log(gone.thread_id, llm_row('{"messages":[1]}'))
        await gone.write_file("notes/a.txt", b"abc", "text/plain")
        revived = await rt.create_thread("a", user_id="u")
        clock.days(31)
        fresh = await rt.create_thread("a", user_id="u")
        await activity(rt, clock, revived.thread_id)
        report = await rt.apply_retention()
        (outcome,) = report.outcomes
        assert (outcome.rule, outcome.threads, outcome.descendants) == ("inactive_days", 1, 1)
        assert outcome.ids == [gone.thread_id]
        assert await exists(rt, gone.thread_id, child.thread_id) == [False, False]
        assert await exists(rt, revived.thread_id, fresh.thread_id) == [True, True]
        left = probe(rt).rows(
            "SELECT (SELECT COUNT(*) FROM logs WHERE thread_id IN (?, ?)),"
            " (SELECT COUNT(*) FROM files WHERE thread_id IN (?, ?)),"
            " (SELECT COUNT(*) FROM messages WHERE id IN (?, ?))",
            (gone.thread_id, child.thread_id) * 2 + (said.id, child_said.id),
        )
        assert left == [(0, 0, 0)]
        assert await rt.store.read_events(gone.thread_id, 0) == []
    finally:
        await rt.close()


async def test_c17_022_children_go_only_with_their_root(db_url: str) -> None:
    """C17-022: a rule names root threads only. A child's activity is its root's (the
    root's last activity is bumped with it), so an old child under a recently active
    root stays; a child is never deleted alone, and a tree goes whole."""
    clock = Clock()
    rt = await opened(db_url, clock, inactive_days=10, terminated_days=1)
    try:
        root = await rt.create_thread("a")
        old_child = await rt.create_thread("a", parent=root.thread_id)
        await old_child.terminate()  # a terminated child: no rule deletes it alone
        clock.days(20)
        busy_child = await rt.create_thread("a", parent=root.thread_id)
        await activity(rt, clock, busy_child.thread_id)
        report = await rt.apply_retention()
        assert report.threads == 0
        assert await exists(rt, root.thread_id, old_child.thread_id) == [True, True]
        clock.days(11)
        report = await rt.apply_retention()
        inactive = report.outcomes[0]
        assert inactive.ids == [root.thread_id] and inactive.descendants == 2
        assert await exists(rt, root.thread_id, old_child.thread_id, busy_child.thread_id) == [
            False,
            False,
            False,
        ]
    finally:
        await rt.close()


async def test_c17_023_active_trees_are_never_deleted(db_url: str) -> None:
    """C17-023: a tree with a ``running`` thread or a queued message anywhere in it is
    kept (counted as kept), whatever its age; the others go."""
    clock = Clock()
    rt = await opened(db_url, clock, inactive_days=1)
    try:
        running = (await rt.create_thread("a")).thread_id
        queued_root = (await rt.create_thread("a")).thread_id
        queued_child = await rt.create_thread("a", parent=queued_root)
        idle = (await rt.create_thread("a")).thread_id
        await rt.store.set_stopped(queued_child.thread_id, True)
        await queued_child.queue_message(role="user", content="waits")
        assert (await rt.store.thread_stats(queued_child.thread_id)).queued_count == 1
        await rt.store.set_status(running, ThreadStatus(state="running", since=clock()))
        clock.days(5)
        for dry_run in (True, False):
            report = await rt.apply_retention(dry_run=dry_run)
            (outcome,) = report.outcomes
            assert outcome.ids == [idle] and outcome.kept_active == 2, dry_run
        assert await exists(rt, running, queued_root, queued_child.thread_id, idle) == [
            True,
            True,
            True,
            False,
        ]
    finally:
        await rt.close()


async def test_c17_024_terminated_threads_go_n_days_after_termination(db_url: str) -> None:
    """C17-024: ``terminated_days`` deletes root threads terminated more than N days ago;
    one terminated recently and an old one never terminated stay."""
    clock = Clock()
    rt = await opened(db_url, clock, terminated_days=7)
    try:
        early = await rt.create_thread("a")
        await early.terminate()
        never = (await rt.create_thread("a")).thread_id
        late = await rt.create_thread("a")
        clock.days(8)
        await late.terminate()
        report = await rt.apply_retention()
        (outcome,) = report.outcomes
        assert (outcome.rule, outcome.ids) == ("terminated_days", [early.thread_id])
        assert await exists(rt, early.thread_id, never, late.thread_id) == [False, True, True]
    finally:
        await rt.close()


async def test_c17_025_each_user_keeps_the_newest_n_threads(db_url: str) -> None:
    """C17-025: ``threads_per_user`` keeps each owner's newest N root threads by last
    activity (then creation, then id); the older ones go. Threads without an owner are
    one group; children do not count; an owner with N or fewer loses nothing."""
    clock = Clock()
    rt = await opened(db_url, clock, threads_per_user=2)
    try:
        mine = [(await rt.create_thread("a", user_id="u1")).thread_id for _ in range(4)]
        await rt.create_thread("a", user_id="u1", parent=mine[3])  # a child: not counted
        theirs = [(await rt.create_thread("a", user_id="u2")).thread_id for _ in range(2)]
        nobody = [(await rt.create_thread("a")).thread_id for _ in range(3)]
        clock.days(1)
        await activity(rt, clock, mine[0])
        report = await rt.apply_retention()
        (outcome,) = report.outcomes
        assert sorted(outcome.ids) == sorted([mine[1], mine[2], nobody[0]])
        assert await exists(rt, *mine) == [True, False, False, True]
        assert await exists(rt, *theirs) == [True, True]
        assert await exists(rt, *nobody) == [False, True, True]
    finally:
        await rt.close()


async def test_c17_026_log_bodies_go_rows_and_cost_stay(db_url: str) -> None:
    """C17-026: ``log_body_days`` deletes the request and response bodies of log rows
    older than N days; the rows, their tokens and cost stay, newer bodies stay, and a
    newer row whose request was stored as a delta of a stripped one reads the same."""
    clock = Clock()
    rt = await opened(db_url, clock, log_body_days=2)
    try:
        tid = (await rt.create_thread("a")).thread_id
        prefix, suffix = '{"messages":[', "]}"
        first = f"{prefix}1,2{suffix}"
        old, _ = await rt.store.insert_log(
            tid, llm_row(first, request_delta=RequestDelta(None, 0, prefix, ("1", "2"), suffix))
        )
        before = await rt.store.cost_summary([tid])
        clock.days(3)
        second = f"{prefix}1,2,3{suffix}"
        new, _ = await rt.store.insert_log(
            tid, llm_row(second, request_delta=RequestDelta(old.id, 2, prefix, ("3",), suffix))
        )
        assert (await rt.apply_retention(dry_run=True)).outcomes[0].log_rows == 1
        report = await rt.apply_retention()
        (outcome,) = report.outcomes
        assert (outcome.rule, outcome.log_rows) == ("log_body_days", 1)
        stripped = await rt.store.get_log(tid, old.id)
        kept = await rt.store.get_log(tid, new.id)
        assert stripped is not None and kept is not None
        assert stripped.request_body is None and stripped.response_body is None
        assert (stripped.total_tokens, stripped.cost_total) == (42, 0.25)
        assert kept.request_body == second and kept.response_body is not None
        after = await rt.store.cost_summary([tid])
        assert after.threads[tid].llm_cost == pytest.approx(0.5)
        assert after.threads[tid].request_count == before.threads[tid].request_count + 1
        assert (await rt.apply_retention()).outcomes[0].log_rows == 0  # nothing left to do
    finally:
        await rt.close()


async def test_c17_027_dry_run_says_what_would_go_and_deletes_nothing(db_url: str) -> None:
    """C17-027: a dry run reports per rule the root threads (ids), their descendants and
    log rows a pass would delete, counting a thread named by several rules once, and
    deletes nothing; the real pass then deletes exactly that."""
    clock = Clock()
    policy = {"inactive_days": 5, "terminated_days": 5, "threads_per_user": 1, "log_body_days": 5}
    rt = await opened(db_url, clock, **policy)
    try:
        a = (await rt.create_thread("a", user_id="u")).thread_id
        await rt.create_thread("a", user_id="u", parent=a)
        await rt.store.insert_log(a, llm_row("{}"))  # goes with its thread: not counted
        ended = await rt.create_thread("a", user_id="u")
        await ended.terminate()
        other = (await rt.create_thread("a", user_id="other")).thread_id
        await rt.store.insert_log(other, llm_row("{}"))  # stays, loses its bodies
        clock.days(6)
        await activity(rt, clock, other)
        b = (await rt.create_thread("a", user_id="u")).thread_id
        c = (await rt.create_thread("a", user_id="u")).thread_id
        dry = await rt.apply_retention(dry_run=True)
        assert dry.dry_run and [o.rule for o in dry.outcomes] == [
            "inactive_days",
            "terminated_days",
            "threads_per_user",
            "log_body_days",
        ]
        assert [(o.threads, o.descendants, o.log_rows) for o in dry.outcomes] == [
            (2, 1, 0),
            (0, 0, 0),
            (1, 0, 0),
            (0, 0, 1),
        ]
        assert sorted(dry.outcomes[0].ids) == sorted([a, ended.thread_id])
        assert await exists(rt, a, ended.thread_id, b, c) == [True, True, True, True]
        assert dry.lines()[0] == "inactive_days: would delete 2 threads with 1 descendant;" + (
            " kept 0 active"
        )
        real = await rt.apply_retention()
        assert [(o.rule, sorted(o.ids), o.log_rows) for o in real.outcomes] == [
            (o.rule, sorted(o.ids), o.log_rows) for o in dry.outcomes
        ]
        assert real.threads == dry.threads == 4
    finally:
        await rt.close()


async def test_c17_028_paging_goes_past_a_batch_and_past_kept_threads(db_url: str) -> None:
    """C17-028: a pass works in pages of ``batch`` roots, one transaction per tree: more
    old threads than a page all go, and active ones met on the way do not stop it."""
    clock = Clock()
    rt = await opened(db_url, clock, inactive_days=1, batch=2)
    try:
        ids = [(await rt.create_thread("a", user_id="u")).thread_id for _ in range(7)]
        await rt.store.set_status(ids[1], ThreadStatus(state="running", since=clock()))
        await rt.store.set_status(ids[2], ThreadStatus(state="running", since=clock()))
        clock.days(2)
        report = await rt.apply_retention()
        assert report.outcomes[0].threads == 5 and report.outcomes[0].kept_active == 2
        assert await exists(rt, *ids) == [False, True, True, False, False, False, False]
    finally:
        await rt.close()


async def test_c17_029_the_runtime_sweeps_every_interval_and_logs_it(
    db_url: str, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """C17-029: a runtime that runs its store's threads runs a pass every ``interval_s``
    seconds and logs one INFO line per pass with the counts of each rule; a runtime
    beside the process that runs an SQLite file runs none, and refuses a real pass."""
    clock = Clock()
    rt = await Runtime.open(
        db_url, clock=clock, retention=RetentionPolicy(inactive_days=1, interval_s=0.2)
    )
    try:
        tid = (await rt.create_thread("a")).thread_id
        clock.days(2)
        with caplog.at_level(logging.INFO, logger="threadloom.retention"):
            # a pass every 0.2 s; a loaded machine (the full suite beside other work) has
            # made the first one take over 5 s: wait up to 30 s, no longer than it takes
            # the pass logs its line once all its rules ran, after the thread is gone
            deadline = time.monotonic() + 30

            def logged() -> bool:
                lines = [r.getMessage() for r in caplog.records if r.name == "threadloom.retention"]
                return any("inactive_days: deleted 1 thread with 0 descendants" in x for x in lines)

            while not logged() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert not (await exists(rt, tid))[0]
            assert logged()
        if backend == "sqlite":  # a runtime beside the one that runs the file: no passes
            beside = await Runtime.open(
                db_url, exclusive=False, retention=RetentionPolicy(inactive_days=1)
            )
            try:
                assert beside._sweeper is None
                assert (await beside.apply_retention(dry_run=True)).ran
                with pytest.raises(InvalidArgument, match="exclusive=False"):
                    await beside.apply_retention()
            finally:
                await beside.close()
    finally:
        await rt.close()


async def test_c17_030_a_server_runs_the_policy_its_settings_give(tmp_path: Any) -> None:
    """C17-030: the server's settings reach its runtime, whose sweeper runs while it
    serves and stops with it; with no rule set there is no sweeper."""
    policy = RetentionPolicy(inactive_days=30, interval_s=600)
    for given, sweeping in ((policy, True), (RetentionPolicy(), False)):
        settings = ServerSettings(store=f"sqlite:///{tmp_path / 'served.db'}", retention=given)
        app = serve_app(None, settings)
        async with app.app.router.lifespan_context(app.app):
            runtime = app.context.runtime
            assert runtime.retention_policy == given
            assert runtime._sweeper is not None
            assert (runtime._sweeper._task is not None) is sweeping
        assert runtime._sweeper._task is None


def test_c17_030_settings_from_the_environment_and_refusals() -> None:
    """C17-030: the ``THREADLOOM_RETENTION_*`` variables set the rules; a bad value is
    refused with a message naming the variable (a server refuses to start)."""
    env = {
        "THREADLOOM_RETENTION_INACTIVE_DAYS": "90",
        "THREADLOOM_RETENTION_TERMINATED_DAYS": "0.5",
        "THREADLOOM_RETENTION_THREADS_PER_USER": "1000",
        "THREADLOOM_RETENTION_LOG_BODY_DAYS": "14",
        "THREADLOOM_RETENTION_INTERVAL_SECONDS": "off",
    }
    policy = ServerSettings.from_env(env).retention
    assert policy == RetentionPolicy(90, 0.5, 1000, 14, None)
    bad = {
        "THREADLOOM_RETENTION_INACTIVE_DAYS": "-1",
        "THREADLOOM_RETENTION_THREADS_PER_USER": "0",
        "THREADLOOM_RETENTION_LOG_BODY_DAYS": "soon",
        "THREADLOOM_RETENTION_INTERVAL_SECONDS": "0",
    }
    for key, value in bad.items():
        with pytest.raises(SettingsError, match=key):
            ServerSettings.from_env({key: value})
    with pytest.raises(InvalidArgument, match="threads_per_user"):
        RetentionPolicy(threads_per_user=0)


async def test_c17_031_a_change_after_the_read_keeps_the_thread(db_url: str) -> None:
    """C17-031: the deletion checks again, in its own transaction, that the rule still
    names the root and that its tree is inactive: a message queued or a run started
    between a pass's read and the deletion keeps the tree (nothing acknowledged is
    lost); a tree deleted is forgotten by the runtime and ``thread_deleted`` is published
    for each of its threads."""
    clock = Clock()
    rt = await opened(db_url, clock, inactive_days=1)
    try:
        queued = await rt.create_thread("a")
        revived = (await rt.create_thread("a")).thread_id
        idle = (await rt.create_thread("a")).thread_id
        idle_child = (await rt.create_thread("a", parent=idle)).thread_id
        clock.days(2)
        rule = rt.retention_policy.thread_rules(clock())[0][1]
        page = await rt.store.expiry_page(rule, None, 10)
        assert sorted(c.id for c in page) == sorted([queued.thread_id, revived, idle])
        assert not any(c.active for c in page)
        await rt.store.set_stopped(queued.thread_id, True)
        await queued.queue_message(role="user", content="acknowledged")
        await activity(rt, clock, revived)
        assert await rt.store.delete_expired(rule, queued.thread_id) == {}
        assert await rt.store.delete_expired(rule, revived) == {}
        assert (await rt.store.thread_stats(queued.thread_id)).queued_count == 1
        deleted = rt.events.subscribe(None, kinds=["thread_deleted"])
        report = await rt.apply_retention()
        assert report.outcomes[0].ids == [idle]
        seen = [await asyncio.wait_for(deleted.__anext__(), 5) for _ in range(2)]
        assert [e.thread_id for e in seen] == [idle_child, idle]
        assert await exists(rt, queued.thread_id, revived) == [True, True]
    finally:
        await rt.close()


@pytest.mark.postgres_only
async def test_c17_032_two_nodes_never_run_a_pass_together(db_url: str) -> None:
    """C17-032: a pass runs on one node at a time (a session advisory lock of the
    schema): while one node holds it another node's pass does nothing; two nodes asked
    at once delete each thread once between them."""
    clock = Clock()
    first = await opened(db_url, clock, inactive_days=1, batch=3)
    second = await opened(db_url, clock, inactive_days=1, batch=3)
    try:
        ids = [(await first.create_thread("a")).thread_id for _ in range(12)]
        clock.days(2)
        async with first.cluster.exclusive("retention") as held:
            assert held
            refused = await second.apply_retention()
            assert not refused.ran and refused.outcomes == []
            assert refused.lines() == ["retention: another node is running a pass; nothing done"]
            assert all(await exists(second, *ids))
        reports = await asyncio.gather(first.apply_retention(), second.apply_retention())
        deleted = [i for r in reports if r.ran for i in r.outcomes[0].ids]
        assert sorted(deleted) == sorted(ids)  # each once, by whichever node ran
        assert not any(await exists(first, *ids))
    finally:
        await second.close()
        await first.close()


def test_c17_033_the_command_line_pass_and_dry_run(tmp_path: Any) -> None:
    """C17-033: ``threadloom retention --dry-run`` prints per rule what a pass would
    delete (``--ids``: the root threads) and deletes nothing; without a rule it refuses
    (exit 2); a real pass on an SQLite file is refused (exit 1) while a server runs it,
    and runs once it stopped."""
    url = f"sqlite:///{tmp_path / 'threadloom.db'}"
    clock = Clock(now=1_000_000_000_000_000)  # long ago: every thread is years old

    async def setup() -> tuple[Runtime, list[str]]:
        rt = await Runtime.open(url, clock=clock)
        made = [(await rt.create_thread("a", user_id="u")).thread_id for _ in range(3)]
        await rt.create_thread("a", user_id="u", parent=made[0])
        return rt, made

    rt, made = asyncio.run(setup())
    runner = CliRunner()
    try:
        dry = runner.invoke(
            app,
            [
                "retention",
                "--dry-run",
                "--ids",
                "--store",
                url,
                "--inactive-days",
                "30",
                "--log-body-days",
                "7",
            ],
        )
        assert dry.exit_code == 0, dry.output
        assert "retention dry run (nothing deleted):" in dry.output
        assert "inactive_days: would delete 3 threads with 1 descendant; kept 0 active" in (
            dry.output
        )
        assert "log_body_days: would delete the bodies of 0 log rows" in dry.output
        assert all(t in dry.output for t in made)
        none = runner.invoke(app, ["retention", "--dry-run", "--store", url], env={})
        assert none.exit_code == 2 and "no retention rule is set" in none.output
        held = runner.invoke(app, ["retention", "--store", url, "--inactive-days", "30"])
        assert held.exit_code == 1 and "a server runs this store" in held.output
    finally:
        asyncio.run(rt.close())
    real = runner.invoke(app, ["retention", "--store", url, "--inactive-days", "30", "--json"])
    assert real.exit_code == 0, real.output
    assert '"threads": 3' in real.output and '"descendants": 1' in real.output

    async def left() -> int:
        rt = await Runtime.open(url)
        try:
            return (await rt.store.query_threads(ThreadQuery(limit=10)))[1]
        finally:
            await rt.close()

    assert asyncio.run(left()) == 0


async def test_c17_026_a_chain_of_request_deltas_reads_the_same_after_a_strip(
    db_url: str,
) -> None:
    """C17-026: log rows whose requests are stored as a chain of deltas (spec 04 §4.25),
    half of them old: after a pass in small batches, every newer row reads exactly the
    body it was inserted with (those stored as deltas of stripped rows were written out in
    full first), and every old row has no body left."""
    clock = Clock()
    rt = await opened(db_url, clock, log_body_days=2, batch=3)
    try:
        tid = (await rt.create_thread("a")).thread_id
        prefix, suffix = '{"model":"m","messages":[', '],"_metadata":{}}'
        messages: list[str] = []
        base: str | None = None
        rows: list[tuple[LogRow, str]] = []
        for n in range(40):
            if n == 20:
                clock.days(3)
            keep = len(messages)
            if n % 7 == 6 and keep > 2:  # the tail changed: two messages dropped
                keep -= 2
                messages = messages[:keep]
            messages = [*messages, f'{{"role":"user","content":"m{n}, [x]"}}']
            text = prefix + ",".join(messages) + suffix
            delta = RequestDelta(base, keep, prefix, tuple(messages[keep:]), suffix)
            stored, _ = await rt.store.insert_log(tid, llm_row(text, request_delta=delta))
            rows.append((stored, text))
            base = stored.id
        # the first new row is stored as a delta of the last old one
        assert probe(rt).rows(
            "SELECT base_id FROM log_requests WHERE log_id = ?", (rows[20][0].id,)
        ) == [(rows[19][0].id,)]
        report = await rt.apply_retention()
        assert report.outcomes[0].log_rows == 20
        assert probe(rt).rows(
            "SELECT COUNT(*) FROM log_requests r JOIN logs l ON l.id = r.log_id"
            " WHERE l.thread_id = ? AND r.base_id IS NULL",
            (tid,),
        ) == [(1,)]  # the first new row is a root now
        for n, (stored, text) in enumerate(rows):
            got = await rt.store.get_log(tid, stored.id)
            assert got is not None
            assert got.request_body == (None if n < 20 else text), n
        listed = await rt.store.list_logs(tid, limit=None)
        assert [r.request_body for r in listed] == [None] * 20 + [t for _, t in rows[20:]]
    finally:
        await rt.close()


async def test_c17_026_log_bodies_of_many_threads_go_one_thread_a_step(db_url: str) -> None:
    """C17-026: with more old rows than a batch, in several threads, a pass strips them
    all (one thread's batch per transaction) and leaves the new rows' bodies alone."""
    clock = Clock()
    rt = await opened(db_url, clock, log_body_days=1, batch=3)
    try:
        tids = [(await rt.create_thread("a")).thread_id for _ in range(4)]
        for tid in tids:
            for n in range(4):
                await rt.store.insert_log(tid, llm_row(f'{{"n":{n}}}'))
        clock.days(2)
        for tid in tids:
            await rt.store.insert_log(tid, llm_row('{"new":1}'))
        report = await rt.apply_retention()
        assert report.outcomes[0].log_rows == 16
        for tid in tids:
            bodies = [r.request_body for r in await rt.store.list_logs(tid)]
            assert bodies == [None] * 4 + ['{"new":1}']
    finally:
        await rt.close()


@pytest.mark.postgres_only
async def test_c17_033_the_command_line_pass_beside_postgresql_nodes(db_url: str) -> None:
    """C17-033: on PostgreSQL ``threadloom retention`` runs beside a running node; it is
    refused (exit 1) while a node holds the retention lock, and deletes once it is free."""
    clock = Clock(now=1_000_000_000_000_000)  # long ago: every thread is years old
    node = await Runtime.open(db_url, clock=clock)
    runner = CliRunner()
    args = ["retention", "--store", db_url, "--inactive-days", "30"]
    try:
        made = [(await node.create_thread("a")).thread_id for _ in range(3)]
        async with node.cluster.exclusive("retention") as held:
            assert held
            refused = await asyncio.to_thread(runner.invoke, app, args)
            assert refused.exit_code == 1, refused.output
            assert "another node is running a pass" in refused.output
        assert all(await exists(node, *made))
        done = await asyncio.to_thread(runner.invoke, app, args)
        assert done.exit_code == 0, done.output
        assert "inactive_days: deleted 3 threads with 0 descendants" in done.output
        assert not any(await exists(node, *made))
    finally:
        await node.close()
