"""Spec 12 §12.5 and §12.7 with real nodes: stream frames of a run on one node reach the
sockets of the others (LISTEN/NOTIFY), in ``seq`` order; stop, terminate and delete
through a node that does not run the thread."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

from cluster_harness import SWEEP_S, TTL_S, Cluster, Node, start_cluster
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

DURABLE = ("message_data", "message_deleted", "log_data", "subagent_updated")


class Frames:
    """A thread stream socket on one node, read on a thread of its own."""

    def __init__(self, node: Node, thread: str, since: int | None = None) -> None:
        url = node.base.replace("http://", "ws://") + f"/api/threads/{thread}/stream?logs=true"
        if since is not None:  # every durable event has a frame with its log rows
            url += f"&since={since}"
        self.socket = connect(url).__enter__()
        self.frames: list[dict[str, Any]] = []
        self.closed: tuple[int, str] | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                self.frames.append(json.loads(self.socket.recv()))
        except ConnectionClosed as closed:
            rcvd = closed.rcvd
            self.closed = (rcvd.code, rcvd.reason) if rcvd is not None else (1006, "")
        except BaseException as exc:
            self.closed = (-1, repr(exc))

    def close(self) -> None:
        self.socket.close()
        self._reader.join(timeout=5)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [f for f in list(self.frames) if f.get("type") == kind]

    def durable_seqs(self) -> list[int]:
        """The ``seq`` of every durable frame after the opening snapshot."""
        seqs = []
        for frame in list(self.frames)[1:]:
            kind = frame.get("type")
            if kind in DURABLE or (kind == "thread_status" and not frame.get("snapshot")):
                seqs.append(int(frame["seq"]))
        return seqs

    def completed(self, message_id: str) -> bool:
        return any(
            f["message_id"] == message_id and f["data"].get("status") == "completed"
            for f in self.of_type("message_data")
        )


def _pending_assistant(cluster: Cluster, node: Node, thread: str) -> dict[str, Any]:
    found: dict[str, Any] = cluster.wait_for(
        lambda: next(
            (
                m
                for m in cluster.messages(node, thread)
                if m["role"] == "assistant" and m["status"] == "pending"
            ),
            None,
        ),
        what="the pending model message",
    )
    return found


def test_c12_008_a_socket_on_another_node_gets_the_run_in_order(tmp_path: Path) -> None:
    """C12-008: G running on n1, a socket on n3 → release the gate → the n3 socket gets the
    assistant's pending ``message_data``, its ``message_chunk`` frames and the completing
    ``message_data``, in that order, with strictly increasing durable ``seq``."""
    with start_cluster(tmp_path, n=3) as cluster:
        n1, _, n3 = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        stream = Frames(n3, thread)
        try:
            cluster.send(n1, thread, "gate-8")
            cluster.wait_running(n1, thread, owner="n1")
            pending = _pending_assistant(cluster, n1, thread)
            # the catch-up request reached n1 (on a loaded machine it takes up to a second):
            time.sleep(1.5)  # it forwards what follows
            cluster.open_gate("gate-8")
            cluster.wait_for(lambda: stream.completed(pending["id"]), what="the completion")
            mine = [
                f
                for f in stream.frames
                if f.get("message_id") == pending["id"]
                and f["type"] in ("message_data", "message_chunk")
            ]
            kinds = [(f["type"], f.get("data", {}).get("status")) for f in mine]
            assert kinds[0] == ("message_data", "pending")
            assert kinds[-1] == ("message_data", "completed")
            chunks = [f for f in mine if f["type"] == "message_chunk"]
            assert chunks, kinds
            text = ""
            for chunk in chunks:  # consecutive offsets rebuild the text
                assert chunk["offset"] == len(text)
                text += chunk["chunk"]
            assert text == "passed gate-8" == mine[-1]["data"]["content"]
            seqs = stream.durable_seqs()
            assert seqs == sorted(set(seqs)) and seqs
        finally:
            stream.close()


def test_c12_009_a_socket_opened_mid_generation_gets_the_text_so_far(tmp_path: Path) -> None:
    """C12-009: a socket on n2 opened while n1 generates → a ``message_chunk`` with offset 0
    and the text so far within 2 s (the owner answers the catch-up request)."""
    with start_cluster(tmp_path, n=2) as cluster:
        n1, n2 = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-9-slow")
        cluster.wait_running(n1, thread, owner="n1")
        pending = _pending_assistant(cluster, n1, thread)
        watcher = Frames(n1, thread)  # sees the generation start on the owner itself
        try:
            cluster.open_gate("gate-9-slow")
            cluster.wait_for(lambda: watcher.of_type("message_chunk"), what="generation")
            opened = time.monotonic()
            stream = Frames(n2, thread)
            try:
                first = cluster.wait_for(
                    lambda: (
                        next(
                            (
                                f
                                for f in stream.of_type("message_chunk")
                                if f["message_id"] == pending["id"] and f["offset"] == 0
                            ),
                            None,
                        )
                        or stream.completed(pending["id"])
                    ),
                    timeout=5,
                    what=f"the catch-up chunk ({stream.frames}, {stream.closed}, {n2.output()})",
                )
                if isinstance(first, dict):  # generation still on: the catch-up came
                    assert time.monotonic() - opened <= 2.5
                    assert "passed gate-9-slow".startswith(first["chunk"]) and first["chunk"]
            finally:
                stream.close()
        finally:
            watcher.close()


def test_c12_010_frames_of_two_writers_arrive_in_seq_order(tmp_path: Path) -> None:
    """C12-010: a socket on n2; n1 runs T while a message is edited through n3 → the n2
    socket gets both nodes' frames, durable ``seq`` strictly increasing without a gap."""
    with start_cluster(tmp_path, n=3) as cluster:
        n1, n2, n3 = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "first")  # answered at once: a message to edit
        cluster.wait_settled(n1, thread)
        first = cluster.messages(n1, thread)[0]
        stream = Frames(n2, thread)
        try:
            cluster.wait_for(lambda: stream.frames, what="the snapshot")
            head = int(stream.frames[0]["head"])
            cluster.send(n1, thread, "gate-10")
            cluster.wait_running(n1, thread, owner="n1")
            for i in range(3):
                edited = n3.patch(
                    f"/api/threads/{thread}/messages/{first['id']}", {"content": f"e{i}"}
                )
                assert edited.status_code == 200, edited.text
            cluster.open_gate("gate-10")
            cluster.wait_settled(n2, thread)
            final = cluster.event_seq(thread)
            cluster.wait_for(
                lambda: stream.durable_seqs() and stream.durable_seqs()[-1] >= final,
                what="every frame",
            )
            seqs = stream.durable_seqs()
            assert seqs == list(range(head + 1, final + 1)), seqs
            edits = [
                f["data"]["content"]
                for f in stream.of_type("message_data")
                if f["message_id"] == first["id"]
            ]
            assert edits[-1] == "e2"
        finally:
            stream.close()


