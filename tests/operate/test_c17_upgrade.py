"""Upgrades (spec 17 §17.4): the expand/contract rule held over both backends' migrations,
the compatibility each migration records and a store's use of it, ``threadloom migrate
[--check]`` on both stores, and a rolling upgrade — a node of the previous release (a commit
named in ``previous_release.txt``, run from ``git archive``) serving turns on the migrated
PostgreSQL schema beside a node of this release."""

from __future__ import annotations

import io
import os
import re
import sqlite3
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from c17_content import THREADLOOM, cli, read_thread, spawn_project, start_node

from multinode.cluster_harness import Cluster, Node, spawn_node, stop_node, wait_healthy
from needs import cannot_run
from pg_support import create_schema, drop_schema, require_postgres, schema_url
from store_probe import StoreProbe
from threadloom import Agent, Definitions, Runtime, Side
from threadloom.define import Model, Prompt
from threadloom.providers.script import Reply
from threadloom.providers.scripted import ScriptedProvider
from threadloom.store.core.upgrades import Contraction
from threadloom.store.postgres import schema as pg_schema
from threadloom.store.sqlite import schema as sqlite_schema

ROOT = Path(__file__).resolve().parents[2]

# -- the expand/contract rule, read from the migrations' text ------------------------------

_REFUSED = [
    (re.compile(r"\bDROP\b", re.I), "DROP"),
    (re.compile(r"\bRENAME\b", re.I), "RENAME"),
    (re.compile(r"\bALTER\s+COLUMN\b", re.I), "ALTER COLUMN (type, NOT NULL, default)"),
    (re.compile(r"\bSET\s+(DATA\s+)?TYPE\b", re.I), "a new column type"),
    (re.compile(r"\bADD\s+CONSTRAINT\b", re.I), "a constraint on existing rows"),
    (re.compile(r"\bTRUNCATE\b|\bDELETE\s+FROM\b", re.I), "rows deleted"),
]


def contractions(sql: str) -> list[str]:
    """What in one migration's SQL takes away from (or narrows) what an older release uses:
    a DROP, RENAME, changed column, new constraint on existing rows, deleted rows, or a
    column added NOT NULL without a default (the older release's inserts would fail)."""
    found: list[str] = []
    for statement in sql.split(";"):
        text = " ".join(statement.split())
        if not text:
            continue
        for pattern, what in _REFUSED:
            if pattern.search(text):
                found.append(f"{what}: {text[:80]}")
        for added in re.split(r"\bADD\s+COLUMN\b", text, flags=re.I)[1:]:
            if re.search(r"\bNOT\s+NULL\b", added, re.I) and not re.search(
                r"\bDEFAULT\b", added, re.I
            ):
                found.append(f"a NOT NULL column without a default: {text[:80]}")
    return found


def test_c17_050_the_rule_refuses_what_older_releases_still_use() -> None:
    """C17-050 (the detector): a DROP, RENAME, column change, constraint, deletion or NOT
    NULL column without a default is caught; tables, defaulted or nullable columns and
    indexes are not."""
    bad = [
        "ALTER TABLE threads DROP COLUMN overlap",
        "DROP TABLE message_counts",
        "ALTER TABLE logs RENAME COLUMN kind TO sort",
        "ALTER TABLE threads RENAME TO conversations",
        "ALTER TABLE threads ALTER COLUMN tags TYPE jsonb",
        "ALTER TABLE threads ADD COLUMN owner TEXT NOT NULL",
        "ALTER TABLE threads ADD CONSTRAINT x CHECK (resumes < 9)",
        "DELETE FROM logs WHERE kind = 'app'",
        "DROP INDEX threads_user",
    ]
    good = [
        "CREATE TABLE later (id TEXT PRIMARY KEY, n INTEGER NOT NULL)",
        "ALTER TABLE threads ADD COLUMN archived_at INTEGER",
        "ALTER TABLE threads ADD COLUMN kept INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX threads_archived ON threads(archived_at) WHERE archived_at IS NOT NULL",
        "UPDATE threads SET kept = 1 WHERE terminated IS NOT NULL",
    ]
    assert all(contractions(sql) for sql in bad), [s for s in bad if not contractions(s)]
    assert [sql for sql in good if contractions(sql)] == []


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_c17_050_migrations_after_the_baseline_only_add(backend: str) -> None:
    """C17-050: every migration after the backend's baseline only adds (tables, nullable
    or defaulted columns, indexes), or is in the backend's ``CONTRACTIONS`` allow-list
    naming the release that stopped using what it drops, whose compatibility it records.
    SQLite's migrations done in Python or rebuilding a table count as contractions."""
    module: Any = sqlite_schema if backend == "sqlite" else pg_schema
    allowed: dict[int, Contraction] = module.CONTRACTIONS
    later = [(v, sql) for v, _, sql in module.MIGRATIONS if v > module.BASELINE]
    assert later, "the migration that records compatibility comes after the baseline"
    problems: dict[int, list[str]] = {}
    for version, sql in later:
        found = contractions(sql)
        if backend == "sqlite":
            if version in sqlite_schema._STEPS:
                found.append("a migration done in Python")
            if version in sqlite_schema._REBUILDS:
                found.append("a table rebuilt")
        if found and version not in allowed:
            problems[version] = found
    assert problems == {}, (
        "these migrations drop or change what the previous release may still use; add only,"
        " and drop in a later release listed in CONTRACTIONS (spec 17 §17.4)"
    )
    for version, contraction in allowed.items():
        assert version > module.BASELINE and contraction.what.strip()
        assert module.BASELINE <= contraction.compatible_down_to < version
        assert module.floor_of(version) >= contraction.compatible_down_to


