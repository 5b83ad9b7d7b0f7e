"""``threadloom serve`` as a user runs it (what ``make serve`` does): a child process serving
``examples/`` on a SQLite file, driven over HTTP, stopped with SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
THREADLOOM = [sys.executable, "-m", "threadloom.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_ready(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/api/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("server did not become ready")


def test_serve_examples_answers_a_message_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.Popen(
        [
            *THREADLOOM,
            "serve",
            str(ROOT / "examples"),
            "--port",
            str(port),
            "--store",
            f"sqlite:///{tmp_path / 'serve.db'}",
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, proc)
        health = httpx.get(f"{base}/api/health").json()
        assert health["status"] == "ok" and health["store"] == "sqlite"
        created = httpx.post(f"{base}/api/threads", json={"agent_id": "support"})
        assert created.status_code == 200, created.text
        thread = created.json()["threadId"]
        sent = httpx.post(
            f"{base}/api/threads/{thread}/messages", json={"content": "Where is order A-1001?"}
        )
        assert sent.status_code == 202
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status = httpx.get(f"{base}/api/threads/{thread}").json()["status"]
            if status["state"] != "running" and status["reason"] is not None:
                break
            time.sleep(0.1)
        messages = httpx.get(f"{base}/api/threads/{thread}/messages?order=asc").json()
        roles = [m["role"] for m in messages["messages"]]
        assert roles[0] == "user" and roles[-1] == "assistant"
        assert "A-1001" in (messages["messages"][-1]["content"] or "")
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the signal it caught
    assert proc.returncode in (0, -signal.SIGTERM)
    assert b"Traceback" not in output


def serve_refused(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``threadloom serve examples`` with ``args`` and only these ``THREADLOOM_*`` variables,
    expected to end by itself."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("THREADLOOM_")}
    return subprocess.run(
        [
            *THREADLOOM,
            "serve",
            str(ROOT / "examples"),
            "--port",
            str(free_port()),
            "--store",
            f"sqlite:///{tmp_path / 'x.db'}",
            *args,
        ],
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
