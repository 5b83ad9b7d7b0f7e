"""The expand/contract rule of the stores' migrations (spec 17 §17.4), once for both backends.

From a backend's ``RULE_FROM`` migration on, a migration only adds: tables, columns that are
nullable or have a default, indexes. What a release's code still reads is dropped or renamed
only by a later release, after the one that stopped using it; such a migration is listed in
the backend's ``CONTRACTIONS`` with the oldest schema version whose code no longer uses what
it drops (``tests/operate/test_c17_upgrade.py`` refuses any other).

So each schema version has a *floor*: the oldest schema version whose code can still use a
database at that version. A migration records its floor in ``threadloom_migrations``
(column ``compatible_down_to``, added by SQLite's migration 19 and PostgreSQL's 9), and a
store that finds a database newer than itself opens it when the newest migration's floor is
at most its own version, so a node of the previous release keeps working (and may restart)
while the new release has migrated the schema; otherwise it refuses with
:class:`SchemaTooNew`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from threadloom.errors import StoreError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Contraction:
    """A migration that drops or renames something (allowed by the rule only later)."""

    compatible_down_to: int
    """The oldest schema version whose code no longer uses what the migration drops."""
    what: str
    """What is dropped or renamed, and the release that stopped using it."""


class SchemaTooNew(StoreError):
    """The database was migrated by a newer Threadloom that this one cannot work with."""


def floor(version: int, baseline: int, contractions: Mapping[int, Contraction]) -> int:
    """The oldest schema version whose code can use a database at ``version``: the
    ``baseline`` (the last migration before the rule), raised by every contraction up to
    ``version``."""
    return max([baseline, *(c.compatible_down_to for v, c in contractions.items() if v <= version)])


def check_newer(newest: int, newest_floor: int | None, latest: int) -> None:
    """Refuse (``SchemaTooNew``) a database at ``newest`` > ``latest`` (this code's version)
    unless its floor is at most ``latest``; a floor of ``None`` (a migration of a release
    before the rule) is never compatible."""
    if newest <= latest:
        return
    if newest_floor is not None and newest_floor <= latest:
        logger.info(
            "database schema version %d is newer than this Threadloom (%d) and compatible down"
            " to %d: using it as it is (a rolling upgrade; upgrade this node soon)",
            newest,
            latest,
            newest_floor,
        )
        return
    needs = (
        f"it needs a Threadloom of schema version {newest_floor} or later"
        if newest_floor is not None
        else "it records no older version it stays compatible with"
    )
    raise SchemaTooNew(
        f"database schema version {newest} is newer than this Threadloom ({latest}) and {needs}:"
        " upgrade Threadloom"
    )


@dataclass(frozen=True)
class Plan:
    """What opening a store would change in its schema (``threadloom migrate --check``)."""

    backend: str
    current: int
    """The newest migration applied (0: none, a new database)."""
    latest: int
    """The newest migration this Threadloom knows."""
    pending: Sequence[tuple[int, str]]
    """The migrations a start would apply, by number and description, in order."""
    floor: int | None = None
    """The newest applied migration's floor, when the database is newer than this code."""

    @property
    def newer(self) -> bool:
        return self.current > self.latest