# -- a newer schema: used when it says it is compatible, refused otherwise ------------------


def _defs() -> Definitions:
    provider = ScriptedProvider(lambda request: Reply.text("answered"))
    return Definitions().add(
        Model(name="M", provider=provider, model="scripted-1"),
        Prompt(name="P", model="M", system="Answer."),
        Agent(name="chat", side_a=Side(prompt="P"), side_b=Side(label="User")),
    )


def _later_release(db_url: str, floor: int | None) -> int:
    """The schema as the next release would leave it: one more migration that adds a
    column and a table and records ``floor`` (``None``: records none); its number."""
    module: Any = sqlite_schema if not db_url.startswith("postgresql") else pg_schema
    version = int(module.LATEST_VERSION) + 1
    _execute(db_url, "ALTER TABLE threads ADD COLUMN later_release_note TEXT")
    _execute(db_url, "CREATE TABLE later_release_things (id TEXT PRIMARY KEY, note TEXT NOT NULL)")
    if db_url.startswith("postgresql"):
        record = (
            "INSERT INTO threadloom_migrations(version, name, compatible_down_to)"
            " VALUES (?, 'the next release', ?)"
        )
    else:
        record = (
            "INSERT INTO threadloom_migrations(version, name, applied_at, compatible_down_to)"
            " VALUES (?, 'the next release', 0, ?)"
        )
    _execute(db_url, record, version, floor)
    return version


def _sqlite_execute(db_url: str, sql: str, params: tuple[Any, ...]) -> None:
    from threadloom.store.sqlite.store import path_from_url

    with sqlite3.connect(path_from_url(db_url)) as conn:
        conn.execute(sql, params)


def _pg_execute(db_url: str, sql: str, params: tuple[Any, ...]) -> None:
    import psycopg

    from threadloom.store.postgres.dialect import translate

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(translate(sql), params)


async def test_c17_051_a_store_uses_a_newer_schema_that_stays_compatible(db_url: str) -> None:
    """C17-051: each migration from the compatibility migration on records the oldest
    schema version whose code can use the database; a Runtime of this release opens a
    schema a later release migrated when its newest migration is compatible down to this
    release's version, and runs turns on it; one that is not (or records nothing) is
    refused, naming both versions."""
    runtime = await Runtime.open(db_url, definitions=_defs())
    await runtime.close()
    module: Any = sqlite_schema if not db_url.startswith("postgresql") else pg_schema
    probe = StoreProbe(db_url)
    recorded = probe.rows(
        "SELECT version, compatible_down_to FROM threadloom_migrations"
        " WHERE compatible_down_to IS NOT NULL ORDER BY version"
    )
    floors = [(v, module.floor_of(v)) for v, _, _ in module.MIGRATIONS if v >= module.FLOOR_FROM]
    # every migration since the rule: the baseline's floor, raised by each listed contraction
    assert recorded == floors

    newer = _later_release(db_url, module.BASELINE)
    runtime = await Runtime.open(db_url, definitions=_defs())
    try:
        state = await runtime.create_thread("chat")
        await runtime.send_message(state.thread_id, "on a newer schema")
        await runtime.wait_idle(state.thread_id, timeout=10)
        page = await state.get_messages(order="asc")
        texts = [m.content for m in page.messages]
        assert texts == ["on a newer schema", "answered"]
    finally:
        await runtime.close()

    table = "threadloom_migrations"
    for floor in (newer, None):
        _execute(
            db_url, f"UPDATE {table} SET compatible_down_to = ? WHERE version = ?", floor, newer
        )
        with pytest.raises(Exception) as refused:
            await Runtime.open(db_url, definitions=_defs())
        said = str(refused.value)
        assert f"database schema version {newer} is newer than this Threadloom" in said
        assert f"({module.LATEST_VERSION})" in said


def _execute(db_url: str, sql: str, *params: Any) -> None:
    if db_url.startswith("postgresql"):
        _pg_execute(db_url, sql, params)
    else:
        _sqlite_execute(db_url, sql, params)


