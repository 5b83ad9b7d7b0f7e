"""Applying the SQLite store's numbered migrations (``migrations.py``); the applied versions
are recorded in a table, each with the oldest schema version whose code can still use the
database after it (the expand/contract rule, ``store/core/upgrades.py``, spec 17 §17.4).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from threadloom.store.core.upgrades import Contraction, Plan, check_newer, floor
from threadloom.store.sqlite.migrations import MIGRATIONS as MIGRATIONS
from threadloom.store.sqlite.schema_checks import checks_as_comparisons

# Migrations done in Python instead of SQL text, inside the migration's transaction.
_STEPS: dict[int, Callable[[sqlite3.Connection], None]] = {9: checks_as_comparisons}

# Migrations that rebuild a table other tables reference: applied with foreign keys off
# (a DROP TABLE would otherwise cascade), then checked with foreign_key_check.
_REBUILDS: dict[int, tuple[str, ...]] = {8: ("tool_calls", "logs")}

LATEST_VERSION = MIGRATIONS[-1][0]

BASELINE = 18
"""The last migration written before the expand/contract rule (spec 17 §17.4): the rule
holds for every migration after it, and no schema claims compatibility further back."""
RULE_FROM = BASELINE + 1
FLOOR_FROM = 19
"""The migration that added ``threadloom_migrations.compatible_down_to``: it and every later
one record their floor."""

CONTRACTIONS: dict[int, Contraction] = {
    # The allow-list of the expand/contract rule: a migration after BASELINE that drops,
    # renames or retypes something, with the oldest schema version whose code no longer
    # uses it and the release that stopped using it, e.g.
    #   25: Contraction(23, "DROP COLUMN threads.overlap: unused since the release of 23"),
    27: Contraction(
        BASELINE,
        "DROP TRIGGER messages_fts_insert/_delete/_update (migration 26), replaced by the"
        " backlog's triggers: no statement of any release names them, so the code of every"
        " release since the rule keeps working on the database (its message writes go to"
        " the backlog, indexed by a release of 27); a release of 26's searches do not see"
        " the messages stored after the index last caught up until a release of 27"
        " searches or runs its pass",
    ),
}


def floor_of(version: int) -> int:
    """The oldest schema version whose code can use a database at ``version``."""
    return floor(version, BASELINE, CONTRACTIONS)


def _recorded_floor(conn: sqlite3.Connection, version: int) -> int | None:
    """The floor the database records for migration ``version`` (``None``: not recorded,
    a migration of a release before the rule)."""
    try:
        row = conn.execute(
            "SELECT compatible_down_to FROM threadloom_migrations WHERE version = ?", (version,)
        ).fetchone()
    except sqlite3.OperationalError:  # no such column: a schema before migration 19
        return None
    return None if row is None or row[0] is None else int(row[0])


def plan(conn: sqlite3.Connection) -> Plan:
    """What :func:`migrate` would apply to ``conn``'s database, changing nothing;
    ``SchemaTooNew`` for a newer schema this code cannot use."""
    known = conn.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'threadloom_migrations'"
    ).fetchone()
    done = (
        {row[0] for row in conn.execute("SELECT version FROM threadloom_migrations")}
        if known
        else set()
    )
    current = max(done, default=0)
    recorded = _recorded_floor(conn, current) if current > LATEST_VERSION else None
    check_newer(current, recorded, LATEST_VERSION)
    pending = [(v, name) for v, name, _ in MIGRATIONS if v not in done and v > current]
    return Plan("sqlite", current, LATEST_VERSION, pending, recorded)


def statements(sql: str) -> list[str]:
    """The statements of a migration's text, split at each ``;`` that ends one
    (``sqlite3.complete_statement``): a trigger's body, whose statements end in ``;`` too,
    stays whole."""
    out: list[str] = []
    pending = ""
    for piece in sql.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\n;"):
                out.append(pending)
            pending = ""
    if pending.strip(" \t\n;"):
        out.append(pending)  # not complete: executed, so its error is the migration's
    return out


def applied_versions(conn: sqlite3.Connection) -> set[int]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS threadloom_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
    )
    return {row[0] for row in conn.execute("SELECT version FROM threadloom_migrations")}


def migrate(conn: sqlite3.Connection, upto: int = LATEST_VERSION) -> int:
    """Apply every migration not yet recorded, up to version ``upto`` (tests build older
    databases with it), each in its own transaction; returns the schema version. A
    database newer than this code is used as it is when its newest migration stays
    compatible with this version, else refused (``SchemaTooNew``)."""
    done = applied_versions(conn)
    newest = max(done, default=0)
    if newest > LATEST_VERSION:
        check_newer(newest, _recorded_floor(conn, newest), LATEST_VERSION)
        return newest
    for version, name, sql in MIGRATIONS:
        if version in done or version > upto:
            continue
        checked = _REBUILDS.get(version)
        keys_on = conn.execute("PRAGMA foreign_keys").fetchone()[0]
        if checked is not None:  # only outside a transaction
            conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in statements(sql):
                conn.execute(statement)
            if version in _STEPS:
                _STEPS[version](conn)
            for table in checked or ():
                broken = conn.execute(f"PRAGMA foreign_key_check({table})").fetchone()
                if broken is not None:
                    raise RuntimeError(f"migration {version} broke a reference: {broken}")
            conn.execute(
                "INSERT INTO threadloom_migrations(version, name, applied_at) VALUES (?,?,?)",
                (version, name, time.time_ns() // 1000),
            )
            if version >= FLOOR_FROM:
                conn.execute(
                    "UPDATE threadloom_migrations SET compatible_down_to = ? WHERE version = ?",
                    (floor_of(version), version),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        finally:
            if checked is not None:
                conn.execute(f"PRAGMA foreign_keys = {'ON' if keys_on else 'OFF'}")
    return max(applied_versions(conn))
