"""Several real ``threadloom serve`` processes on one PostgreSQL schema (spec 12 §12.9).

``start_cluster`` starts N nodes (``n1`` … ``nN``) on free loopback ports, all on one new
schema, with the test project (agents ``echo`` and ``gate``) and short liveness timings
(heartbeat 0.5 s, TTL 4 s, sweep 1 s: a node fences itself after 2 s without a
heartbeat), and waits for every node's ``/api/health``. The tests drive them through the
public API only and read the database (``probe``) where a time or an owner must be seen
exactly; faults are signals: SIGKILL (a crash), SIGSTOP / SIGCONT (a partition), SIGTERM
(a drain), and a paused TCP proxy between one node and the database (its connections
stall).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from needs import free_port
from pg_support import PG_URL, create_schema, drop_schema, require_postgres, schema_url
from store_probe import StoreProbe

PROJECT = Path(__file__).resolve().parent / "project"
THREADLOOM = [sys.executable, "-m", "threadloom.cli"]
TIMINGS = {
    "THREADLOOM_NODE_HEARTBEAT_SECONDS": "0.5",
    "THREADLOOM_NODE_TTL_SECONDS": "4",
    "THREADLOOM_SWEEP_SECONDS": "1",
}
TTL_S = float(TIMINGS["THREADLOOM_NODE_TTL_SECONDS"])
SWEEP_S = float(TIMINGS["THREADLOOM_SWEEP_SECONDS"])


@dataclass
class Node:
    """One ``threadloom serve`` process of the cluster."""

    node_id: str
    base: str
    proc: subprocess.Popen[bytes]
    log: Path

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(f"{self.base}{path}", params=params, timeout=10)

    def post(self, path: str, body: Any = None) -> httpx.Response:
        return httpx.post(f"{self.base}{path}", json=body, timeout=20)

    def patch(self, path: str, body: Any = None) -> httpx.Response:
        return httpx.patch(f"{self.base}{path}", json=body, timeout=20)

    def delete(self, path: str) -> httpx.Response:
        return httpx.delete(f"{self.base}{path}", timeout=20)

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def kill(self) -> None:
        """A crash: SIGKILL, and the process reaped."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@dataclass
class Cluster:
    """The nodes, their schema and what the tests read and control."""

    url: str
    nodes: list[Node]
    gate_dir: Path
    probe: StoreProbe = field(init=False)
    proxies: dict[str, Proxy] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.probe = StoreProbe(self.url)

    def node(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)

    # -- the public API ------------------------------------------------------------------
    def create_thread(self, node: Node, agent: str = "echo") -> str:
        created = node.post("/api/threads", {"agent_id": agent})
        assert created.status_code == 200, created.text
        thread: str = created.json()["threadId"]
        return thread

    def send(self, node: Node, thread: str, text: str) -> dict[str, Any]:
        sent = node.post(f"/api/threads/{thread}/messages", {"content": text})
        assert sent.status_code == 202, sent.text
        body: dict[str, Any] = sent.json()
        return body

    def status(self, node: Node, thread: str) -> tuple[str, str | None]:
        status = node.get(f"/api/threads/{thread}").json()["status"]
        return status["state"], status["reason"]

    def messages(self, node: Node, thread: str) -> list[dict[str, Any]]:
        page = node.get(f"/api/threads/{thread}/messages", order="asc", limit=1000).json()
        messages: list[dict[str, Any]] = page["messages"]
        return messages

    def open_gate(self, name: str) -> None:
        (self.gate_dir / name).touch()

    # -- the database, where timing or ownership must be seen exactly ---------------------
    def event_seq(self, thread: str) -> int:
        ((seq,),) = self.probe.rows("SELECT event_seq FROM threads WHERE id = ?", (thread,))
        return int(seq)

    def lease(self, thread: str) -> tuple[str | None, int]:
        ((node, token),) = self.probe.rows(
            "SELECT lease_node, lease_token FROM threads WHERE id = ?", (thread,)
        )
        return node, int(token)

    def wait_for(
        self, check: Callable[[], Any], timeout: float = 20.0, what: str = "the condition"
    ) -> Any:
        """Poll ``check`` until it returns something true; that value."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not happen within {timeout:g} s")
            time.sleep(0.05)

    def wait_running(self, node: Node, thread: str, owner: str | None = None) -> None:
        """Until the thread runs (on ``owner``, when given)."""

        def running() -> bool:
            lease_node, _ = self.lease(thread)
            state, _ = self.status(node, thread)
            return state == "running" and (owner is None or lease_node == owner)

        self.wait_for(running, what=f"thread {thread} running on {owner or 'a node'}")

    def wait_settled(self, node: Node, thread: str, timeout: float = 20.0) -> tuple[str, str]:
        """Until the thread's status is no longer ``running``; the (state, reason)."""

        def settled() -> tuple[str, str] | None:
            state, reason = self.status(node, thread)
            return (state, reason) if state != "running" and reason is not None else None

        found: tuple[str, str] = self.wait_for(settled, timeout, f"thread {thread} settled")
        return found


