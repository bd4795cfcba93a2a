"""Storage: every statement the library runs, behind one recorder interface.

``open_recorder`` judges what a path or URL holds (refusing anything that is not ours before
a byte changes), creates it at the head revision when it is new, and returns the recorder for
its backend: ``sqlite.SqliteRecorder`` for a file, ``postgres.PostgresRecorder`` for a
``postgresql://`` URL.
"""

from __future__ import annotations

from pathlib import Path

from ..database import Durability, Location, open_location
from .recorder import Recorder
from .session import END, IntegrityViolation, Session


def open_recorder(
    path_or_url: str | Path, *, durability: Durability = "normal", create: bool = True,
    readonly: bool = False,
) -> Recorder:
    """``readonly``: never create or change anything (reading commands, inspection)."""
    location = open_location(path_or_url, create=create and not readonly)
    if location.is_sqlite:
        from .sqlite import SqliteRecorder

        assert location.path is not None
        return SqliteRecorder(location.path, durability=durability, readonly=readonly)
    from .postgres import PostgresRecorder

    return PostgresRecorder(location, create=create, readonly=readonly)


__all__ = ["END", "IntegrityViolation", "Location", "Recorder", "Session", "open_recorder"]
