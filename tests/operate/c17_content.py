"""A store's content made and read back through the public API, for the backup, restore and
upgrade tests of spec 17 (§17.3, §17.4).

``make_content`` fills a store through a real node (``tests/multinode``'s project: agents
``echo``, ``slow`` — a tool call and its log rows —, ``boss`` — a child thread —, ``payer``
— parked on an approval —, ``gate``): threads with messages, tool calls, logs, files, a
shared state, children and statuses (idle, awaiting approval, stopped, terminated).
``snapshot`` reads EVERY thread of a node back (the thread, all its message pages with
sub-prompt messages and silent ones, logs and each log's detail, files and their bytes,
the shared state, cost, subagents, approvals), so two snapshots compare equal exactly when
a reader of the API sees the same store.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from multinode.cluster_harness import (
    TIMINGS,
    Cluster,
    Node,
    spawn_node,
    stop_node,
    wait_healthy,
)
from needs import free_port

THREADLOOM = [sys.executable, "-m", "threadloom.cli"]


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str) -> Ran:
    """``threadloom ARGS`` run in this process (Typer's runner: the command's own code,
    its exit code and its two streams, without a process start per call)."""
    from typer.testing import CliRunner

    from threadloom.cli.commands import app

    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return Ran(result.exit_code, result.stdout, result.stderr)


def start_node(
    url: str, folder: Path, name: str, project: Path | None = None, **env: str
) -> tuple[Cluster, Node]:
    """A real ``threadloom serve`` on ``url``, healthy: of the multinode tests' project, or
    of ``project`` (a previous release serves its own copy of it)."""
    folder.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(url, [], folder)
    if project is None:
        node = spawn_node(cluster, name, folder / f"{name}.log", **env)
    else:
        node = spawn_project(cluster, project, name, folder / f"{name}.log", **env)
    cluster.nodes.append(node)
    try:
        wait_healthy(node)
    except BaseException:
        stop_node(node)
        raise
    return cluster, node


def spawn_project(cluster: Cluster, project: Path, name: str, log: Path, **env: str) -> Node:
    """``threadloom serve PROJECT`` as ``cluster_harness`` starts its nodes (the same
    timings and clean environment), on ``project``; not waited for."""
    port = free_port()
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("THREADLOOM_") and not k.endswith("_API_KEY")
    }
    clean.update(TIMINGS)
    clean.update({"THREADLOOM_NODE_ID": name, "THREADLOOM_TEST_GATE_DIR": str(cluster.gate_dir)})
    clean.update(env)
    command = [*THREADLOOM, "serve", str(project), "--port", str(port), "--store", cluster.url]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*command, "--log-level", "warning"], env=clean, stdout=out, stderr=subprocess.STDOUT
        )
    return Node(name, f"http://127.0.0.1:{port}", proc, log)


def _ok(response: httpx.Response, *codes: int) -> Any:
    assert response.status_code in (codes or (200,)), (response.status_code, response.text)
    return response.json() if response.content else None


def _settle(cluster: Cluster, node: Node, thread: str, timeout: float = 30) -> None:
    def done() -> bool:
        detail = _ok(node.get(f"/api/threads/{thread}"))
        status = detail["status"]
        return bool(status["state"] != "running" and not any_pending(node, thread))

    cluster.wait_for(done, timeout, f"thread {thread} settled")


def any_pending(node: Node, thread: str) -> bool:
    page = _ok(node.get(f"/api/threads/{thread}/messages", order="asc", limit=1000))
    return any(m.get("status") == "pending" for m in page["messages"])


def make_content(cluster: Cluster, node: Node, big_file_bytes: int = 0) -> list[str]:
    """Threads of every kind on ``node``; their ids (top-level ones)."""
    made: list[str] = []
    echo = cluster.create_thread(node, "echo")
    for text in ("hello", "and again"):
        cluster.send(node, echo, text)
        _settle(cluster, node, echo)
    made.append(echo)

    slow = cluster.create_thread(node, "slow")  # a tool call, its result, two LLM log rows
    cluster.send(node, slow, "the report")
    _settle(cluster, node, slow)
    made.append(slow)

    boss = cluster.create_thread(node, "boss")  # a blocking child that reports back
    cluster.send(node, boss, "create the work")
    _settle(cluster, node, boss, timeout=60)
    children = _ok(node.get(f"/api/threads/{boss}/subagents"))
    assert children, "the boss thread has a child"
    made.append(boss)

    payer = cluster.create_thread(node, "payer")  # parked: awaiting approval
    cluster.send(node, payer, "pay bo")
    cluster.wait_for(
        lambda: _ok(node.get(f"/api/threads/{payer}"))["status"]["reason"] == "awaiting_approval",
        30,
        "the payer thread parked",
    )
    made.append(payer)

    stopped = cluster.create_thread(node, "gate")  # a run stopped midway
    cluster.send(node, stopped, "gate-never-opened")
    cluster.wait_for(
        lambda: _ok(node.get(f"/api/threads/{stopped}"))["status"]["state"] == "running",
        30,
        "the gate thread running",
    )
    _ok(node.post(f"/api/threads/{stopped}/stop", {}))
    _settle(cluster, node, stopped)
    made.append(stopped)

    ended = cluster.create_thread(node, "echo")  # terminated, with files and a shared state
    cluster.send(node, ended, "files follow")
    _settle(cluster, node, ended)
    notes = base64.b64encode(b"notes of the thread\n").decode()
    _ok(
        node.post(
            f"/api/threads/{ended}/fs/notes/a.txt", {"data": notes, "mimeType": "text/plain"}
        ),
        200,
        201,
    )
    if big_file_bytes:
        blob = base64.b64encode(os.urandom(big_file_bytes)).decode()
        _ok(node.post(f"/api/threads/{ended}/fs/big.bin", {"data": blob}), 200, 201)
    state = httpx.put(f"{node.base}/api/threads/{ended}/state", json={"state": {"k": [1, 2]}})
    _ok(state)
    _ok(node.post(f"/api/threads/{ended}/terminate", {}))
    made.append(ended)
    return made


def all_threads(node: Node) -> list[str]:
    """Every thread's id, children included, in creation order."""
    ids: list[str] = []
    offset = 0
    while True:
        page = _ok(
            node.get(
                "/api/threads", include_children="true", sort="oldest", limit=100, offset=offset
            )
        )
        found = [t["id"] for t in page["threads"]]
        ids += found
        if len(found) < 100:
            return ids
        offset += 100


