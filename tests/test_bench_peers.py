"""The peer benchmark's own logic (bench/peers): the runner protocol on Threadloom and the
raw floor at a tiny size, and the goals it judges. No peer package is needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path[:0] = [str(BENCH / "peers"), str(BENCH)]

from _common import Result  # noqa: E402
from _tables import goals, goals_table, growth_table, information, scenario_table  # noqa: E402


def fake(system: str, scenario: str, median_ms: float, rows: int = 4) -> Result:
    """A result whose every turn took ``median_ms`` and stored ``rows`` rows per message."""
    r = Result(system=system, scenario=scenario)
    r.latencies_ns = [int(median_ms * 1e6)] * 10
    r.turns = 10
    r.messages_timed = 40
    r.rows_timed = 40 * rows
    return r


def run_one(system: str, scenario: str, tmp_path: Path, *extra: str) -> Result:
    """``bench/peers/run_one.py SYSTEM SCENARIO`` in a process of its own, on a new work
    directory under ``tmp_path``; its result."""
    workdir = tmp_path / scenario
    workdir.mkdir()
    done = subprocess.run(
        [
            *(sys.executable, str(BENCH / "peers" / "run_one.py"), system, scenario),
            *("--workdir", str(workdir), *extra),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ""},
    )
    return Result(**json.loads(done.stdout.strip().splitlines()[-1]))


def test_goals_ratio_against_the_fastest_peer_and_the_floor() -> None:
    history = [
        fake("threadloom", "history", 2.0),
        fake("raw-sqlite3", "history", 1.0),
        fake("langgraph", "history", 50.0),
        fake("openai-agents", "history", 25.0),
        fake("pydantic-ai", "history", 90.0),
    ]
    empty = [fake("threadloom", "empty", 3.0, rows=6), fake("raw-sqlite3", "empty", 1.0)]
    judged = {g.name.split(":")[0]: g for g in goals({"history": history, "empty": empty}, 2000)}
    peer = next(g for g in judged.values() if "fastest peer" in g.name)
    assert peer.ok is True and "(openai-agents) median 12.50×" in peer.measured
    assert judged["history"].ok is True and "median 2.00×" in judged["history"].measured
    assert judged["empty"].ok is False and "median 3.00×" in judged["empty"].measured
    rows = next(g for g in judged.values() if "O(1)" in g.name)
    assert rows.ok is False  # 4 rows per message at history, 6 from empty: not one constant


def test_table_ratios_to_threadloom_and_a_peer_that_could_not_run() -> None:
    skipped = Result(system="langgraph", scenario="empty", ok=False, unsupported="no venv")
    text = scenario_table(
        [fake("threadloom", "empty", 2.0), fake("pydantic-ai", "empty", 5.0), skipped]
    )
    line = next(x for x in text.splitlines() if x.startswith("pydantic-ai"))
    assert "2.50×" in line.split()
    assert "langgraph: not run: no venv" in text


@pytest.mark.parametrize("system", ["threadloom", "raw-sqlite3"])
def test_runner_stores_four_messages_a_turn_in_constant_rows(system: str, tmp_path: Path) -> None:
    out = {}
    for scenario, extra in (
        ("empty", ["--turns", "3"]),
        ("history", ["--history", "40", "--history-turns", "3"]),
    ):
        r = run_one(system, scenario, tmp_path, *extra)
        assert r.ok, r.error
        assert len(r.latencies_ns) == 3 and r.messages_timed == 12
        assert r.db_bytes > 0 and r.peak_rss_mib > 0
        out[scenario] = r.rows_timed / r.messages_timed
    assert out["empty"] == pytest.approx(out["history"], rel=0.05)


def test_growth_table_shows_the_last_block_against_the_first() -> None:
    r = fake("langgraph", "empty", 1.0)
    r.latencies_ns = [1_000_000] * 5 + [3_000_000] * 5  # 10 turns, slower later
    line = growth_table([r], turns=10, blocks=2).splitlines()[-1]
    assert line.split()[-1] == "3.00×"


def test_rows_goal_compares_the_histories_of_one_model() -> None:
    """Rows per message are O(1) when the history does not change them; the concurrent
    scenario's slower model stores its pending messages' events too (a constant of its
    own), so it is printed, not compared."""
    scenarios = {
        "empty": [fake("threadloom", "empty", 3.0, rows=5)],
        "history": [fake("threadloom", "history", 3.0, rows=5)],
        "concurrent": [fake("threadloom", "concurrent", 3.0, rows=6)],
    }
    rows = next(g for g in goals(scenarios, 2000) if "O(1)" in g.name)
    assert rows.ok is True and "concurrent" in rows.measured
    scenarios["history"] = [fake("threadloom", "history", 3.0, rows=7)]
    rows = next(g for g in goals(scenarios, 2000) if "O(1)" in g.name)
    assert rows.ok is False


def test_tuned_gc_row_is_information_not_a_goal_nor_a_peer() -> None:
    """The tuned-GC row is printed against the floor under the goals; the floor goal and
    the peer goal judge the default Threadloom row alone."""
    concurrent = [
        fake("threadloom", "concurrent", 3.0),
        fake("threadloom-tuned-gc", "concurrent", 2.0),
        fake("raw-sqlite3", "concurrent", 1.0),
    ]
    history = [
        fake("threadloom", "history", 2.0),
        fake("raw-sqlite3", "history", 1.0),
        fake("langgraph", "history", 50.0),
        Result(system="threadloom-tuned-gc", scenario="history", ok=False, unsupported="x"),
    ]
    by_scenario = {"history": history, "concurrent": concurrent}
    judged = {g.name.split(":")[0]: g for g in goals(by_scenario, 2000)}
    assert judged["concurrent"].ok is False and "median 3.00×" in judged["concurrent"].measured
    peer = next(g for g in judged.values() if "fastest peer" in g.name)
    assert "(langgraph)" in peer.measured
    info = information(by_scenario)
    assert len(info) == 1 and "concurrent" in info[0] and "median 2.00×" in info[0]
    assert info[0] in goals_table(goals(by_scenario, 2000), info)
    line = next(x for x in scenario_table(concurrent).splitlines() if "tuned" in x)
    assert "0.67×" in line.split()  # its ratio to the default Threadloom row


def test_tuned_gc_runner_runs_the_concurrent_scenario_only(tmp_path: Path) -> None:
    empty = run_one("threadloom-tuned-gc", "empty", tmp_path, "--turns", "3")
    assert not empty.ok and empty.unsupported and not empty.latencies_ns
    r = run_one(
        "threadloom-tuned-gc",
        "concurrent",
        tmp_path,
        "--threads",
        "4",
        "--turns-per-thread",
        "2",
        "--latency",
        "0.01",
    )
    assert r.ok, r.error
    assert r.turns == 8 and r.messages_timed == 32
    assert any("objects frozen" in n for n in r.notes)