def test_c12_011_a_lost_listen_connection_misses_nothing(tmp_path: Path) -> None:
    """C12-011: a socket on n2, then n2's LISTEN connection terminated while 5 messages are
    added through n1 → after n2 reconnects, the socket has every frame (no seq gap)."""
    with start_cluster(tmp_path, n=2) as cluster:
        n1, n2 = cluster.nodes
        thread = cluster.create_thread(n1)
        stream = Frames(n2, thread)
        try:
            cluster.wait_for(lambda: stream.frames, what="the snapshot")
            head = int(stream.frames[0]["head"])
            killed = cluster.probe.rows(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ?",
                ("threadloom-listen n2",),
            )
            assert killed == [(True,)]
            for i in range(5):
                cluster.send(n1, thread, f"m{i}")
                cluster.wait_settled(n1, thread)
            final = cluster.event_seq(thread)
            cluster.wait_for(
                lambda: stream.durable_seqs() and stream.durable_seqs()[-1] >= final,
                timeout=15,
                what="the frames after the reconnection",
            )
            assert stream.durable_seqs() == list(range(head + 1, final + 1))
        finally:
            stream.close()


def test_c12_012_a_client_resumes_on_another_node(tmp_path: Path) -> None:
    """C12-012: a socket on n1 with last seq S; SIGKILL n1; reconnect to n2 with since=S →
    every durable frame after S; the messages the frames leave equal GET messages."""
    with start_cluster(tmp_path, n=2) as cluster:
        n1, n2 = cluster.nodes
        thread = cluster.create_thread(n1)
        cluster.send(n1, thread, "before")
        cluster.wait_settled(n1, thread)
        stream = Frames(n1, thread)
        cluster.wait_for(lambda: stream.frames, what="the snapshot")
        last = int(stream.frames[0]["head"])
        n1.kill()
        stream.close()
        cluster.send(n2, thread, "after")
        cluster.wait_settled(n2, thread)
        resumed = Frames(n2, thread, since=last)
        try:
            final = cluster.event_seq(thread)
            cluster.wait_for(
                lambda: resumed.durable_seqs() and resumed.durable_seqs()[-1] >= final,
                what="the replay",
            )
            seen = {f["message_id"]: f["data"] for f in resumed.of_type("message_data")}
            stored = {m["id"]: m for m in cluster.messages(n2, thread)}
            for message_id, data in seen.items():
                assert stored[message_id]["content"] == data["content"]
            after = [m["id"] for m in stored.values() if m["content"] in ("after", "echo: after")]
            assert set(after) <= set(seen)
        finally:
            resumed.close()