# -- threadloom migrate [--check] ----------------------------------------------------------


def threadloom(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*THREADLOOM, *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_c17_052_migrate_check_lists_what_a_start_would_apply(db_url: str) -> None:
    """C17-052: ``threadloom migrate --check`` lists the pending migrations by number and
    description and exits 3, changing nothing; ``threadloom migrate`` applies them; then
    ``--check`` says the schema is up to date and exits 0. A schema one migration behind
    (the previous release's) lists that migration; a newer schema this release cannot use
    exits 2, one it can use exits 0."""
    module: Any = sqlite_schema if not db_url.startswith("postgresql") else pg_schema
    fresh = cli("migrate", "--check", "--db", db_url)
    assert fresh.returncode == 3, fresh.stderr
    assert "a new database; a start would apply" in fresh.stdout
    for version, name, _ in module.MIGRATIONS:
        assert re.search(rf"^\s+{version}\s+{re.escape(name)}$", fresh.stdout, re.M)
    probe = StoreProbe(db_url)
    if probe.backend == "sqlite":
        from threadloom.store.sqlite.store import path_from_url

        assert not Path(path_from_url(db_url)).exists(), "--check created nothing"
    else:
        assert probe.rows("SELECT to_regclass('threadloom_migrations') IS NULL") == [(True,)]

    applied = cli("migrate", "--db", db_url)
    assert applied.returncode == 0, applied.stderr
    assert f"schema version {module.LATEST_VERSION}" in applied.stdout
    again = cli("migrate", "--check", "--db", db_url)
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout

    # one behind: the schema before the newest migration (the compatibility migration, or
    # an additive one after it, whose statements may run again)
    last = module.LATEST_VERSION
    _execute(db_url, "DELETE FROM threadloom_migrations WHERE version = ?", last)
    if last == module.FLOOR_FROM:
        _execute(db_url, "ALTER TABLE threadloom_migrations DROP COLUMN compatible_down_to")
    behind = cli("migrate", "--check", "--db", db_url)
    assert behind.returncode == 3
    listed = [line.split(None, 1) for line in behind.stdout.splitlines() if line.startswith("  ")]
    assert listed == [[str(last), dict((v, n) for v, n, _ in module.MIGRATIONS)[last]]]
    assert cli("migrate", "--db", db_url).returncode == 0

    newer = _later_release(db_url, module.BASELINE)
    compatible = cli("migrate", "--check", "--db", db_url)
    assert compatible.returncode == 0, compatible.stderr
    assert f"schema version {newer}, newer than this Threadloom" in compatible.stdout
    _execute(
        db_url,
        "UPDATE threadloom_migrations SET compatible_down_to = ? WHERE version = ?",
        newer,
        newer,
    )
    refused = cli("migrate", "--check", "--db", db_url)
    assert refused.returncode == 2
    assert f"needs a Threadloom of schema version {newer} or later" in refused.stderr


@pytest.mark.sqlite_only
def test_c17_052_migrate_refuses_an_sqlite_file_a_server_runs(tmp_path: Path) -> None:
    """C17-052 (SQLite): ``threadloom migrate`` takes the file's process lock, so it is
    refused (exit 2, naming the holder) while a server runs the file."""
    db = tmp_path / "served.db"
    conn = sqlite3.connect(db, isolation_level=None)
    sqlite_schema.migrate(conn, upto=17)
    conn.close()
    from threadloom.store.sqlite.process_lock import ProcessLock

    held = ProcessLock.acquire(str(db))
    try:
        refused = cli("migrate", "--db", str(db))
    finally:
        held.release()
    assert refused.returncode == 2 and "in use by another Threadloom process" in refused.stderr
    check = cli("migrate", "--check", "--db", str(db))
    assert check.returncode == 3
    assert [line.split()[0] for line in check.stdout.splitlines() if line.startswith("  ")] == [
        str(v) for v, _, _ in sqlite_schema.MIGRATIONS if v > 17
    ]


# -- a rolling upgrade: the previous release beside this one ---------------------------------


def previous_release() -> str:
    """The commit of ``previous_release.txt``, present in this clone (else the test cannot
    run: a shallow clone lacks it)."""
    text = (Path(__file__).parent / "previous_release.txt").read_text()
    (rev,) = [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]
    found = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}^{{commit}}"], capture_output=True
    )
    if found.returncode != 0:
        cannot_run(
            f"commit {rev} (previous_release.txt) is not in this checkout: a shallow clone,"
            " or no git history? (git fetch --unshallow)",
            "the rolling-upgrade test",
        )
    return rev


