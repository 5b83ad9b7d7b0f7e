"""A PostgreSQL cluster of a test's own, to stop and restart under load (issue 31 item 1-2).

The shared server at 127.0.0.1:5432 must never be restarted by a test (every other test
uses it), so a test that needs the database to go away makes a cluster of its own with
Debian's ``pg_createcluster`` on a free port, starts it, stops it (``fast`` or
``immediate``: the latter is a crash, no shutdown checkpoint), starts it again on the same
port, and drops it at the end. Creating one takes a second or two.

Where the machine cannot (no ``pg_createcluster``, or not root, which Debian's scripts need
to act as the ``postgres`` user), the test is skipped with the reason, and under
``CI=true`` fails, as tests/pg_support.py does for the shared server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from needs import cannot_run, free_port


def _version() -> str | None:
    root = Path("/etc/postgresql")
    if not root.is_dir():
        return None
    versions = sorted((p.name for p in root.iterdir() if p.name.isdigit()), key=int)
    return versions[-1] if versions else None


def cluster_unavailable() -> str | None:
    """Why a private cluster cannot be made here (``None`` when it can)."""
    if shutil.which("pg_createcluster") is None or shutil.which("pg_ctlcluster") is None:
        return "pg_createcluster/pg_ctlcluster (Debian's postgresql-common) are not installed"
    if os.geteuid() != 0:
        return "making a PostgreSQL cluster needs root (Debian's scripts act as postgres)"
    if _version() is None:
        return "no PostgreSQL version under /etc/postgresql"
    return None


def require_cluster() -> None:
    """Skip (or, under ``CI=true``, fail) when a private cluster cannot be made."""
    reason = cluster_unavailable()
    if reason is not None:
        cannot_run(f"a private PostgreSQL cluster cannot be made: {reason}", "these tests")


class PgCluster:
    """One private cluster: ``url`` reaches its ``postgres`` database as ``postgres``."""

    def __init__(self) -> None:
        version = _version()
        assert version is not None
        self.version = version
        self.name = f"tl_{uuid.uuid4().hex[:10]}"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}"
            )

    def create(self) -> None:
        self._run(
            "pg_createcluster",
            self.version,
            self.name,
            "--port",
            str(self.port),
            "--start-conf",
            "manual",
            "--",
            "--auth=trust",
            "--no-sync",
        )
        conf = Path("/etc/postgresql") / self.version / self.name / "postgresql.conf"
        with conf.open("a") as f:  # small and fast: a test cluster, thrown away after
            f.write(
                "\nlisten_addresses = '127.0.0.1'\nfsync = off\nfull_page_writes = off\n"
                "shared_buffers = 32MB\nmax_connections = 200\n"
            )
        self.start()

    def start(self) -> None:
        self._run("pg_ctlcluster", self.version, self.name, "start")
        self.wait_ready()

    def stop(self, mode: str = "fast") -> None:
        """``fast`` ends the sessions and shuts down cleanly; ``immediate`` is a crash."""
        self._run("pg_ctlcluster", self.version, self.name, "stop", "-m", mode)

    def restart(self, down_s: float = 0.0, mode: str = "fast") -> None:
        """Stop, stay down ``down_s`` seconds, start again on the same port."""
        self.stop(mode)
        if down_s:
            time.sleep(down_s)
        self.start()

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with psycopg.connect(self.url, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def drop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._run("pg_dropcluster", self.version, self.name, "--stop")


@contextlib.contextmanager
def private_cluster() -> Iterator[PgCluster]:
    """A started private cluster, dropped on exit (the caller checks ``require_cluster``)."""
    cluster = PgCluster()
    cluster.create()
    try:
        yield cluster
    finally:
        cluster.drop()
