"""Migrating a database as a user asks it: the plan (which revisions run, in which direction),
a backup first, the migration in one transaction, and the backup removed again when nothing
changed. ``migrate.py`` runs revisions; this decides which and keeps the copy.

The ``migrate`` command parses its options into ``plan`` and prints what ``run`` returns;
any program can do the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from . import migrate
from .database import Location, backup, revision_of
from .errors import (
    MigrationFailed,
    NoDatabase,
    NothingToMigrate,
    SchemaTooNew,
    StorageFault,
    UnknownRevision,
    WrongDirection,
)

BASE = "base"  # the revision before the first: a downgrade to it removes every table

__all__ = ["BASE", "Done", "MigrationFailed", "NoDatabase", "NothingToMigrate", "Plan", "UnknownRevision",
           "WrongDirection", "plan", "run"]


@dataclass(frozen=True)
class Plan:
    """What a migration of ``location`` will do: from ``current`` to ``target`` through
    ``steps`` (in the order they run; none: nothing to do)."""

    location: Location
    current: str
    target: str
    direction: Literal["upgrade", "downgrade"]
    steps: tuple[str, ...]

    @property
    def label(self) -> str:
        return self.location.label

    def descriptions(self) -> dict[str, str]:
        """Each step's one-line description, from its script (none when the scripts cannot be
        read: descriptions are a nicety, never a reason not to migrate)."""
        try:
            from alembic.script import ScriptDirectory

            script = ScriptDirectory.from_config(migrate.alembic_config())
            found = {s.revision: (s.doc or "").strip() for s in script.walk_revisions()}
        except Exception:
            return {}
        return {step: found.get(step, "") for step in self.steps}


@dataclass(frozen=True)
class Done:
    """A migration that ran: the revision the database is at now, and the backup made first
    (None for a server database, which is not copied)."""

    plan: Plan
    revision: str | None
    backup: Path | None


def plan(db: str | Path, revision: str | None = None, *, downgrade: bool = False) -> Plan:
    """The migration of ``db`` (a file path or a server URL) to ``revision`` (default: the
    newest); ``downgrade`` goes back to ``revision`` (``base``: no tables), which must be given.

    Refuses a missing or empty file, a revision this library does not know (the file's or the
    one asked), and an upgrade to a revision older than the file's. Reads only.
    """
    location = Location.parse(db)
    exists, current = revision_of(location)
    if not exists:
        raise NoDatabase(location.label)
    if current is None:
        raise NothingToMigrate(location.label)
    if current not in migrate.REVISIONS:
        raise SchemaTooNew(location.label, current)
    if downgrade:
        if revision is None:
            raise ValueError("a downgrade needs the revision to go back to")
        if revision != BASE and revision not in migrate.REVISIONS:
            raise UnknownRevision(revision, f"{BASE} or one of {', '.join(migrate.REVISIONS)}")
        stop = 0 if revision == BASE else migrate.REVISIONS.index(revision) + 1
        steps = tuple(reversed(migrate.REVISIONS[stop : migrate.REVISIONS.index(current) + 1]))
        return Plan(location, current, revision, "downgrade", steps)
    target = migrate.HEAD if revision in (None, "head") else revision
    if target not in migrate.REVISIONS:
        raise UnknownRevision(str(revision), f"one of {', '.join(migrate.REVISIONS)}")
    if migrate.REVISIONS.index(target) < migrate.REVISIONS.index(current):
        raise WrongDirection(location.label, current, target)
    return Plan(location, current, target, "upgrade", tuple(migrate.pending(current, target)))


def run(plan: Plan, *, progress: Callable[[int, int], None] | None = None) -> Done:
    """Carry out ``plan``: a backup copy of a file first (``database.backup``), then every
    step in one transaction. ``progress(done, total)`` is told as a long step advances.

    When the migration fails and nothing changed, the backup is removed again (it would only
    be a second copy of the file); after a fault whose commit is uncertain it is kept. A
    revision's failure is ``MigrationFailed``, one line naming the step.
    """
    if not plan.steps:
        return Done(plan, plan.current, None)
    location = plan.location
    copy = backup(location.path, plan.current) if location.path is not None else None
    migrate.progress = progress
    try:
        migrate.apply(location, plan.target, backwards=plan.direction == "downgrade")
    except StorageFault as e:  # a full disk or a read-only place: the message says what became of it
        if copy is not None and not e.committed:
            copy.unlink(missing_ok=True)
        raise
    except Exception as e:  # a refusal, or SQLAlchemy's or the driver's error from a revision's DDL
        if copy is not None:
            copy.unlink(missing_ok=True)  # nothing changed: the copy is not needed
        raise _failure(plan, e) from None
    finally:
        migrate.progress = None
    return Done(plan, revision_of(location)[1], copy)


def _failure(plan: Plan, error: BaseException) -> MigrationFailed:
    if isinstance(error, migrate.MigrationRefused):
        return MigrationFailed(f"{error}; nothing was changed")
    orig: Any = getattr(error, "orig", None) or error
    detail = " ".join(str(orig).split())
    return MigrationFailed(
        f"{plan.label}: {plan.direction} {plan.current} -> {plan.target} failed ({detail}); the database's "
        f"revision mark ({plan.current}) may disagree with its tables; nothing was changed"
    )