def extract(rev: str, into: Path) -> Path:
    """``src/`` and the multinode tests' project of ``rev`` (``git archive``) under
    ``into``; ``src`` is the folder to put on PYTHONPATH."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src", "tests/multinode/project"],
        capture_output=True,
        check=True,
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _old_python(src: Path, code: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADLOOM_")}
    env["PYTHONPATH"] = str(src)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _turn(cluster: Cluster, node: Node, thread: str, text: str) -> None:
    cluster.send(node, thread, text)
    cluster.wait_for(
        lambda: (
            any(m.get("content") == f"echo: {text}" for m in cluster.messages(node, thread))
            and cluster.status(node, thread)[0] == "idle"
        ),
        30,
        f"the turn {text!r} answered",
    )


@pytest.mark.postgres_only
def test_c17_053_a_node_of_the_previous_release_works_on_the_migrated_schema(
    tmp_path: Path,
) -> None:
    """C17-053: a rolling upgrade on PostgreSQL. A node of the previous release (its
    ``src/`` from ``git archive``, imported instead of the editable install) serves a
    schema it created; ``threadloom migrate`` of this release migrates the schema under it;
    a node of this release starts beside it; both run turns — each on threads the other
    made — and read each other's threads identically. The previous release, restarted,
    refuses the newer schema (it predates the compatibility record)."""
    require_postgres()
    rev = previous_release()
    old_src = extract(rev, tmp_path / "previous")
    old_project = tmp_path / "previous" / "tests" / "multinode" / "project"
    where = _old_python(old_src, "import threadloom; print(threadloom.__file__)")
    assert where == str(old_src / "threadloom" / "__init__.py"), where
    old_latest = int(
        _old_python(
            old_src,
            "from threadloom.store.postgres.schema import LATEST_VERSION; print(LATEST_VERSION)",
        )
    )
    assert old_latest < pg_schema.LATEST_VERSION
    old_env = {"PYTHONPATH": str(old_src)}

    name = f"tl_{uuid.uuid4().hex[:16]}"
    create_schema(name)
    url = schema_url(name)
    nodes: list[Node] = []
    try:
        cluster, old = start_node(url, tmp_path / "nodes", "c17-old", old_project, **old_env)
        nodes.append(old)
        probe = StoreProbe(url)
        assert probe.rows("SELECT max(version) FROM threadloom_migrations") == [(old_latest,)]
        before = cluster.create_thread(old, "echo")
        _turn(cluster, old, before, "before the upgrade")

        check = threadloom("migrate", "--check", "--db", url)
        assert check.returncode == 3, check.stderr
        pending = [int(line.split()[0]) for line in check.stdout.splitlines() if line[:2] == "  "]
        assert pending == [v for v, _, _ in pg_schema.MIGRATIONS if v > old_latest]
        migrated = threadloom("migrate", "--db", url)
        assert migrated.returncode == 0, migrated.stderr
        assert probe.rows("SELECT max(version) FROM threadloom_migrations") == [
            (pg_schema.LATEST_VERSION,)
        ]

        new = spawn_node(cluster, "c17-new", tmp_path / "nodes" / "c17-new.log")
        nodes.append(new)
        wait_healthy(new)
        assert old.get("/api/health").status_code == 200

        by_old = cluster.create_thread(old, "echo")
        by_new = cluster.create_thread(new, "echo")
        _turn(cluster, old, by_old, "old on its own thread")
        _turn(cluster, new, by_new, "new on its own thread")
        _turn(cluster, old, by_new, "old on the new node's thread")
        _turn(cluster, new, by_old, "new on the old node's thread")
        _turn(cluster, new, before, "new on a thread from before the upgrade")
        slow = cluster.create_thread(old, "slow")  # a tool call and its logs, by the old node
        cluster.send(old, slow, "a report")
        cluster.wait_for(lambda: cluster.status(old, slow) == ("idle", "stop_on_response"), 30)
        for thread in (before, by_old, by_new, slow):
            both = ("thread", "messages", "logs", "files", "cost", "subagents")
            seen_old, seen_new = read_thread(old, thread, both), read_thread(new, thread, both)
            assert seen_old["messages"] == seen_new["messages"]
            assert seen_old["log_details"] == seen_new["log_details"]
            assert seen_old["files"] == seen_new["files"]
            assert seen_old["thread"]["status"] == seen_new["thread"]["status"]
        assert [m["content"] for m in cluster.messages(new, before)] == [
            "before the upgrade",
            "echo: before the upgrade",
            "new on a thread from before the upgrade",
            "echo: new on a thread from before the upgrade",
        ]

        stop_node(old)
        again = spawn_project(
            cluster, old_project, "c17-old-again", tmp_path / "nodes" / "again.log", **old_env
        )
        nodes.append(again)
        assert again.proc.wait(timeout=60) == 2
        assert f"is newer than this Threadloom ({old_latest})" in again.output()
    finally:
        for node in nodes:
            stop_node(node)
        drop_schema(name)
