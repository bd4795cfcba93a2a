"""Recording a Condensation: its row, the ranges it forgot, the hidden runs it changes."""

from __future__ import annotations

import json
from typing import Sequence

from .. import ranges
from ..searchable import fold_nul
from ..errors import MalformedEvent
from ..events import Condensation, CondensationNote
from . import hidden
from .session import Session


def validated_runs(cond: Condensation, seq: int) -> list[ranges.Run]:
    runs: list[ranges.Run] = []
    for start, end in cond.forgotten_ranges or []:
        if start > end:  # the legacy form allows it and forgets nothing
            continue
        if start < 0 or end >= seq:
            raise MalformedEvent(
                f"Condensation: field 'forgotten_ranges': [{start}, {end}] must lie within the "
                f"events before it (0..{seq - 1})"
            )
        runs.append((start, end))
    return runs


def on_path(runs: Sequence[ranges.Run], path: Sequence[ranges.Run], seq: int) -> list[ranges.Run]:
    """What ``runs`` forget on ``path``, the path of the condensation at ``seq``: the parts
    before it on its path. A strategy names one range from the first to the last event of
    each run it forgets in the view, which on a branch spans the ids of the branches left
    between them; those rows were never the condensation's, and a fork renumbers each
    interval of the path apart, so a range is cut at every jump of the path."""
    return ranges.within(runs, [(s, min(e, seq - 1)) for s, e in path if s < seq])


def forgotten_runs(db: Session, cid: str, seq: int, cond: Condensation,
                   path: Sequence[ranges.Run] | None = None) -> list[ranges.Run]:
    """The id runs a Condensation stored at ``seq`` forgets on its path (``path``: that
    path, when the caller read it). External ids that name no stored event (such as the
    SDK's ``<id>-summary``) are ignored, as the SDK ignores them."""
    runs = validated_runs(cond, seq)
    if cond.forgotten_event_ids:
        runs += ranges.runs_of(i for i, _ in db.seqs_of(cid, seq, cond.forgotten_event_ids))
    return on_path(ranges.merge(runs), db.path(cid, seq) if path is None else path, seq)


def record(db: Session, cid: str, seq: int, cond: Condensation) -> None:
    """Write what a Condensation stored at ``seq`` did, inside the caller's transaction."""
    path = db.path(cid, seq)
    runs = forgotten_runs(db, cid, seq, cond, path)
    note = cond.note or CondensationNote()
    db.insert_condensation(
        cid,
        seq,
        (
            # PostgreSQL's text holds no U+0000: a summary's NUL is kept as a space on both
            # backends (the event's JSON keeps it escaped, byte for byte), as search reads it.
            None if cond.summary is None else fold_nul(cond.summary),
            cond.summary_offset,
            note.strategy,
            note.reason,
            json.dumps(note.config) if note.config is not None else None,
            note.tokens_before,
            note.tokens_after,
        ),
        runs,
    )
    hidden.apply(db, cid, seq, runs, path)