def test_c12_013_stop_through_another_node_is_settled_by_the_owner(tmp_path: Path) -> None:
    """C12-013: G running on n1 → POST stop through n3 → 200 with settled true; the status
    is idle / aborted_by_user, written by n1 (the lease is n1's until it released it)."""
    with start_cluster(tmp_path, n=3) as cluster:
        n1, _, n3 = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-13")
        cluster.wait_running(n1, thread, owner="n1")
        _, token = cluster.lease(thread)
        stopped = n3.post(f"/api/threads/{thread}/stop")
        assert stopped.status_code == 200, stopped.text
        assert stopped.json()["settled"] is True
        assert cluster.status(n3, thread) == ("idle", "aborted_by_user")
        node, after = cluster.lease(thread)
        assert node is None and after == token  # n1 settled under its lease, then let go
        assert "lease lost" not in n1.output()


def test_c12_014_stop_of_a_dead_owner_is_settled_as_the_user_asked(tmp_path: Path) -> None:
    """C12-014: G's owner n1 killed, before the sweeper sees it dead → POST stop through n2
    → 200; n2 took the lease and settled with aborted_by_user, not execution_lost."""
    with start_cluster(tmp_path, n=2, THREADLOOM_SWEEP_SECONDS="20") as cluster:
        n1, n2 = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-14")
        cluster.wait_running(n1, thread, owner="n1")
        _, token = cluster.lease(thread)
        n1.kill()
        time.sleep(TTL_S + 0.5)  # n1 is dead now; n2's sweeper runs only every 20 s
        assert cluster.status(n2, thread)[0] == "running"
        stopped = n2.post(f"/api/threads/{thread}/stop")
        assert stopped.status_code == 200, stopped.text
        assert stopped.json()["settled"] is True
        assert cluster.status(n2, thread) == ("idle", "aborted_by_user")
        node, after = cluster.lease(thread)
        assert node is None and after == token + 1  # n2 acquired it to settle


def test_c12_015_delete_through_another_node_ends_the_run_everywhere(tmp_path: Path) -> None:
    """C12-015: G running on n1 → DELETE through n2 → 200; n1's execution stops, no row of
    G remains, and the sockets on every node close with 1000."""
    with start_cluster(tmp_path, n=3) as cluster:
        n1, n2, n3 = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-15")
        cluster.wait_running(n1, thread, owner="n1")
        sockets = [Frames(node, thread) for node in cluster.nodes]
        try:
            for s in sockets:
                cluster.wait_for(lambda s=s: s.frames, what="the snapshot")
            deleted = n2.delete(f"/api/threads/{thread}")
            assert deleted.status_code == 200, deleted.text
            for s in sockets:
                cluster.wait_for(lambda s=s: s.closed, timeout=10, what="the socket closed")
                assert s.closed is not None and s.closed[0] == 1000
            for table, key in (
                ("threads", "id"),
                ("messages", "thread_id"),
                ("message_queue", "thread_id"),
                ("thread_events", "thread_id"),
                ("logs", "thread_id"),
            ):
                count = f"SELECT count(*) FROM {table} WHERE {key} = ?"
                assert cluster.probe.rows(count, (thread,)) == [(0,)], table
            cluster.open_gate("gate-15")
            time.sleep(1.0)  # n1's model call returns; its writes find no thread
            assert cluster.probe.rows(
                "SELECT count(*) FROM messages WHERE thread_id = ?", (thread,)
            ) == [(0,)]
            assert n3.get(f"/api/threads/{thread}").status_code == 404
            assert n1.alive
        finally:
            for s in sockets:
                s.close()


