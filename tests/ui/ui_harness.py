"""A real ``threadloom serve`` process for the browser tests, and Debian's chromium.

``Server`` runs ``threadloom serve`` on the test project (``tests/ui/project``) and an
SQLite file, on a port it keeps: ``kill()`` is a crash (SIGKILL) and ``start()`` brings the
same server back on the same port and file, so a page left open can catch up.
``chromium_or_skip()`` finds ``/usr/bin/chromium`` or skips the test with the reason — a
failure under ``CI=true``, where the browser tests must run (as ``require_postgres``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from needs import cannot_run, free_port

PROJECT = Path(__file__).resolve().parent / "project"
CHROMIUM = os.environ.get("THREADLOOM_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (None when they can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        return f"playwright is not installed ({exc}); pip install -e '.[dev]'"
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"{CHROMIUM} is missing; as root: apt-get install -y chromium (make test does)"
    return None


def chromium_or_skip() -> None:
    """Skip (or, under ``CI=true``, fail) when the browser tests cannot run."""
    reason = browser_missing()
    if reason is not None:
        cannot_run(reason, "the browser tests")


class Server:
    """One ``threadloom serve`` child: the test project on ``db``, at ``base``."""

    def __init__(self, db: Path, gate_dir: Path, project: Path = PROJECT, **env: str) -> None:
        self.db = db
        self.project = project
        self.gate_dir = gate_dir
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.endswith("_API_KEY") and not k.startswith("THREADLOOM_")
        }
        self.env.update(env)
        self.env["THREADLOOM_TEST_GATE_DIR"] = str(gate_dir)
        self.env.setdefault("THREADLOOM_DRAIN_SECONDS", "1")
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = db.with_suffix(".log")

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "threadloom.cli", *args, "--store", f"sqlite:///{self.db}"]

    def cli(self, *args: str, stdin: str | None = None) -> str:
        """Run a ``threadloom`` command on this server's store (users, keys)."""
        done = subprocess.run(
            self.command(*args), input=stdin, capture_output=True, text=True, env=self.env
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(self, port: int | None = None) -> Server:
        port = port or self.port
        node = f"ui-test-{uuid.uuid4().hex[:8]}"
        env = {**self.env, "THREADLOOM_NODE_ID": node}
        out = self.log.open("ab")
        args = ["serve", str(self.project), "--port", str(port), "--log-level", "warning"]
        self.proc = subprocess.Popen(self.command(*args), env=env, stdout=out, stderr=out)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited {self.proc.returncode}:\n{self.output()}")
            try:
                health = httpx.get(f"{base}/api/health", timeout=1)
                if health.status_code == 200 and health.json().get("node") == node:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"serve did not become ready:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """A crash: SIGKILL, reaped."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def open_gate(self, name: str) -> None:
        (self.gate_dir / name).touch()

    # the API as a second client (no browser): local mode, or with a bearer key
    def api(
        self, method: str, path: str, key: str | None = None, base: str | None = None, **kw: Any
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.request(
            method, f"{base or self.base}{path}", headers=headers, timeout=20, **kw
        )
