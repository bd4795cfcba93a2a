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

import sqlite3
from typing import Iterable

from . import ranges
from .ranges import Run

_LIVE = (
    "SELECT start_id, end_id FROM hidden_run "
    "WHERE conversation_id = ? AND until_id IS NULL ORDER BY start_id"
)
_AT = (
    "SELECT start_id, end_id FROM hidden_run WHERE conversation_id = ? AND from_id <= ? "
    "AND (until_id IS NULL OR until_id > ?) ORDER BY start_id"
)
_ANY_VISIBLE = (
    "SELECT 1 FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? AND llm_visible LIMIT 1"
)
_CLOSE = (
    "UPDATE hidden_run SET until_id = ? "
    "WHERE conversation_id = ? AND until_id IS NULL AND start_id = ?"
)
_OPEN = (
    "INSERT INTO hidden_run (conversation_id, from_id, start_id, end_id, until_id) "
    "VALUES (?, ?, ?, ?, NULL)"
)


def live(db: sqlite3.Connection, cid: str) -> list[Run]:
    """The runs hidden now (after the newest condensation)."""
    return [(s, e) for s, e in db.execute(_LIVE, (cid,))]


def at(db: sqlite3.Connection, cid: str, condensation_id: int | None) -> list[Run]:
    """The runs hidden right after condensation ``condensation_id`` (none before the first)."""
    if condensation_id is None:
        return []
    return [(s, e) for s, e in db.execute(_AT, (cid, condensation_id, condensation_id))]


def bridge(db: sqlite3.Connection, cid: str, runs: list[Run], settled: Iterable[Run] = ()) -> list[Run]:
    """Join sorted disjoint ``runs`` across gaps that hold no LLM-visible row.

    ``settled`` runs were canonical neighbours already: the gap between two of them is known
    to hold a visible row and is not looked at again.
    """
    known = set(settled)
    out: list[list[int]] = []
    for s, e in runs:
        if out:
            prev = (out[-1][0], out[-1][1])
            if not (prev in known and (s, e) in known):
                if db.execute(_ANY_VISIBLE, (cid, prev[1] + 1, s - 1)).fetchone() is None:
                    out[-1][1] = e
                    continue
        out.append([s, e])
    return [(s, e) for s, e in out]


def apply(db: sqlite3.Connection, cid: str, condensation_id: int, forgotten: list[Run]) -> list[Run]:
    """Fold what condensation ``condensation_id`` forgot into the hidden runs; returns the
    live runs after it. Runs inside the caller's write transaction."""
    before = live(db, cid)
    if not forgotten:
        return before
    after = bridge(db, cid, ranges.merge(before, forgotten), settled=before)
    old, new = set(before), set(after)
    db.executemany(_CLOSE, [(condensation_id, cid, s) for s, _ in sorted(old - new)])
    db.executemany(_OPEN, [(cid, condensation_id, s, e) for s, e in sorted(new - old)])
    return after


def replay(db: sqlite3.Connection, cid: str) -> list[tuple[int, int, int, int | None]]:
    """The hidden runs the ``forgotten_range`` rows imply, as (from_id, start, end, until_id)
    rows, computed without writing (``doctor`` compares them with what is stored)."""
    rows: dict[tuple[int, int], list] = {}  # (start, from_id) of a live run -> its row
    live_runs: list[Run] = []
    live_from: dict[Run, int] = {}
    by_cond = db.execute(
        "SELECT c.id, r.start_id, r.end_id FROM condensation c LEFT JOIN forgotten_range r "
        "ON r.conversation_id = c.conversation_id AND r.condensation_id = c.id "
        "WHERE c.conversation_id = ? ORDER BY c.id, r.start_id",
        (cid,),
    )
    pending: list[Run] = []
    current: int | None = None

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

    for cond, start, end in by_cond.fetchall():
        if cond != current:
            if current is not None:
                fold(current, pending)
            current, pending = cond, []
        if start is not None and start <= end:
            pending.append((start, end))
    if current is not None:
        fold(current, pending)
    return sorted(tuple(r) for r in rows.values())  # type: ignore[misc]


def stored(db: sqlite3.Connection, cid: str) -> list[tuple[int, int, int, int | None]]:
    return sorted(
        db.execute(
            "SELECT from_id, start_id, end_id, until_id FROM hidden_run WHERE conversation_id = ?",
            (cid,),
        ).fetchall()
    )


def rebuild(db: sqlite3.Connection, cid: str) -> int:
    """Rewrite a conversation's hidden runs from its ``forgotten_range`` rows, inside the
    caller's write transaction; returns how many rows changed."""
    want, have = set(replay(db, cid)), set(stored(db, cid))
    if want == have:
        return 0
    db.execute("DELETE FROM hidden_run WHERE conversation_id = ?", (cid,))
    db.executemany(
        "INSERT INTO hidden_run (conversation_id, from_id, start_id, end_id, until_id) "
        "VALUES (?, ?, ?, ?, ?)",
        [(cid, *r) for r in sorted(want)],
    )
    return len(want ^ have)