def test_c12_017_sigterm_hands_queued_work_to_another_node(tmp_path: Path) -> None:
    """§12.6.4 step 4: a node drained with queued work notifies a wake; another node runs
    it well within one sweep interval of the default timings."""
    with start_cluster(
        tmp_path, n=2, THREADLOOM_DRAIN_SECONDS="1", THREADLOOM_SWEEP_SECONDS="20"
    ) as cluster:
        n1, n2 = cluster.nodes
        thread = cluster.create_thread(n1, "gate")
        cluster.send(n1, thread, "gate-17")
        cluster.wait_running(n1, thread, owner="n1")
        cluster.send(n2, thread, "queued behind")
        n1.signal(signal.SIGTERM)
        n1.proc.wait(timeout=15)
        exited = time.monotonic()
        cluster.wait_for(
            lambda: any(
                m["content"] == "echo: queued behind" for m in cluster.messages(n2, thread)
            ),
            timeout=10,
            what="the queued message answered by n2",
        )
        assert time.monotonic() - exited < 5  # a wake, not the 20 s sweep
        assert SWEEP_S < 20


class ListFrames(Frames):
    """An ``/api/events`` socket (thread-list events of every thread: in local mode the
    threads have no owner) on one node."""

    def __init__(self, node: Node) -> None:
        url = node.base.replace("http://", "ws://") + "/api/events?scope=all"
        self.socket = connect(url).__enter__()
        self.frames = []
        self.closed = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def about(self, thread: str) -> list[dict[str, Any]]:
        return [
            f
            for f in list(self.frames)
            if f.get("threadId") == thread or (f.get("thread") or {}).get("id") == thread
        ]


def _until_n1_tells_n2(cluster: Cluster, listing: ListFrames) -> None:
    """Wait until n1 knows n2 has a thread-list socket: n2 announces it to its peers after
    the socket subscribed, and n1 tells n2 only the changes it makes after hearing that.
    Threads created on n1 until one of them is listed on n2 — however loaded the machine,
    not a guessed sleep."""
    n1 = cluster.nodes[0]
    for _ in range(40):
        probe = cluster.create_thread(n1)
        try:
            cluster.wait_for(
                lambda probe=probe: any(
                    f["type"] == "thread_created" for f in listing.about(probe)
                ),
                timeout=0.5,
                what="a probe thread listed on n2",
            )
            return
        except AssertionError:
            continue
        finally:
            assert n1.delete(f"/api/threads/{probe}").status_code == 200
    raise AssertionError("n2's thread-list socket never heard of n1's threads")


def test_c12_024_thread_list_events_reach_every_node(tmp_path: Path) -> None:
    """C12-024: an ``/api/events`` socket on n2 sees what n1 does — a thread created, its
    run's activity (running, then idle), a PATCH, a deletion."""
    with start_cluster(tmp_path, n=2) as cluster:
        n1, n2 = cluster.nodes
        listing = ListFrames(n2)
        try:
            _until_n1_tells_n2(cluster, listing)
            thread = cluster.create_thread(n1)
            cluster.wait_for(
                lambda: any(f["type"] == "thread_created" for f in listing.about(thread)),
                timeout=10,
                what="thread_created on n2",
            )
            cluster.send(n1, thread, "hello")
            cluster.wait_for(
                lambda: any(
                    f["type"] == "thread_activity" and not f["executing"]
                    for f in listing.about(thread)
                ),
                timeout=10,
                what="the run's end on n2",
            )
            activity = [f for f in listing.about(thread) if f["type"] == "thread_activity"]
            assert activity[0]["executing"] is True
            assert activity[0]["status"]["state"] == "running"
            assert activity[-1]["status"]["state"] == "idle"
            patched = n1.patch(f"/api/threads/{thread}", {"tags": ["relayed"]})
            assert patched.status_code == 200, patched.text
            updated = cluster.wait_for(
                lambda: [f for f in listing.about(thread) if f["type"] == "thread_updated"],
                timeout=10,
                what="thread_updated on n2",
            )
            assert updated[-1]["thread"]["tags"] == ["relayed"]
            assert n1.delete(f"/api/threads/{thread}").status_code == 200
            cluster.wait_for(
                lambda: {"type": "thread_deleted", "threadId": thread} in listing.about(thread),
                timeout=10,
                what="thread_deleted on n2",
            )
        finally:
            listing.close()


