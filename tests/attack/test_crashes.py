"""The crash suite (issue 23, "Keep it attacked"; spec 04 §4.24, spec 02 §2.6.4): a real
``threadloom serve`` process is killed with SIGKILL at a chosen point, restarted on the same
store, and then nothing acknowledged is lost.

The project (``tests/attack/project``) holds a run where the test wants it: in a model call,
in a tool call (after the call was stored, before its result), in a blocking subagent's
session (agent ``plain``, no hooks), and in the middle of a queue delivery (agent ``chat``,
whose ``before_create_message`` hook holds one entry after the one before it was committed).
Whoever holds writes a marker file first, so the kill comes at that point, never after a
sleep; each kill point also checks in the store that the run is where it should be.
While the run is held more messages are sent (each answered 202). After the restart, for
every thread of the store:

- every acknowledged send is a stored message exactly once, in send order, delivered;
- nothing is ``running`` and nothing is left queued or ``pending``: the lost run settled
  ``failed``/``execution_lost`` (its status events say so), then the queued messages ran;
- every tool call has exactly one result (the lost one: "Execution lost…");
- history is in strictly increasing ``created_at`` order with unique ids, the event
  sequence has no gap, and (SQLite) ``PRAGMA integrity_check`` is ``ok``.

PostgreSQL restarts the server under a new node id, as ``threadloom serve`` does by default:
the dead node's runs are settled once its heartbeat is older than the TTL
(``pg_support.NODE_TIMINGS``: 4 s).
"""

from __future__ import annotations

import itertools
import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from pg_support import NODE_TIMINGS
from server.test_serve import spawn_server
from store_probe import StoreProbe
from threadloom.store.sqlite.store import path_from_url

PROJECT = Path(__file__).resolve().with_name("project")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uses SIGKILL")


