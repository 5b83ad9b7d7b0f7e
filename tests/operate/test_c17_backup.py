"""Backup and restore (spec 17 §17.3): ``threadloom backup`` / ``threadloom restore`` of an
SQLite store while a real ``threadloom serve`` runs turns, and the documented ``pg_dump`` /
``pg_restore`` commands of a PostgreSQL store; the restored store served again and every
thread read back over the API identical."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from c17_content import (
    THREADLOOM,
    all_threads,
    cli,
    make_content,
    read_thread,
    snapshot,
    start_node,
)

from multinode.cluster_harness import stop_node
from needs import cannot_run
from pg_support import PG_URL, create_schema, drop_schema, require_postgres, schema_url
from threadloom.errors import StoreError
from threadloom.store.sqlite import backup as sqlite_backup
from threadloom.store.sqlite import schema


def threadloom(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*THREADLOOM, *args], capture_output=True, text=True, timeout=120)


class Load:
    """Turns on new ``echo`` threads, one after another, while it runs."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.turns = 0
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=20) as client:
            while not self.stopping.is_set():
                made = client.post("/api/threads", json={"agent_id": "echo"})
                if made.status_code != 200:
                    self.errors.append(made.text)
                    return
                thread = made.json()["threadId"]
                for n in range(3):
                    sent = client.post(
                        f"/api/threads/{thread}/messages", json={"content": f"load {n}"}
                    )
                    if sent.status_code not in (200, 202):
                        self.errors.append(sent.text)
                        return
                    self.turns += 1

    def __enter__(self) -> Load:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(timeout=30)


def consistent(db: Path) -> list[str]:
    """Cross-table invariants every write transaction keeps: each thread's count of visible
    top-level messages, and its message numbering (no seq above the thread's counter)."""
    conn = sqlite3.connect(db)
    try:
        return [
            f"thread {tid}: {count} counted, {real} stored, seq {top} > {seq}"
            for tid, count, real, top, seq in conn.execute(
                "SELECT t.id, t.top_visible_count,"
                " (SELECT count(*) FROM messages m WHERE m.thread_id = t.id"
                "  AND m.depth = 0 AND m.silent = 0),"
                " (SELECT coalesce(max(seq), 0) FROM messages m WHERE m.thread_id = t.id),"
                " t.msg_seq FROM threads t"
            )
            if count != real or top > seq
        ]
    finally:
        conn.close()


@pytest.mark.sqlite_only
def test_c17_040_c17_042_backup_while_serving_restore_refused_there_then_all_read_back(
    tmp_path: Path,
) -> None:
    """C17-040, C17-042: ``threadloom backup`` of a store a server is writing (turns running
    throughout) is consistent and intact; ``threadloom restore`` refuses the file while that
    server holds it, restores it to a new path, and a server on the restored file answers
    every thread — thread, message pages, logs, files, state, cost, children, approvals —
    identical to what the first server answered before the backup."""
    db = tmp_path / "live.db"
    cluster, node = start_node(f"sqlite:///{db}", tmp_path / "a", "c17-a")
    try:
        make_content(cluster, node, big_file_bytes=8 * 1024 * 1024)  # ~2,200 pages: 3 steps
        before = snapshot(node)
        with Load(node.base) as load:
            cluster.wait_for(lambda: load.turns >= 3, 30, "turns under way")
            at_start = load.turns
            made = threadloom("backup", "--db", str(db), str(tmp_path / "copy.db"))
            during = load.turns - at_start
        refused = threadloom("restore", str(tmp_path / "copy.db"), "--db", str(db))
        assert load.errors == []
        assert made.returncode == 0, made.stderr
        assert "integrity ok" in made.stdout
        assert during > 0, "the server answered turns while the backup ran"
        assert refused.returncode == 2
        assert "in use by another Threadloom process" in refused.stderr
        assert f"pid {node.proc.pid}" in refused.stderr
    finally:
        stop_node(node)
    copy = tmp_path / "copy.db"
    assert consistent(copy) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".copy.db")] == []

    restored = tmp_path / "restored.db"
    done = threadloom("restore", str(copy), "--db", str(restored))
    assert done.returncode == 0, done.stderr
    print(made.stdout, done.stdout, sep="")
    cluster, node = start_node(f"sqlite:///{restored}", tmp_path / "b", "c17-b")
    try:
        listed = all_threads(node)
        after = {thread: read_thread(node, thread) for thread in before}
        for thread in set(listed) - set(before):  # the load's: readable, none left pending
            pages = read_thread(node, thread, ("messages",))["messages"]
            first = [m["content"] for m in pages[0]["messages"][:1]]
            assert first in ([], ["load 0"])  # made, perhaps not sent to yet at the snapshot
            assert {m["status"] for p in pages for m in p["messages"]} <= {"completed", "failed"}
    finally:
        stop_node(node)
    assert set(before) < set(listed)
    for thread, seen in before.items():
        assert after[thread] == seen, f"thread {thread} reads back differently"
    print(
        f"restore check: {len(before)} threads read back identical over the API"
        f" ({sum(len(p['messages']) for s in before.values() for p in s['messages'])} messages,"
        f" {sum(len(s['log_details']) for s in before.values())} log rows,"
        f" {sum(len(s['files']) - 1 for s in before.values())} files);"
        f" {len(listed) - len(before)} more threads made by the load during the backup"
    )


