"""Inclusive id runs: how forgotten ids are stored and how the view finds what is left."""

from __future__ import annotations

import bisect
from typing import Iterable, Iterator, Sequence

Run = tuple[int, int]  # inclusive [start, end]

END = 2**62  # "no upper bound" for id ranges: every id is below it


def runs_of(ids: Iterable[int]) -> list[Run]:
    """The maximal contiguous runs of a set of ids, sorted."""
    out: list[list[int]] = []
    for i in sorted(set(ids)):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return [(s, e) for s, e in out]


def merge(*run_lists: Iterable[Run]) -> list[Run]:
    """The union of several run lists, as sorted disjoint runs (adjacent runs joined)."""
    spans = sorted((s, e) for runs in run_lists for s, e in runs if s <= e)
    out: list[list[int]] = []
    for s, e in spans:
        if out and s <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def complement(hidden: Iterable[Run], upto: int, start: int = 0) -> list[Run]:
    """The runs of start..upto that no hidden run covers. ``hidden`` must be sorted and
    disjoint."""
    out: list[Run] = []
    nxt = start
    for s, e in hidden:
        if e < start:
            continue
        if s > upto:
            break
        if s > nxt:
            out.append((nxt, s - 1))
        nxt = max(nxt, e + 1)
    if nxt <= upto:
        out.append((nxt, upto))
    return out


def _parts(runs: Iterable[Run], intervals: Sequence[tuple[int, ...]]) -> Iterator[tuple[int, int, int]]:
    """(k, lo, hi) for each part of ``runs`` inside ``intervals[k]`` (sorted, disjoint; each
    starts with its first and last id)."""
    starts = [iv[0] for iv in intervals]
    for s, e in runs:
        k = max(bisect.bisect_right(starts, s) - 1, 0)
        while k < len(intervals) and intervals[k][0] <= e:
            lo, hi = max(s, intervals[k][0]), min(e, intervals[k][1])
            if lo <= hi:
                yield k, lo, hi
            k += 1


def within(runs: Iterable[Run], intervals: Sequence[Run]) -> list[Run]:
    """The parts of ``runs`` that lie inside ``intervals`` (sorted, disjoint): each run cut
    where the intervals leave a gap, as sorted disjoint runs."""
    return merge((lo, hi) for _, lo, hi in _parts(runs, intervals))


def moved(runs: Iterable[Run], moves: Sequence[tuple[int, int, int]]) -> list[Run]:
    """``runs`` renumbered as a fork renumbers a path: ``moves`` are (start, end, shift) per
    interval (sorted, disjoint); each part of a run inside an interval moves by that
    interval's own shift, and parts outside every interval are dropped (they name no row the
    fork holds). Parts that become adjacent are joined."""
    return merge((lo + moves[k][2], hi + moves[k][2]) for k, lo, hi in _parts(runs, moves))


def count(runs: Iterable[Run]) -> int:
    return sum(e - s + 1 for s, e in runs)


def covers(runs: Sequence[Run], i: int) -> bool:
    """Whether one of ``runs`` (sorted, disjoint) holds ``i``."""
    k = bisect.bisect_right(runs, (i, float("inf"))) - 1
    return k >= 0 and runs[k][0] <= i <= runs[k][1]


def text(ids: Iterable[int]) -> str:
    """``[1, 2, 3, 7, 9, 10]`` -> ``"1..3, 7, 9..10"``."""
    return ", ".join(str(s) if s == e else f"{s}..{e}" for s, e in runs_of(ids))