def test_c12_023_a_blocking_call_gets_the_result_of_a_child_run_on_another_node(
    tmp_path: Path,
) -> None:
    """C12-023: child C (a blocking, resumable ``helper``) runs on n2; its parent P, on
    n1, sends it a blocking ``subagent_message`` → the call waits for C's next session
    result, which C's run on n2 produces: it answers the call on n1 (its tool result), and
    P does not get it a second time as a queued message."""
    with start_cluster(tmp_path, n=2) as cluster:
        n1, n2 = cluster.nodes
        parent = cluster.create_thread(n1, "boss")
        cluster.send(n1, parent, "create hello")
        cluster.wait_for(
            lambda: any(
                (m["content"] or "").startswith("got: echo: hello")
                for m in cluster.messages(n1, parent)
            ),
            what="the first blocking result (all on n1)",
        )
        cluster.wait_settled(n1, parent)
        ((child,),) = cluster.probe.rows("SELECT id FROM threads WHERE parent_id = ?", (parent,))
        cluster.wait_settled(n2, child)
        cluster.send(n2, child, "gate-cross")  # C runs on n2, waiting on its gate
        cluster.wait_running(n2, child, owner="n2")
        cluster.send(n1, parent, f"ask {child} more")
        cluster.wait_running(n1, parent, owner="n1")
        cluster.wait_for(
            lambda: any(
                m["content"] == "more" for m in cluster.messages(n2, child) if m["role"] == "user"
            ),
            what="the parent's message queued in the child",
        )
        cluster.open_gate("gate-cross")
        answer = cluster.wait_for(
            lambda: next(
                (
                    m["content"]
                    for m in cluster.messages(n1, parent)
                    if (m["content"] or "").startswith("got: passed gate-cross")
                ),
                None,
            ),
            timeout=30,
            what="the blocking call answered on n1",
        )
        assert f"Reference: {child}" in answer
        stored = n1.get(
            f"/api/threads/{parent}/messages", order="asc", includeSilent="true", limit=1000
        ).json()["messages"]
        calls = [m for m in stored if m["role"] == "tool" and m["name"] == "subagent_message"]
        assert calls[-1]["content"].startswith("passed gate-cross")
        # the result is the call's only: not also queued into P as a result message
        assert not any(
            "has returned the following result:\n\npassed gate-cross" in (m["content"] or "")
            for m in stored
        ), [m["content"] for m in stored]


def test_c12_028_a_page_kept_on_one_node_follows_writes_on_another(tmp_path: Path) -> None:
    """C12-028: n2 keeps the pages it served (spec 08 §8.4.1); a run, an edit and a
    deletion through n1 are in n2's next read of the same pages, which n2 validates by the
    thread row's ``event_seq`` on the shared database."""
    with start_cluster(tmp_path, n=2) as cluster:
        n1, n2 = cluster.nodes
        thread = cluster.create_thread(n1)

        def contents(query: dict[str, Any]) -> list[str | None]:
            page = n2.get(f"/api/threads/{thread}/messages", **query)
            assert page.status_code == 200, page.text
            return [m["content"] for m in page.json()["messages"]]

        pages: list[dict[str, Any]] = [{}, {"order": "asc", "limit": 1}]
        for query in pages:  # read twice: kept on n2
            assert contents(query) == contents(query) == []
        cluster.send(n1, thread, "hello")
        cluster.wait_settled(n1, thread)
        assert contents(pages[0]) == ["hello", "echo: hello"]
        assert contents(pages[1]) == ["hello"]
        assert contents(pages[0]) == ["hello", "echo: hello"]  # kept again
        stored = n1.get(f"/api/threads/{thread}/messages").json()["messages"]
        edited = n1.patch(f"/api/threads/{thread}/messages/{stored[0]['id']}", {"content": "hi"})
        assert edited.status_code == 200, edited.text
        assert contents(pages[1]) == ["hi"]
        assert n1.delete(f"/api/threads/{thread}/messages/{stored[1]['id']}").status_code == 200
        assert contents(pages[0]) == ["hi"]