def _messages(node: Node, thread: str) -> list[Any]:
    out: list[Any] = []
    offset = 0
    while True:
        page = _ok(
            node.get(
                f"/api/threads/{thread}/messages",
                order="asc",
                limit=50,
                offset=offset,
                depth=10,
                includeSilent="true",
            )
        )
        out.append(page)
        if len(page["messages"]) < 50:
            return out
        offset += 50


def _files(node: Node, thread: str) -> dict[str, Any]:
    found = _ok(node.get(f"/api/threads/{thread}/fs", find="*", type="all", limit=1000))
    read: dict[str, Any] = {"listing": found}
    for entry in found.get("files", found.get("entries", [])):
        path = entry.get("path", "")
        if entry.get("type") == "file" or entry.get("isDirectory") is False:
            body = node.get(f"/api/threads/{thread}/fs/{path.lstrip('/')}")
            assert body.status_code == 200, body.text
            read[path] = body.content
    return read


READS = ("thread", "messages", "logs", "files", "state", "cost", "subagents", "approvals")


def read_thread(node: Node, thread: str, parts: tuple[str, ...] = READS) -> dict[str, Any]:
    """Everything the API answers about one thread (``parts`` of it: a previous release
    lacks some routes)."""
    base = f"/api/threads/{thread}"
    read: dict[str, Any] = {}
    for part in parts:
        if part == "thread":
            read[part] = _ok(node.get(base))
        elif part == "messages":
            read[part] = _messages(node, thread)
        elif part == "logs":
            read[part] = logs = _ok(node.get(f"{base}/logs", limit=1000))
            read["log_details"] = [_ok(node.get(f"{base}/logs/{r['id']}")) for r in logs["logs"]]
        elif part == "files":
            read[part] = _files(node, thread)
        else:
            read[part] = _ok(node.get(f"{base}/{part}"))
    return read


def snapshot(node: Node) -> dict[str, dict[str, Any]]:
    """Every thread of the node's store, read through the API."""
    return {thread: read_thread(node, thread) for thread in all_threads(node)}


def wait_file(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)