@dataclass
class Crashable:
    """One ``threadloom serve`` of the crash project on ``url``, started again after a kill."""

    url: str
    gates: Path
    probe: StoreProbe
    proc: subprocess.Popen[bytes] | None = None
    base: str = ""
    outputs: list[str] = field(default_factory=list)

    def start(self) -> None:
        env = {**NODE_TIMINGS, "THREADLOOM_TEST_GATE_DIR": str(self.gates)}
        self.proc, self.base = spawn_server(PROJECT, self.url, **env)

    def kill(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, "the server died early"
        self.proc.send_signal(signal.SIGKILL)
        self.outputs.append(self.proc.communicate(timeout=30)[0].decode(errors="replace"))
        self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            output = self.proc.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            self.proc.kill()
            output = self.proc.communicate(timeout=30)[0]
        self.outputs.append(output.decode(errors="replace"))
        self.proc = None

    # -- the public API ------------------------------------------------------------------
    def get(self, path: str, **params: Any) -> Any:
        response = httpx.get(f"{self.base}{path}", params=params, timeout=20)
        assert response.status_code == 200, response.text
        return response.json()

    def create_thread(self, agent: str) -> str:
        created = httpx.post(f"{self.base}/api/threads", json={"agent_id": agent}, timeout=20)
        assert created.status_code == 200, created.text
        thread: str = created.json()["threadId"]
        return thread

    def send(self, thread: str, text: str) -> str:
        """Send; the acknowledged message id (202)."""
        sent = httpx.post(
            f"{self.base}/api/threads/{thread}/messages", json={"content": text}, timeout=20
        )
        assert sent.status_code == 202, sent.text
        message: str = sent.json()["messageId"]
        return message

    def messages(self, thread: str) -> list[dict[str, Any]]:
        page = self.get(
            f"/api/threads/{thread}/messages", order="asc", limit=1000, includeSilent="true"
        )
        found: list[dict[str, Any]] = page["messages"]
        return found

    def status(self, thread: str) -> tuple[str, str | None]:
        status = self.get(f"/api/threads/{thread}")["status"]
        return status["state"], status["reason"]

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        return self.probe.rows(sql, params)

    # -- gates ----------------------------------------------------------------------------
    def entered(self, gate: str) -> None:
        """Until the model, tool or hook holding on ``gate`` has started to wait."""
        wait_for(lambda: (self.gates / f"{gate}.entered").exists(), f"{gate} entered")

    def open(self, gate: str) -> None:
        (self.gates / gate).touch()


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# -- the kill points: each drives a thread to its point and returns the ids it acknowledged
# (the kill follows at once) and the gates to open before the restart ----------------------


def in_a_model_call(server: Crashable, thread: str) -> tuple[list[str], list[str]]:
    acked = [server.send(thread, "hold-model g-model")]
    server.entered("g-model")
    acked += [server.send(thread, f"queued {i}") for i in range(3)]
    assert server.rows(
        "SELECT role FROM messages WHERE thread_id = ? AND status = 'pending'", thread
    ) == [("assistant",)]
    return acked, ["g-model"]


def between_a_tool_call_and_its_result(
    server: Crashable, thread: str
) -> tuple[list[str], list[str]]:
    acked = [server.send(thread, "hold-tool g-tool")]
    server.entered("g-tool")
    acked += [server.send(thread, f"queued {i}") for i in range(3)]
    # the call is stored, its result is not
    assert len(server.rows("SELECT id FROM tool_calls WHERE thread_id = ?", thread)) == 1
    assert (
        server.rows("SELECT id FROM messages WHERE thread_id = ? AND role = 'tool'", thread) == []
    )
    return acked, ["g-tool"]


def during_queue_delivery(server: Crashable, thread: str) -> tuple[list[str], list[str]]:
    """The run holds in a model call while four messages queue behind it; the gate opens
    and the next step delivers them one at a time through the create hooks (spec 04
    §4.10): the first is committed, the second's hook holds — the kill comes there."""
    acked = [server.send(thread, "hold-model g-first")]
    server.entered("g-first")
    texts = ["queued 0", "hold-hook g-deliver", "queued 2", "queued 3"]
    acked += [server.send(thread, text) for text in texts]
    server.open("g-first")
    server.entered("g-deliver")
    # "queued 0" is delivered, the held entry and the two after it still wait
    waiting = server.rows("SELECT id FROM message_queue WHERE thread_id = ? ORDER BY qseq", thread)
    assert [i for (i,) in waiting] == acked[2:]
    return acked, ["g-deliver"]


def during_a_subagent_session(server: Crashable, thread: str) -> tuple[list[str], list[str]]:
    """The parent's blocking ``subagent_create`` waits on the child, whose model holds."""
    acked = [server.send(thread, "create g-child")]
    server.entered("g-child")
    acked += [server.send(thread, f"queued {i}") for i in range(2)]
    children = server.rows("SELECT status_state FROM threads WHERE parent_id = ?", thread)
    assert children == [("running",)]
    return acked, ["g-child"]


KILL_POINTS = {
    "model_call": in_a_model_call,
    "tool_call": between_a_tool_call_and_its_result,
    "delivery": during_queue_delivery,
    "subagent": during_a_subagent_session,
}


# -- the checks ---------------------------------------------------------------------------


def settled(server: Crashable, probe: StoreProbe) -> bool:
    """No thread of the store runs and no queue entry waits (recovery done, queue run)."""
    running = probe.rows("SELECT count(*) FROM threads WHERE status_state = 'running'")
    queued = probe.rows("SELECT count(*) FROM message_queue")
    return running[0][0] == 0 and queued[0][0] == 0


def events(probe: StoreProbe, thread: str) -> list[tuple[int, str]]:
    """The thread's durable events (seq, kind), in order."""
    rows = probe.rows(
        "SELECT seq, kind FROM thread_events WHERE thread_id = ? ORDER BY seq", (thread,)
    )
    return [(int(seq), str(kind)) for seq, kind in rows]


def check_events(probe: StoreProbe, thread: str) -> list[tuple[int, str]]:
    """The event sequence has no gap but the numbers a lost run's settlement skipped and
    recorded as pruned (``LOST_TAIL_EVENTS``, spec 09 §9.6 rule 1), and ends at the
    thread's head; the events after the last such gap."""
    found = events(probe, thread)
    ((head, pruned),) = probe.rows(
        "SELECT event_seq, events_pruned_through FROM threads WHERE id = ?", (thread,)
    )
    seqs = [seq for seq, _ in found]
    assert seqs[-1] == head
    after_gap = 0
    for i, (before, after) in enumerate(itertools.pairwise(seqs)):
        if after != before + 1:
            assert after - 1 <= pruned, f"events {before + 1}..{after - 1} of {thread} missing"
            after_gap = i + 1
    return found[after_gap:]


def tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The message's tool calls (the wire carries them as JSON text, spec 01 §1.4.3)."""
    calls = message.get("tool_calls") or []
    found: list[dict[str, Any]] = json.loads(calls) if isinstance(calls, str) else calls
    return found


def check_thread(server: Crashable, probe: StoreProbe, thread: str) -> list[dict[str, Any]]:
    stored = server.messages(thread)
    ids = [m["id"] for m in stored]
    assert len(ids) == len(set(ids)), f"duplicate ids in {thread}"
    times = [m["created_at"] for m in stored]
    assert times == sorted(times) and len(set(times)) == len(times), "created_at not increasing"
    assert not [m for m in stored if m["status"] == "pending"], "a message stayed pending"
    assert not [m for m in stored if (m.get("metadata") or {}).get("queued")], "still queued"
    # every tool call has exactly one result
    calls = [c["id"] for m in stored for c in tool_calls(m)]
    results = Counter(m["tool_call_id"] for m in stored if m["role"] == "tool")
    assert {c: results[c] for c in calls} == dict.fromkeys(calls, 1), results
    return stored


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_a_server_killed_at_a_chosen_point_loses_nothing_acknowledged(
    point: str, db_url: str, tmp_path: Path
) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    probe = StoreProbe(db_url)
    server = Crashable(db_url, gates, probe)
    server.start()
    try:
        agent = "chat" if point == "delivery" else "plain"  # only one needs the hook
        thread = server.create_thread(agent)
        warm = server.send(thread, "hello")
        wait_for(lambda: server.status(thread)[0] != "running", "the first turn")
        acked, opened = KILL_POINTS[point](server, thread)
        assert server.status(thread)[0] == "running"
        server.kill()
        for gate in opened:  # the restarted process must not wait on them again
            server.open(gate)
        server.start()
        wait_for(lambda: settled(server, probe), "recovery and the queued runs", timeout=60)

        stored = check_thread(server, probe, thread)
        delivered = [m["id"] for m in stored if m["status"] == "completed"]
        sent = [warm, *acked]
        assert [i for i in delivered if i in sent] == sent, "an acknowledged send was lost"
        # the lost run settled (its status event after the skipped numbers), then a run
        # started (a second status event) and ran the queue to idle
        recovered = [kind for _, kind in check_events(probe, thread)]
        assert recovered.count("status") >= 3, recovered
        assert server.status(thread) == ("idle", "stop_on_response")
        assert stored[-1]["role"] == "assistant" and stored[-1]["status"] == "completed"
        assert stored[-1]["content"] == "echo: " + next(
            m["content"] for m in reversed(stored) if m["role"] == "user"
        )
        if point == "model_call":
            held = next(i for i, m in enumerate(stored) if m["content"] == "hold-model g-model")
            assert stored[held + 1]["role"] == "assistant"
            assert stored[held + 1]["status"] == "failed"
        if point in ("tool_call", "subagent"):
            lost_results = [
                m for m in stored if m["role"] == "tool" and m["tool_status"] == "error"
            ]
            assert len(lost_results) == 1 and "Execution lost" in lost_results[0]["content"]
        if point == "subagent":
            children = probe.rows("SELECT id FROM threads WHERE parent_id = ?", (thread,))
            assert len(children) == 1
            (child,) = children[0]
            check_thread(server, probe, child)
            assert "status" in [kind for _, kind in check_events(probe, child)]
            assert server.status(child) == ("failed", "execution_lost")
        pending = probe.rows("SELECT count(*) FROM messages WHERE status = 'pending'")
        assert pending[0][0] == 0
    finally:
        server.stop()
    restarted = server.outputs[-1]
    assert "Traceback" not in restarted, restarted
    # the restarted server says why the run ended (spec 04 §4.24.1)
    assert f"thread {thread} (agent {agent}): the run failed: it was lost" in restarted, restarted
    if probe.backend == "sqlite":
        with closing(sqlite3.connect(path_from_url(db_url))) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