def _spawn(node_id: str, url: str, gate_dir: Path, log: Path, env: dict[str, str]) -> Node:
    port = free_port()
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("THREADLOOM_") and not k.endswith("_API_KEY")
    }
    clean.update(TIMINGS)
    clean.update({"THREADLOOM_NODE_ID": node_id, "THREADLOOM_TEST_GATE_DIR": str(gate_dir), **env})
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *THREADLOOM,
                *("serve", str(PROJECT), "--port", str(port), "--store", url),
                *("--log-level", "warning"),
            ],
            env=clean,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return Node(node_id, f"http://127.0.0.1:{port}", proc, log)


def spawn_node(cluster: Cluster, node_id: str, log: Path, **env: str) -> Node:
    """Start one more node on the cluster's schema (a restart, or a new node)."""
    return _spawn(node_id, cluster.url, cluster.gate_dir, log, env)


def wait_healthy(node: Node, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not node.alive:
            raise AssertionError(f"node {node.node_id} exited:\n{node.output()}")
        try:
            health = httpx.get(f"{node.base}/api/health", timeout=1)
            if health.status_code == 200 and health.json().get("node") == node.node_id:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"node {node.node_id} did not become healthy:\n{node.output()}")


def stop_node(node: Node) -> None:
    """SIGTERM, then SIGKILL after 10 s (spec 12 §12.9 rule 1)."""
    if not node.alive:
        return
    node.proc.send_signal(signal.SIGCONT)  # a paused node must run to end
    node.proc.send_signal(signal.SIGTERM)
    try:
        node.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        node.proc.kill()
        node.proc.wait(timeout=10)


@dataclass
class Proxy:
    """A TCP proxy between one node and PostgreSQL (``tcp_proxy.py``): ``pause`` stalls
    the node's every connection without an error, ``resume`` lets them flow again."""

    proc: subprocess.Popen[bytes]
    port: int

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        self.proc.kill()
        self.proc.wait(timeout=10)


def _start_proxy(url: str) -> tuple[Proxy, str]:
    """A proxy to ``url``'s server, and ``url`` through it."""
    parts = urlsplit(url)
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve().parent / "tcp_proxy.py"),
            str(port),
            parts.hostname or "127.0.0.1",
            str(parts.port or 5432),
        ],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    proxied = urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) > 1 else host))
    return Proxy(proc, port), proxied


@contextmanager
def start_cluster(
    tmp_path: Path,
    n: int = 3,
    proxied: tuple[str, ...] = (),
    node_env: dict[str, dict[str, str]] | None = None,
    pg_url: str = PG_URL,
    **env: str,
) -> Iterator[Cluster]:
    """``n`` nodes on a new schema, all healthy; stopped and the schema dropped after.
    ``env`` is given to every node, ``node_env[node_id]`` to one; the nodes named in
    ``proxied`` reach PostgreSQL through a proxy of their own (``Cluster.proxies``);
    ``pg_url``: another server than the shared one (a test's own, ``pg_cluster.py``)."""
    require_postgres()
    schema = f"tl_mn_{uuid.uuid4().hex[:12]}"
    create_schema(schema, pg_url)
    url = schema_url(schema, pg_url)
    gate_dir = tmp_path / "gates"
    gate_dir.mkdir(exist_ok=True)
    nodes: list[Node] = []
    proxies: dict[str, Proxy] = {}
    try:
        for i in range(1, n + 1):
            node_id, node_url = f"n{i}", url
            if node_id in proxied:
                proxies[node_id], node_url = _start_proxy(url)
            own = {**env, **(node_env or {}).get(node_id, {})}
            nodes.append(_spawn(node_id, node_url, gate_dir, tmp_path / f"{node_id}.log", own))
        for node in nodes:
            wait_healthy(node)
        cluster = Cluster(url, nodes, gate_dir)
        cluster.proxies = proxies
        yield cluster
    finally:
        for proxy in proxies.values():
            proxy.resume()  # a node waiting on a paused proxy could not drain
        for node in nodes:
            stop_node(node)
        for proxy in proxies.values():
            proxy.stop()
        drop_schema(schema, pg_url)
