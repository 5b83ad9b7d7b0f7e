"""``threadloom serve`` as a user runs it (what ``make serve`` does): a child process serving
``examples/`` on a SQLite file, driven over HTTP, stopped with SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
THREADLOOM = [sys.executable, "-m", "threadloom.cli"]


def free_port() -> int:
    """A port free at this moment; another process may take it before a child binds it, so a
    child that listens on it is started by ``spawn_server`` or ``run_on_free_port``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


PORT_ATTEMPTS = 5
"""How many ports a child is started on before a port taken each time fails the test."""


def port_was_taken(output: str) -> bool:
    """Whether a child's output says it could not bind its port because it was in use."""
    said = output.lower()
    return "address already in use" in said or "[errno 98]" in said


def health_node(base: str) -> str | None:
    """The ``node`` id of the Threadloom server answering healthy at ``base``, else None
    (nothing listens, not healthy, or not a Threadloom server)."""
    try:
        response = httpx.get(f"{base}/api/health", timeout=1)
        node = response.json().get("node") if response.status_code == 200 else None
    except (httpx.TransportError, ValueError, AttributeError):
        return None
    return node if isinstance(node, str) else None


def wait_ready(base: str, proc: subprocess.Popen[bytes], node: str) -> bool:
    """Whether ``proc`` came up at ``base``: True once health answers with its own ``node``
    id while it is alive (so a server that took the port is never taken for it), False if
    it exited first."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if health_node(base) == node and proc.poll() is None:
            return True
        time.sleep(0.1)
    raise AssertionError("server did not become ready")


def serve_command(
    project: Path, db: Path | str, port: int, log_level: str = "warning"
) -> list[str]:
    """``threadloom serve PROJECT`` on the SQLite file ``db`` (or the store URL ``db``) and
    ``port`` (``info`` logs uvicorn's start-up lines, which the refusal tests look for)."""
    return [
        *THREADLOOM,
        "serve",
        str(project),
        "--port",
        str(port),
        "--store",
        db if isinstance(db, str) else f"sqlite:///{db}",
        "--log-level",
        log_level,
    ]


class DrainedServer(subprocess.Popen[bytes]):
    """A server child whose output (stdout and stderr together) a thread keeps reading into
    memory from the start: a child that logs more than a pipe holds (64 KiB) never blocks
    on a write while the test does not read (a fuzzed server logging its refusals did,
    and hung the run). ``communicate`` answers the whole output, as with a plain pipe."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._output = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.stdout is not None
        for chunk in iter(lambda: self.stdout.read1(65536), b""):  # type: ignore[union-attr]
            self._output += chunk

    def communicate(  # type: ignore[override]
        self, input: bytes | None = None, timeout: float | None = None
    ) -> tuple[bytes, None]:
        self.wait(timeout)
        self._reader.join(timeout)
        return bytes(self._output), None


def spawn_server(
    project: Path, db: Path | str, log_level: str = "warning", **settings: str
) -> tuple[subprocess.Popen[bytes], str]:
    """A ready ``threadloom serve`` child on a free port, without provider keys (the demo
    model), with only the ``THREADLOOM_*`` ``settings`` given plus a node id of its own (by
    which its health answer is told from another server's), started again on a new port if
    another process took the port first; the process and its base URL."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and not k.startswith("THREADLOOM_")
    }
    env.update(settings)
    env.setdefault("THREADLOOM_NODE_ID", f"test-serve-{uuid.uuid4().hex}")
    output = ""
    for _ in range(PORT_ATTEMPTS):
        port = free_port()
        proc = DrainedServer(
            serve_command(project, db, port, log_level),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            ready = wait_ready(base, proc, env["THREADLOOM_NODE_ID"])
        except BaseException as exc:
            proc.kill()
            exc.add_note(proc.communicate(timeout=30)[0].decode(errors="replace"))
            raise
        if ready:
            return proc, base
        output = proc.communicate(timeout=30)[0].decode(errors="replace")
        if not port_was_taken(output):
            raise AssertionError(f"server exited with {proc.returncode}:\n{output}")
    raise AssertionError(f"the port was taken {PORT_ATTEMPTS} times in a row:\n{output}")


def run_on_free_port(command: Callable[[int], list[str]]) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` of ``command(port)`` on a free port (output captured as text,
    60 s at most), run again on another port when the child found its port taken."""
    for _ in range(PORT_ATTEMPTS - 1):
        done = subprocess.run(command(free_port()), capture_output=True, text=True, timeout=60)
        if done.returncode == 0 or not port_was_taken(done.stdout + done.stderr):
            return done
    return subprocess.run(command(free_port()), capture_output=True, text=True, timeout=60)


@contextmanager
def serving(tmp_path: Path, store: str | None = None) -> Iterator[str]:
    """``threadloom serve examples`` (``spawn_server``) on ``store`` (else an SQLite file);
    its base URL. Stopped with SIGTERM: it must exit cleanly, without a traceback."""
    proc, base = spawn_server(ROOT / "examples", store or tmp_path / "serve.db")
    try:
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the signal it caught
    assert proc.returncode in (0, -signal.SIGTERM)
    assert b"Traceback" not in output


def ask(base: str, agent: str, text: str) -> tuple[str, list[dict[str, Any]]]:
    """A new thread of ``agent``, one message, the run awaited; the thread id and its
    messages, oldest first."""
    created = httpx.post(f"{base}/api/threads", json={"agent_id": agent})
    assert created.status_code == 200, created.text
    thread: str = created.json()["threadId"]
    sent = httpx.post(f"{base}/api/threads/{thread}/messages", json={"content": text})
    assert sent.status_code == 202
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = httpx.get(f"{base}/api/threads/{thread}").json()["status"]
        if status["state"] != "running" and status["reason"] is not None:
            break
        time.sleep(0.1)
    messages = httpx.get(f"{base}/api/threads/{thread}/messages?order=asc").json()
    return thread, messages["messages"]


def test_serve_examples_answers_a_message_and_stops_on_sigterm(
    tmp_path: Path, db_url: str, backend: str
) -> None:
    with serving(tmp_path, db_url) as base:
        health = httpx.get(f"{base}/api/health").json()
        wire = {"sqlite": "sqlite", "postgresql": "postgres"}[backend]
        assert health["status"] == "ok" and health["store"] == wire
        _, messages = ask(base, "support", "Where is order A-1001?")
        roles = [m["role"] for m in messages]
        assert roles[0] == "user" and roles[-1] == "assistant"
        assert "A-1001" in (messages[-1]["content"] or "")


def test_serve_examples_support_runs_the_research_subagent(tmp_path: Path, db_url: str) -> None:
    """The example's blocking ``research`` relationship over HTTP: the child is in the
    support thread's registry, finished its session, and the answer carries its result."""
    with serving(tmp_path, db_url) as base:
        thread, messages = ask(base, "support", "Research the warranty for order A-1002")
        (entry,) = httpx.get(f"{base}/api/threads/{thread}/subagents").json()["subagents"]
        assert (entry["relationship"], entry["agent_name"], entry["status"]) == (
            "research",
            "warranty_research",
            "idle",
        )
        child = httpx.get(f"{base}/api/threads/{entry['id']}").json()
        assert child["thread"]["parent"] == thread
        assert (child["status"]["state"], child["status"]["reason"]) == ("idle", "session_stop")
        talk = httpx.get(f"{base}/api/threads/{entry['id']}/messages?order=asc").json()
        submitted = talk["messages"][-1]
        assert submitted["role"] == "tool" and submitted["name"] == "submit_findings"
        findings = submitted["content"]
        assert "Desk lamp" in findings and "does not cover" in findings
        call = next(m for m in messages if m["name"] == "subagent_create")
        assert call["subagent_id"] == entry["id"] and call["subagent_status"] == "idle"
        assert messages[-1]["role"] == "assistant" and findings in messages[-1]["content"]


def serve_refused(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``threadloom serve examples`` with ``args`` and only these ``THREADLOOM_*`` variables,
    expected to end by itself (before binding its port, so a taken port cannot matter)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("THREADLOOM_")}
    return subprocess.run(
        [*serve_command(ROOT / "examples", tmp_path / "x.db", free_port(), "info"), *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


LISTENING = ("Started server process", "Uvicorn running", "Application startup")


def test_c10_028_public_address_without_credentials_exits_2_before_listening(
    tmp_path: Path,
) -> None:
    """Spec 10 §10.1 rule 2, §10.13: exit code 2 and a message that says what to do."""
    done = serve_refused(tmp_path, "--host", "0.0.0.0")
    assert done.returncode == 2, done.stdout + done.stderr
    for step in ("threadloom users create", "threadloom keys create", "THREADLOOM_ADMIN_TOKEN"):
        assert step in done.stderr
    assert not any(line in done.stdout + done.stderr for line in LISTENING)
    assert "Traceback" not in done.stderr


def test_refused_settings_exit_2_before_listening(tmp_path: Path) -> None:
    """Spec 10 §10.1 rule 3 (``local`` only on loopback), §10.3 (a short admin token),
    §10.7 rule 4 (credentials with ``*``): settings a server cannot start with."""
    cases = [
        (("--host", "0.0.0.0"), {"THREADLOOM_AUTH": "local"}, "THREADLOOM_AUTH=local"),
        ((), {"THREADLOOM_ADMIN_TOKEN": "short"}, "at least 32 characters"),
        (
            (),
            {"THREADLOOM_CORS_ORIGINS": "*", "THREADLOOM_CORS_CREDENTIALS": "1"},
            "THREADLOOM_CORS_CREDENTIALS",
        ),
    ]
    for args, env, says in cases:
        done = serve_refused(tmp_path, *args, **env)
        assert done.returncode == 2, (env, done.stdout + done.stderr)
        assert says in done.stderr, env
        assert not any(line in done.stdout + done.stderr for line in LISTENING)


def test_example_client_chat_shows_each_delivery_state(tmp_path: Path) -> None:
    """``examples/client_chat.py`` (issue 7): one message through ``ThreadSession`` against
    a served project prints its sending, queued and complete states and the reply."""
    with serving(tmp_path) as base:
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "client_chat.py"),
                "--url",
                base,
                "-m",
                "Where is order A-1001?",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    mine = [line for line in lines if "You: Where is order A-1001?" in line]
    states = [line.split("]")[0].strip("[ ") for line in mine]
    # every view is printed as it comes; a view the reader was too slow for is skipped, so
    # "queued" may be passed over on a fast run — never the order
    assert states[0] == "sending" and states[-1] == "complete:success"
    assert states in (["sending", "queued", "complete:success"], ["sending", "complete:success"])
    assert any("Agent: Here is what I found" in line for line in lines)


def test_sigterm_ends_open_streams_with_1001_so_clients_resume(tmp_path: Path) -> None:
    """Spec 09 §9.10.1 (close code 1001 "Server shutting down", which a client of spec 11
    resumes on; uvicorn on its own would send 1012): a thread stream, the thread-list socket
    and an SSE stream open when the server gets SIGTERM all end at once, and the server
    exits without waiting out its graceful-shutdown timeout."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    proc, base = spawn_server(ROOT / "examples", tmp_path / "serve.db")
    try:
        thread, _ = ask(base, "support", "Where is order A-1001?")
        ws_base = base.replace("http://", "ws://")
        with (
            connect(f"{ws_base}/api/threads/{thread}/stream") as stream,
            connect(f"{ws_base}/api/events") as listing,
            httpx.stream(
                "GET",
                f"{base}/api/threads/{thread}/stream",
                headers={"Accept": "text/event-stream"},
                timeout=10,
            ) as sse,
        ):
            assert json.loads(stream.recv(timeout=10))["type"] == "thread_status"
            lines = sse.iter_lines()
            assert next(lines) == "retry: 1000"
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            for socket_ in (stream, listing):
                with pytest.raises(ConnectionClosed) as closed:
                    while True:  # frames queued before the shutdown come first
                        socket_.recv(timeout=10)
                assert closed.value.rcvd is not None
                assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (
                    1001,
                    "Server shutting down",
                )
            rest = list(lines)  # the SSE response ends instead of hanging
            assert all(not line.startswith("event: error") for line in rest)
        output, _ = proc.communicate(timeout=30)
        assert time.monotonic() - started < 15
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode in (0, -signal.SIGTERM)
    assert b"Traceback" not in output


SERVER_GC = """
import asyncio, gc, json, sys
import uvicorn
from threadloom.server.app import serve_app
from threadloom.server.serve import ThreadloomServer
from threadloom.server.settings import ServerSettings

settings = ServerSettings(port=int(sys.argv[1]), store=sys.argv[2])
app = serve_app(None, settings)
config = uvicorn.Config(app, host="127.0.0.1", port=settings.port, log_level="warning")
server = ThreadloomServer(config, app)

async def main():
    before = [gc.get_freeze_count(), list(gc.get_threshold())]
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    after = [gc.get_freeze_count(), list(gc.get_threshold())]
    print(json.dumps({"before": before, "after": after}), flush=True)
    server.should_exit = True
    await task

asyncio.run(main())
"""


def test_the_server_process_tunes_its_garbage_collector(tmp_path: Path) -> None:
    """``threadloom serve``'s server, once started, freezes what exists and collects less
    often (``threadloom.tune_gc``); until then (a process that only imports Threadloom) CPython's
    collector is as it was."""
    from threadloom.gc_tuning import GC_THRESHOLD

    done = run_on_free_port(
        lambda port: [sys.executable, "-c", SERVER_GC, str(port), f"sqlite:///{tmp_path / 'g.db'}"]
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] == [0, [700, 10, 10]]
    frozen, threshold = seen["after"]
    assert frozen > 10_000 and threshold == list(GC_THRESHOLD)
