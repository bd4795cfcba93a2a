"""Replays kept in the database they replayed (``replay --save``), for the web inspector to
list and draw: it never calls a model, so it shows what a replay already computed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Sequence

from .report import Replay

if TYPE_CHECKING:
    from ..conversation import EventStore


@dataclass(frozen=True)
class SavedRun:
    id: int
    created_at: str
    strategies: list[str]


def save(store: "EventStore", replays: Sequence[Replay]) -> None:
    """Keep each replay under its conversation, all in one transaction."""
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with store.writing() as db:
        for replay in replays:
            db.insert_replay_run(replay.conversation, when, "\n".join(s.label for s in replay.strategies),
                                 replay.model_dump_json())


def runs(store: "EventStore", cid: str, before: int | None = None, limit: int = 50) -> list[SavedRun]:
    """The conversation's saved runs, newest first, up to ``limit`` below id ``before``."""
    with store.reading() as db:
        rows = db.replay_runs(cid, 2**62 if before is None else before, limit)
    return [SavedRun(i, when, labels.split("\n")) for i, when, labels in rows]


def load(store: "EventStore", cid: str, run: int) -> tuple[str, Replay] | None:
    """(when, the replay) of saved run ``run`` of ``cid``; None if there is no such run."""
    with store.reading() as db:
        row = db.replay_run(cid, run)
    return None if row is None else (row[0], Replay.model_validate_json(row[1]))