def _store_file(tmp_path: Path, name: str = "s.db", upto: int = schema.LATEST_VERSION) -> Path:
    path = tmp_path / name
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        schema.migrate(conn, upto=upto)
    finally:
        conn.close()
    return path


def test_c17_041_backup_of_postgresql_points_to_pg_dump(tmp_path: Path) -> None:
    """C17-041: ``threadloom backup`` of a PostgreSQL URL copies nothing and prints the
    ``pg_dump`` command for the URL's schema (the password left out); exit code 2."""
    url = "postgresql://app:secret@db.internal:5432/app?options=-csearch_path%3Dtl_live"
    done = cli("backup", "--db", url, str(tmp_path / "x.dump"))
    assert done.returncode == 2
    assert "pg_dump --format=custom --schema=tl_live" in done.stderr
    assert "pg_restore" in done.stderr and "secret" not in done.stderr
    assert not (tmp_path / "x.dump").exists()
    back = cli("restore", str(tmp_path / "x.dump"), "--db", url)
    assert back.returncode == 2 and "pg_restore" in back.stderr


def test_c17_040_the_copy_is_the_snapshot_its_first_step_read(tmp_path: Path) -> None:
    """C17-040 (the snapshot): another connection commits between every two steps of the
    backup; the backup neither starts over (pages done only grow) nor takes those commits
    in: the copy holds the rows there were when it began."""
    source = _store_file(tmp_path)
    conn = sqlite3.connect(source, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE filler(n INTEGER PRIMARY KEY, b BLOB)")
    conn.execute("BEGIN")
    for _ in range(500):
        conn.execute("INSERT INTO filler(b) VALUES (randomblob(4000))")
    conn.execute("COMMIT")
    steps: list[int] = []

    def write_between(done: int, total: int) -> None:
        steps.append(done)
        conn.execute("INSERT INTO filler(b) VALUES (randomblob(4000))")  # its own commit

    sqlite_backup.backup(source, tmp_path / "copy.db", progress=write_between, step_pages=50)
    assert len(steps) >= 10 and steps == sorted(steps)
    assert conn.execute("SELECT count(*) FROM filler").fetchone()[0] == 500 + len(steps)
    conn.close()
    with sqlite3.connect(tmp_path / "copy.db") as copy:
        assert copy.execute("SELECT count(*), max(n) FROM filler").fetchone() == (500, 500)


def test_c17_043_restore_checks_the_backup_first(tmp_path: Path) -> None:
    """C17-043: a backup that fails SQLite's integrity check, a file that is no Threadloom
    store, and a backup of a newer schema this release cannot use are refused before
    anything is written; a newer schema that records compatibility with this release is
    restored."""
    target = tmp_path / "target.db"
    good = _store_file(tmp_path)

    broken = tmp_path / "broken.db"
    data = bytearray(good.read_bytes())
    page = 4096
    data[page * 3 : page * 3 + 512] = b"\xff" * 512  # a b-tree page of some table torn
    broken.write_bytes(bytes(data))
    stranger = tmp_path / "stranger.db"
    conn = sqlite3.connect(stranger)
    conn.execute("CREATE TABLE t(x)")
    conn.commit()
    conn.close()
    newer = tmp_path / "newer.db"
    shutil.copy(good, newer)
    compatible = tmp_path / "compatible.db"
    shutil.copy(good, compatible)
    for path, floor in ((newer, schema.LATEST_VERSION + 1), (compatible, schema.BASELINE)):
        conn = sqlite3.connect(path)
        conn.execute(
            "INSERT INTO threadloom_migrations(version, name, applied_at, compatible_down_to)"
            " VALUES (?, 'a later release', 0, ?)",
            (schema.LATEST_VERSION + 1, floor),
        )
        conn.commit()
        conn.close()

    expected = {
        broken: "integrity check",
        stranger: "not a Threadloom SQLite store",
        newer: f"is newer than this Threadloom ({schema.LATEST_VERSION})",
    }
    for backup, why in expected.items():
        done = cli("restore", str(backup), "--db", str(target))
        assert done.returncode == 2, (backup, done.stdout)
        assert why in done.stderr, done.stderr
        assert not target.exists()
    done = cli("restore", str(compatible), "--db", str(target))
    assert done.returncode == 0, done.stderr
    assert f"schema version {schema.LATEST_VERSION + 1}" in done.stdout


def test_c17_044_backup_is_written_atomically(tmp_path: Path) -> None:
    """C17-044: the backup goes to a temporary file beside OUT and is renamed once checked:
    an OUT that exists is refused (``--replace`` overwrites it), a failed backup leaves no
    OUT and no temporary file, and the copy is one self-contained file (no WAL)."""
    source = _store_file(tmp_path)
    out = tmp_path / "out.db"
    out.write_bytes(b"an older backup")
    refused = cli("backup", "--db", str(source), str(out))
    assert refused.returncode == 2 and "--replace" in refused.stderr
    assert out.read_bytes() == b"an older backup"
    done = cli("backup", "--db", str(source), str(out), "--replace")
    assert done.returncode == 0, done.stderr
    conn = sqlite3.connect(out)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()

    stranger = tmp_path / "stranger.db"
    sqlite3.connect(stranger).close()
    failed = cli("backup", "--db", str(stranger), str(tmp_path / "none.db"))
    assert failed.returncode == 2 and "not a Threadloom SQLite store" in failed.stderr
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == ["out.db", "s.db", "stranger.db"], leftovers


def test_c17_045_restore_keeps_the_database_it_replaces(tmp_path: Path) -> None:
    """C17-045: restoring over an existing store keeps that store beside it
    (``<file>.before-restore-<UTC time>``), its WAL checkpointed into it: nothing is lost."""
    old = _store_file(tmp_path, "live.db")
    conn = sqlite3.connect(old, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("INSERT INTO user_quotas(user_id, quota, updated_at_us) VALUES ('u', '{}', 1)")
    conn.close()
    backup = _store_file(tmp_path, "backup.db")
    done = cli("restore", str(backup), "--db", str(old))
    assert done.returncode == 0, done.stderr
    (kept,) = [p for p in tmp_path.iterdir() if ".before-restore-" in p.name]
    assert str(kept) in done.stdout
    with sqlite3.connect(kept) as conn:
        assert conn.execute("SELECT user_id FROM user_quotas").fetchall() == [("u",)]
    with sqlite3.connect(old) as conn:
        assert conn.execute("SELECT user_id FROM user_quotas").fetchall() == []


def test_c17_047_backup_reports_its_progress_in_pages(tmp_path: Path) -> None:
    """C17-047: the backup copies in steps and reports (pages done, pages in all) after
    each, the last equal to the total (the command shows it as a bar on a terminal)."""
    source = _store_file(tmp_path)
    conn = sqlite3.connect(source)
    conn.execute("CREATE TABLE filler(b BLOB)")
    conn.executemany("INSERT INTO filler VALUES (randomblob(4000))", [()] * 300)
    conn.commit()
    conn.close()
    seen: list[tuple[int, int]] = []
    copied = sqlite_backup.backup(
        source, tmp_path / "out.db", progress=lambda d, t: seen.append((d, t)), step_pages=64
    )
    assert len(seen) >= 5
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert seen[-1] == (copied.pages, copied.pages)
    with pytest.raises(StoreError, match="exists"):
        sqlite_backup.backup(source, tmp_path / "out.db")


def _pg_tools() -> tuple[str, str]:
    dump, restore = shutil.which("pg_dump"), shutil.which("pg_restore")
    if dump is None or restore is None:
        cannot_run("pg_dump and pg_restore are needed (postgresql-client)", "the pg_dump test")
    assert dump is not None and restore is not None
    return dump, restore


@pytest.mark.postgres_only
def test_c17_046_pg_dump_and_pg_restore_as_documented(tmp_path: Path) -> None:
    """C17-046: the documented commands — ``pg_dump --format=custom --schema=<schema>`` of a
    served store, the schema lost (dropped), ``pg_restore`` of the dump — give a store that a
    server serves again with every thread read back identical over the API."""
    require_postgres()
    dump, restore = _pg_tools()
    name = f"tl_{uuid.uuid4().hex[:16]}"
    create_schema(name)
    url = schema_url(name)
    try:
        cluster, node = start_node(url, tmp_path / "a", "c17-pg-a")
        try:
            make_content(cluster, node)
            before = snapshot(node)
        finally:
            stop_node(node)
        out = tmp_path / "store.dump"
        dumped = subprocess.run(
            [dump, "--format=custom", f"--schema={name}", f"--file={out}", PG_URL],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert dumped.returncode == 0, dumped.stderr
        drop_schema(name)  # the loss
        restored = subprocess.run(
            [restore, f"--dbname={PG_URL}", str(out)], capture_output=True, text=True, timeout=120
        )
        assert restored.returncode == 0, restored.stderr
        cluster, node = start_node(url, tmp_path / "b", "c17-pg-b")
        try:
            after: dict[str, Any] = snapshot(node)
        finally:
            stop_node(node)
        assert after == before
        print(f"pg_restore check: {len(before)} threads read back identical over the API")
    finally:
        drop_schema(name)


def _on_a_terminal(*args: str) -> tuple[int, str, str]:
    """``threadloom ARGS`` with its stderr on a pseudo-terminal: (exit code, stdout, what
    the terminal received)."""
    import os
    import pty
    import select

    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    proc = subprocess.Popen([*THREADLOOM, *args], stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.stdout is not None
    return proc.wait(timeout=60), proc.stdout.read().decode(), seen.decode(errors="replace")


def test_c17_047_the_command_shows_pages_on_a_terminal_only(tmp_path: Path) -> None:
    """C17-047: on a terminal ``threadloom backup`` shows pages copied of pages in all (a
    Rich bar on stderr) and ends with its summary line; piped, it prints the line alone."""
    source = _store_file(tmp_path)
    conn = sqlite3.connect(source)
    conn.execute("CREATE TABLE filler(b BLOB)")
    conn.executemany("INSERT INTO filler VALUES (randomblob(4000))", [()] * 3000)
    conn.commit()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    code, stdout, terminal = _on_a_terminal("backup", "--db", str(source), str(tmp_path / "t.db"))
    assert code == 0, terminal
    assert f"{pages}/{pages}" in terminal and "pages" in terminal and "backing up" in terminal
    assert f"{pages} pages" in stdout
    piped = cli("backup", "--db", str(source), str(tmp_path / "p.db"))
    assert piped.returncode == 0 and piped.stderr == ""
    assert piped.stdout.startswith("backed up ")
