"""Hidden runs: the ids the model no longer sees, stored canonical and temporal.

Each condensation records what it forgot (``forgotten_range``). The view needs the union of
everything forgotten so far, in as few runs as possible, and at any past condensation too:

* **Canonical.** Two runs are joined when no row between them is LLM-visible: the rows in
  such a gap (Condensations, requests, state updates, ...) are never shown anyway. The SDK's
  ``forgotten_event_ids`` list only events that were in the view, never the Condensation rows
  between them; without bridging, a rolling condenser leaves one gap per condensation, and
  the visible tail becomes one interval per condensation.
* **Temporal.** A run is one ``hidden_run`` row, written by the condensation that made it
  (``from_id``) and closed by the one that merged it into a larger run (``until_id``, NULL
  while live). Each condensation writes only the runs it changes, so the bookkeeping grows
  with the history, not with condensations squared. The live runs are one range of the
  partial index ``ix_hidden_run_live``; the runs in force at an older condensation ``c`` are
  the rows with ``from_id <= c`` and ``until_id`` NULL or ``> c``.
"""

from __future__ import annotations

from typing import Iterable

from .. import ranges
from ..ranges import Run
from .session import Session


def live(db: Session, cid: str) -> list[Run]:
    """The runs hidden now (after the newest condensation)."""
    return db.hidden_live(cid)


def at(db: Session, cid: str, condensation_id: int | None) -> list[Run]:
    """The runs hidden right after condensation ``condensation_id`` (none before the first)."""
    return [] if condensation_id is None else db.hidden_at(cid, condensation_id)


def bridge(db: Session, cid: str, runs: list[Run], settled: Iterable[Run] = ()) -> list[Run]:
    """Join sorted disjoint ``runs`` across gaps that hold no LLM-visible row.

    ``settled`` runs were canonical neighbours already: the gap between two of them is known
    to hold a visible row and is not looked at again.
    """
    known = set(settled)
    out: list[list[int]] = []
    for s, e in runs:
        if out:
            prev = (out[-1][0], out[-1][1])
            if not (prev in known and (s, e) in known) and not db.any_visible(cid, prev[1] + 1, s - 1):
                out[-1][1] = e
                continue
        out.append([s, e])
    return [(s, e) for s, e in out]


def apply(db: Session, cid: str, condensation_id: int, forgotten: list[Run]) -> list[Run]:
    """Fold what condensation ``condensation_id`` forgot into the hidden runs; returns the
    live runs after it. Runs inside the caller's write transaction."""
    before = db.hidden_live(cid)
    if not forgotten:
        return before
    after = bridge(db, cid, ranges.merge(before, forgotten), settled=before)
    old, new = set(before), set(after)
    db.close_hidden(cid, condensation_id, sorted(s for s, _ in old - new))
    db.open_hidden(cid, condensation_id, sorted(new - old))
    return after


def replay(db: Session, cid: str) -> list[tuple[int, int, int, int | None]]:
    """The hidden runs the ``forgotten_range`` rows imply, as (from_id, start, end, until_id)
    rows, computed without writing (``doctor`` compares them with what is stored)."""
    rows: dict[tuple[int, int], list] = {}  # (start, from_id) of a run -> its row
    live_runs: list[Run] = []
    live_from: dict[Run, int] = {}

    def fold(cond: int, forgotten: list[Run]) -> None:
        nonlocal live_runs
        if not forgotten:
            return
        after = bridge(db, cid, ranges.merge(live_runs, forgotten), settled=live_runs)
        for run in set(live_runs) - set(after):
            rows[(run[0], live_from.pop(run))][3] = cond
        for run in set(after) - set(live_runs):
            live_from[run] = cond
            rows[(run[0], cond)] = [cond, run[0], run[1], None]
        live_runs = after

    pending: list[Run] = []
    current: int | None = None
    for cond, start, end in db.condensations_with_ranges(cid):
        if cond != current:
            if current is not None:
                fold(current, pending)
            current, pending = cond, []
        if start is not None and end is not None and start <= end:
            pending.append((start, end))
    if current is not None:
        fold(current, pending)
    return sorted(tuple(r) for r in rows.values())  # type: ignore[misc]


def stored(db: Session, cid: str) -> list[tuple[int, int, int, int | None]]:
    return db.hidden_rows(cid)


def rebuild(db: Session, cid: str) -> int:
    """Rewrite a conversation's hidden runs from its ``forgotten_range`` rows, inside the
    caller's write transaction; returns how many rows changed."""
    want, have = set(replay(db, cid)), set(stored(db, cid))
    if want != have:
        db.replace_hidden(cid, sorted(want))
    return len(want ^ have)
