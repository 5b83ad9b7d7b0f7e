"""A PostgreSQL primary and a streaming standby of a test's own (issue 36 item 6).

Made from nothing with the server's own programs (``initdb``, ``pg_basebackup``,
``pg_ctl``) in a temporary directory, on two free loopback ports, run as the ``postgres``
user when the test runs as root (``initdb`` refuses root), and removed at the end — also
when the test fails. The shared server at 127.0.0.1:5432 is never touched.

- ``synchronous=True``: the primary names the standby in ``synchronous_standby_names``, so
  a commit returns only once the standby has flushed it (``synchronous_commit = on``);
  ``False``: asynchronous streaming, a commit returns before the standby has it.
- ``url``: the multi-host URL the nodes use,
  ``postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres?target_session_attrs=read-write``:
  libpq tries the hosts in order and keeps the first that takes writes.
- ``kill_primary()``: ``pg_ctl stop -m immediate`` (the postmaster and its backends end at
  once, no shutdown checkpoint: a crash); ``promote()``: ``pg_ctl promote`` on the standby;
  ``stop_primary()`` then ``start_primary()``: what ``pg_ctl restart -m fast`` does.

The data directories use ``fsync = off``: the tests kill processes, never the machine, so
the operating system keeps every write a process handed it, and a write's durability is
decided by where the WAL went (the standby or not), which is what is measured.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from needs import cannot_run, free_port

STANDBY_NAME = "tl_standby"


def _bindir() -> Path | None:
    """The newest PostgreSQL's programs (Debian's layout, then ``PATH``)."""
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        versions = sorted(
            (p for p in root.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
        )
        for version in reversed(versions):
            if (version / "bin" / "initdb").exists():
                return version / "bin"
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def replication_unavailable() -> str | None:
    """Why a primary and a standby cannot be made here (``None`` when they can)."""
    bindir = _bindir()
    if bindir is None:
        return "the PostgreSQL server programs (initdb, pg_ctl, pg_basebackup) are not installed"
    for tool in ("pg_ctl", "pg_basebackup", "postgres"):
        if not (bindir / tool).exists():
            return f"{bindir / tool} is missing"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a postgres user to run the server as"
    return None


def require_replication() -> None:
    """Skip (or, under ``CI=true``, fail) when a primary and a standby cannot be made."""
    reason = replication_unavailable()
    if reason is not None:
        cannot_run(f"a replicated PostgreSQL cannot be made: {reason}", "the failover tests")


class Replicated:
    """A primary on ``port1`` and a standby streaming from it on ``port2``."""

    def __init__(self, *, synchronous: bool, standby_settings: str = "") -> None:
        bindir = _bindir()
        assert bindir is not None
        self.bin = bindir
        self.synchronous = synchronous
        self.standby_settings = standby_settings
        """More ``postgresql.conf`` lines for the standby."""
        self.root = Path(tempfile.mkdtemp(prefix="tl_failover_"))
        self.primary = self.root / "primary"
        self.standby = self.root / "standby"
        self.port1 = free_port()
        self.port2 = free_port()
        self.url = (
            f"postgresql://postgres@127.0.0.1:{self.port1},127.0.0.1:{self.port2}/postgres"
            "?target_session_attrs=read-write"
        )
        self.primary_url = f"postgresql://postgres@127.0.0.1:{self.port1}/postgres"
        self.standby_url = f"postgresql://postgres@127.0.0.1:{self.port2}/postgres"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.root.chmod(0o700)

    # -- running the server's programs ---------------------------------------------------
    def _run(self, tool: str, *args: str, timeout: float = 120) -> str:
        argv = [str(self.bin / tool), *args]
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(
                f"{tool} {' '.join(args)} failed ({done.returncode}): "
                f"{(done.stderr or done.stdout).strip()}"
            )
        return done.stdout

    def _conf(self, datadir: Path, text: str) -> None:
        """Settings that win over ``postgresql.conf`` (``postgresql.auto.conf`` is read last)."""
        with (datadir / "postgresql.auto.conf").open("a") as f:
            f.write(text)

    def _ctl(self, datadir: Path, *args: str) -> None:
        self._run("pg_ctl", "-D", str(datadir), "-l", str(datadir / "server.log"), *args)

    # -- building ------------------------------------------------------------------------
    def create(self) -> None:
        """The primary from ``initdb``, started; the standby from ``pg_basebackup``, started
        and streaming (and, when synchronous, known as synchronous by the primary)."""
        self._run("initdb", "-D", str(self.primary), "--auth=trust", "--no-sync", "-U", "postgres")
        self._conf(
            self.primary,
            f"port = {self.port1}\nlisten_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{self.root}'\nfsync = off\nfull_page_writes = off\n"
            "shared_buffers = 32MB\nmax_connections = 200\nwal_level = replica\n"
            "max_wal_senders = 5\nwal_keep_size = 256MB\n"
            f"synchronous_standby_names = '{STANDBY_NAME if self.synchronous else ''}'\n",
        )
        self._ctl(self.primary, "start", "-w", "-t", "60")
        self._run(
            "pg_basebackup",
            *("-h", "127.0.0.1", "-p", str(self.port1), "-U", "postgres"),
            *("-D", str(self.standby), "-X", "stream", "--no-sync"),
        )
        (self.standby / "standby.signal").touch()
        self._conf(
            self.standby,
            f"port = {self.port2}\n"
            f"primary_conninfo = 'host=127.0.0.1 port={self.port1} user=postgres"
            f" application_name={STANDBY_NAME}'\n"
            # Once promoted it has no standby of its own: naming one would stall every commit.
            "synchronous_standby_names = ''\n" + self.standby_settings,
        )
        self._ctl(self.standby, "start", "-w", "-t", "60")
        self.wait_streaming()

    def wait_streaming(self, timeout_s: float = 30.0) -> None:
        """Until the primary sees the standby streaming (``sync`` when synchronous)."""
        import psycopg

        want = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + timeout_s
        while True:
            with psycopg.connect(self.primary_url, autocommit=True, connect_timeout=3) as conn:
                row = conn.execute(
                    "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = %s",
                    (STANDBY_NAME,),
                ).fetchone()
            if row is not None and row[0] == "streaming" and row[1] == want:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby is not streaming ({want}): {row}")
            time.sleep(0.1)

    # -- faults --------------------------------------------------------------------------
    def kill_primary(self) -> None:
        """A crash of the primary: every backend ends at once, no checkpoint."""
        self._ctl(self.primary, "stop", "-m", "immediate", "-w")

    def promote(self) -> None:
        """The standby becomes the primary (it takes writes when this returns)."""
        self._ctl(self.standby, "promote", "-w", "-t", "60")

    def stop_standby(self) -> None:
        self._ctl(self.standby, "stop", "-m", "fast", "-w")

    def start_standby(self) -> None:
        self._ctl(self.standby, "start", "-w", "-t", "60")

    def stop_primary(self) -> None:
        """A clean stop (``fast``): sessions ended, a shutdown checkpoint."""
        self._ctl(self.primary, "stop", "-m", "fast", "-w")

    def start_primary(self) -> None:
        self._ctl(self.primary, "start", "-w", "-t", "60")

    def replay_lag_bytes(self) -> int:
        """WAL the primary sent that the standby has not replayed yet (0 when caught up)."""
        import psycopg

        with psycopg.connect(self.primary_url, autocommit=True, connect_timeout=3) as conn:
            row = conn.execute(
                "SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), 0)"
                " FROM pg_stat_replication WHERE application_name = %s",
                (STANDBY_NAME,),
            ).fetchone()
        return int(row[0]) if row else -1

    def close(self) -> None:
        """Stop both servers (whatever state they are in) and remove their directories."""
        for datadir in (self.standby, self.primary):
            if (datadir / "postmaster.pid").exists():
                with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                    self._ctl(datadir, "stop", "-m", "immediate", "-w")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def replicated(*, synchronous: bool, standby_settings: str = "") -> Iterator[Replicated]:
    """A primary and a standby, both running; removed on exit, whatever happened."""
    pair = Replicated(synchronous=synchronous, standby_settings=standby_settings)
    try:
        pair.create()
        yield pair
    finally:
        pair.close()
