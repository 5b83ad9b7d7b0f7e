"""The streams of a thread whose owner died (issue 31 items 3-5, spec 12 §12.6.3, §12.7):
every subscriber on every surviving node sees the settlement, then the next run, with ``seq``
that never decreases; and a paused owner that wakes after the takeover relays nothing more.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from cluster_harness import SWEEP_S, TTL_S, Cluster, Node, start_cluster
from test_c12_relay import Frames


class SseFrames:
    """The thread's stream as Server-Sent Events on one node, read on a thread of its own;
    ``frames`` holds each event's data (its ``type`` added from ``event:`` when absent)."""

    def __init__(self, node: Node, thread: str) -> None:
        self.frames: list[dict[str, Any]] = []
        self.ids: list[str] = []
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=None))
        self._stop = threading.Event()
        self._reader = threading.Thread(
            target=self._read, args=(f"{node.base}/api/threads/{thread}/stream",), daemon=True
        )
        self._reader.start()

    def _read(self, url: str) -> None:
        headers = {"Accept": "text/event-stream"}
        try:
            with self._client.stream("GET", url, params={"logs": "true"}, headers=headers) as r:
                kind, data = "", []
                for line in r.iter_lines():
                    if self._stop.is_set():
                        return
                    if line.startswith("event:"):
                        kind = line[6:].strip()
                    elif line.startswith("id:"):
                        self.ids.append(line[3:].strip())
                    elif line.startswith("data:"):
                        data.append(line[5:].strip())
                    elif not line and data:
                        frame = json.loads("\n".join(data))
                        if isinstance(frame, dict):
                            frame.setdefault("type", kind)
                            self.frames.append(frame)
                        kind, data = "", []
        except httpx.HTTPError:
            return

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in list(self.frames) if f.get("type") == kind]

    def close(self) -> None:
        self._stop.set()
        self._client.close()
        self._reader.join(timeout=5)


Stream = Frames | SseFrames


def _settled(stream: Stream, reason: str) -> bool:
    return any(
        (f.get("status") or {}).get("reason") == reason and not f.get("snapshot")
        for f in stream.of_type("thread_status")
    )


def _answered(stream: Stream, content: str) -> bool:
    return any(
        f["data"].get("content") == content and f["data"].get("status") == "completed"
        for f in stream.of_type("message_data")
    )


def _seqs(stream: Stream) -> list[int]:
    """The ``seq`` of every frame after the opening snapshot, in arrival order."""
    return [int(f["seq"]) for f in list(stream.frames)[1:] if f.get("seq") is not None]


def _durable_seqs(stream: Stream) -> list[int]:
    """The ``seq`` of every durable frame after the opening snapshot."""
    kinds = ("message_data", "message_deleted", "log_data", "subagent_updated")
    return [
        int(f["seq"])
        for f in list(stream.frames)[1:]
        if f.get("type") in kinds or (f.get("type") == "thread_status" and not f.get("snapshot"))
    ]


def _watch(cluster: Cluster, thread: str, nodes: list[Node]) -> list[Stream]:
    streams: list[Stream] = []
    for node in nodes:
        streams.append(Frames(node, thread))
        streams.append(SseFrames(node, thread))
    cluster.wait_for(
        lambda: all(s.of_type("thread_status") for s in streams), what="every snapshot"
    )
    time.sleep(1.5)  # the watches reached the owner (spec 12 §12.7.6)
    return streams


def test_c12_032_every_subscriber_sees_a_dead_owners_settlement_in_order(
    tmp_path: Path,
) -> None:
    """C12-032: G runs on n1 (its model waits); a WebSocket and an SSE subscriber on n2 and
    on n3 → SIGKILL n1 → every subscriber gets G's settlement (``thread_status`` failed /
    ``execution_lost``), then the frames of the next run started through n2 (its answer,
    completed), with ``seq`` never decreasing on any stream, each durable frame once up to
    the thread's head, and no ``resync`` (nothing was pruned)."""
    with start_cluster(tmp_path, n=3) as cluster:
        n1, n2, n3 = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-kill")
        cluster.wait_running(n1, thread, owner="n1")
        streams = _watch(cluster, thread, [n2, n3])
        try:
            n1.kill()
            assert cluster.wait_settled(n2, thread, timeout=TTL_S + 3 * SWEEP_S + 10) == (
                "failed",
                "execution_lost",
            )
            for stream in streams:
                cluster.wait_for(
                    lambda s=stream: _settled(s, "execution_lost"),
                    timeout=10,
                    what=f"the settlement on a {type(stream).__name__}",
                )
            cluster.send(n2, thread, "after")
            for stream in streams:
                cluster.wait_for(
                    lambda s=stream: _answered(s, "echo: after"),
                    timeout=15,
                    what=f"the next run on a {type(stream).__name__}",
                )
            head = cluster.event_seq(thread)
            for stream in streams:
                seqs = _seqs(stream)
                assert seqs == sorted(seqs), seqs
                assert not stream.of_type("resync"), stream.of_type("resync")
                durable = _durable_seqs(stream)  # each durable frame once, up to the head
                assert durable == sorted(set(durable)) and durable[-1] == head, (durable, head)
        finally:
            for stream in streams:
                stream.close()


EPHEMERAL = ("message_chunk", "reasoning_chunk", "tool_call_started", "tool_call_done", "event")


def test_c12_034_a_paused_owner_relays_nothing_after_the_takeover(tmp_path: Path) -> None:
    """C12-034: three threads generate slowly on n1 (their chunks relayed to a WebSocket and
    an SSE subscriber each on n2); SIGSTOP n1 past its TTL → n2 settles them
    (``execution_lost``); SIGCONT n1, whose old runs go on generating until their next write
    is fenced → no subscriber on n2 gets an ephemeral frame after the settlement (a phantom
    of a run that no longer exists)."""
    with start_cluster(tmp_path, n=2) as cluster:
        n1, n2 = cluster.nodes
        threads = [cluster.create_thread(n1, "gate") for _ in range(3)]
        for i, thread in enumerate(threads):
            cluster.send(n1, thread, f"gate-p{i}-slow")
        for thread in threads:
            cluster.wait_running(n1, thread, owner="n1")
        streams = [s for thread in threads for s in _watch(cluster, thread, [n2])]
        try:
            for i in range(len(threads)):
                cluster.open_gate(f"gate-p{i}-slow")
            cluster.wait_for(
                lambda: all(s.of_type("message_chunk") for s in streams),
                what="the generations relayed to n2",
            )
            n1.signal(signal.SIGSTOP)
            try:
                for thread in threads:
                    assert cluster.wait_settled(n2, thread, timeout=TTL_S + 3 * SWEEP_S + 10) == (
                        "failed",
                        "execution_lost",
                    )
                for stream in streams:
                    cluster.wait_for(lambda s=stream: _settled(s, "execution_lost"), timeout=10)
            finally:
                n1.signal(signal.SIGCONT)
            time.sleep(3)  # n1 runs again: whatever its old runs still relay arrives now
            assert n1.alive
            for stream in streams:
                frames = list(stream.frames)
                settled = next(
                    i
                    for i, f in enumerate(frames)
                    if f.get("type") == "thread_status"
                    and (f.get("status") or {}).get("reason") == "execution_lost"
                )
                late = [f for f in frames[settled + 1 :] if f.get("type") in EPHEMERAL]
                assert not late, late
        finally:
            for stream in streams:
                stream.close()
