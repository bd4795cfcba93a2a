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


def apply(db: Session, cid: str, condensation_id: int, forgotten: list[Run],
          path: list[Run] | None = None) -> list[Run]:
    """Fold what condensation ``condensation_id`` forgot into the hidden runs of its path
    (``path``, when the caller read it); returns the runs hidden on it after. Runs inside
    the caller's write transaction."""
    if path is None:
        path = db.path(cid, condensation_id)
    if len(path) == 1 and path[0][0] == 0:  # no branch on its path: the live runs are its
        before = db.hidden_live(cid)
        if not forgotten:
            return before
        after = bridge(db, cid, ranges.merge(before, forgotten), settled=before)
        old, new = set(before), set(after)
        db.close_hidden(cid, condensation_id, sorted(s for s, _ in old - new))
        db.open_hidden(cid, condensation_id, sorted(new - old))
        return after
    rows = db.hidden_on_path(cid, path)
    before = ranges.merge((s, e) for _, s, e, _ in rows)
    if not forgotten:
        return before
    after = bridge(db, cid, ranges.merge(before, forgotten))
    _fold_on_path(rows, after, lambda keys: db.close_hidden_rows(cid, condensation_id, keys),
                  lambda runs: db.open_hidden(cid, condensation_id, runs))
    return after


def _fold_on_path(rows: list[tuple[int, int, int, int | None]], after: list[Run], close, open_) -> None:
    """Close the live runs of ``rows`` (the runs in force on a path) that ``after`` replaces,
    and open the runs of ``after`` that are new. A run in force here but merged away on
    another branch (``until`` set) stays as it is: a run of ``after`` covers it."""
    new = set(after)
    close(sorted((f, s) for f, s, e, u in rows if u is None and (s, e) not in new))
    have = {(s, e) for _, s, e, _ in rows}
    open_(sorted(new - have))


def replay(db: Session, cid: str) -> list[tuple[int, int, int, int | None]]:
    """The hidden runs the ``forgotten_range`` rows imply, as (from_id, start, end, until_id)
    rows, computed without writing (``doctor`` compares them with what is stored). On a
    history tree, each condensation folds into the runs in force on its own path."""
    rows: dict[tuple[int, int], list] = {}  # (from_id, start) of a run -> its row
    branched = bool(db.jumps(cid))

    def in_force(cond: int) -> list[list]:
        if not branched:
            return [r for r in rows.values() if r[3] is None]
        path = db.path(cid, cond)

        def on(seq: int | None) -> bool:
            return seq is not None and any(s <= seq <= e for s, e in path)

        return [r for r in rows.values() if on(r[0]) and (r[3] is None or not on(r[3]))]

    def fold(cond: int, forgotten: list[Run]) -> None:
        if not forgotten:
            return
        force = in_force(cond)
        before = ranges.merge((r[1], r[2]) for r in force)
        after = bridge(db, cid, ranges.merge(before, forgotten), settled=() if branched else before)

        def close(keys: list[tuple[int, int]]) -> None:
            for key in keys:
                rows[key][3] = cond

        def open_(runs: list[Run]) -> None:
            for s, e in runs:
                rows[(cond, s)] = [cond, s, e, None]

        _fold_on_path([tuple(r) for r in force], after, close, open_)  # type: ignore[misc]

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
