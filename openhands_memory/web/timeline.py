"""A conversation's model calls and the context each was sent, read once and then extended.

The calls are the recorded model calls as ``replay`` finds them (``replay/calls.py``): the
first event of each agent response (an action batch, a message to the user, a recall). Which
call is the Nth, and how many tokens the model was sent at each, are answers about the whole
history; the inspector reads the few columns they need (never an event's JSON unless its
token count was never cached) once per conversation and process, and afterwards only the rows
written since. So a page about call N costs what the view at N costs, not what the history
does.

Input tokens at a call: the tokens of the events visible on the path before it (the cached
counts; an event never counted is estimated at a token per four bytes of its JSON,
and the figure says so), less what the condensations in force had forgotten, plus the
latest summary.
"""

from __future__ import annotations

import bisect
import threading
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import ranges
from ..inspection.history import first_hiders, on_path

if TYPE_CHECKING:
    from ..storage.session import Session

#: Rows read per statement while a timeline is first built.
BATCH = 50_000
#: The responses remembered while calls are found: an action batch's events lie close
#: together, so a response seen this many responses ago will not come back.
RECENT_RESPONSES = 256
#: Characters per token where a count is estimated.
CHARS_PER_TOKEN = 4

_ACTION, _MESSAGE_AGENT, _RECALL, _CONDENSATION, _OTHER = 1, 2, 3, 4, 0


def _kind_code(kind: str, source: str) -> int:
    if kind == "ActionEvent":
        return _ACTION
    if kind == "MessageEvent" and source == "agent":
        return _MESSAGE_AGENT
    if kind == "RecallAction":
        return _RECALL
    if kind == "Condensation":
        return _CONDENSATION
    return _OTHER


@dataclass(frozen=True)
class Point:
    """One model call: its number (from 1), the id of its response's first event, and the
    input tokens it was sent."""

    n: int
    seq: int
    tokens: int


@dataclass(frozen=True)
class Mark:
    """A condensation on the path, placed before the call it first shaped."""

    seq: int
    before_call: int  # the number of the first call after it (calls + 1: none yet)


@dataclass
class _Rows:
    """The columns of every row read so far, by id (ids are 0, 1, 2, … with no gap)."""

    kinds: bytearray = field(default_factory=bytearray)
    responses: array = field(default_factory=lambda: array("q"))  # hash of llm_response_id; 0: none
    tokens: array = field(default_factory=lambda: array("q"))  # visible rows' tokens; 0: not visible
    estimated: int = 0  # rows whose tokens are estimated

    @property
    def last(self) -> int:
        return len(self.kinds) - 1

    def add(self, rows: list[tuple]) -> None:
        for seq, kind, source, response, visible, count, length in rows:
            if seq != len(self.kinds):  # a gap (a row being written): stop before it
                break
            self.kinds.append(_kind_code(kind, source))
            self.responses.append(0 if response is None else (hash(response) or 1))
            if not visible:
                self.tokens.append(0)
            elif count is not None:
                self.tokens.append(count)
            else:
                self.tokens.append(-(-(length or 0) // CHARS_PER_TOKEN))
                self.estimated += 1


@dataclass
class _Condensation:
    runs: list[ranges.Run]
    summary_tokens: int | None  # None: no summary (the previous one stays)


@dataclass
class Sweep:
    """The calls on one path, as far as ``upto``; ``extend`` carries it on."""

    path: list[ranges.Run]
    upto: int = -1
    calls: list[Point] = field(default_factory=list)
    seqs: array = field(default_factory=lambda: array("q"))  # the calls' first ids, for bisection
    marks: list[Mark] = field(default_factory=list)
    hidden: "Runs" = field(default_factory=lambda: Runs())
    running: int = 0  # tokens of the visible, not hidden, events so far
    summary: int = 0
    recent: dict[int, None] = field(default_factory=dict)
    _sampled: tuple[int, list[Point]] | None = None
    _marked: tuple[int, list[int]] | None = None

    def sampled(self, most: int) -> list[Point]:
        """``sampled(self.calls, most)``, kept until a call is added."""
        if self._sampled is None or self._sampled[0] != len(self.calls):
            self._sampled = (len(self.calls), sampled(self.calls, most))
        return self._sampled[1]

    def marked(self, most: int) -> list[int]:
        """The calls the condensations came before, at most ``most`` of them: where more
        than that fall on one chart, one per bucket of calls (a line per pixel or so)."""
        if self._marked is None or self._marked[0] != len(self.marks):
            calls = sorted({m.before_call for m in self.marks})
            if len(calls) > most:
                size = max(len(self.calls), 1) / most
                calls = sorted({int((c - 1) // size * size) + 1 for c in calls})
            self._marked = (len(self.marks), calls)
        return self._marked[1]

    def extend(self, rows: _Rows, conds: dict[int, _Condensation], upto: int) -> None:
        kinds, responses, tokens = rows.kinds, rows.responses, rows.tokens
        for s, e in self.path:
            for seq in range(max(s, self.upto + 1), min(e, upto) + 1):
                code = kinds[seq]
                if code == _CONDENSATION:
                    self._condense(seq, conds.get(seq), tokens)
                elif code:
                    key = responses[seq] if code == _ACTION and responses[seq] else -seq - 1
                    if key not in self.recent:
                        self.recent[key] = None
                        if len(self.recent) > RECENT_RESPONSES:
                            del self.recent[next(iter(self.recent))]
                        self.calls.append(Point(len(self.calls) + 1, seq, self.running + self.summary))
                        self.seqs.append(seq)
                self.running += tokens[seq]
        self.upto = max(self.upto, upto)

    def _condense(self, seq: int, cond: _Condensation | None, tokens: array) -> None:
        self.marks.append(Mark(seq, len(self.calls) + 1))
        if cond is None:
            return
        # Only ids on the path were counted in; only those not hidden already come out.
        for s, e in ranges.within(ranges.merge(cond.runs), self.path):
            for a, b in self.hidden.add(s, min(e, seq - 1)):
                self.running -= sum(tokens[a : b + 1])
        if cond.summary_tokens is not None:
            self.summary = cond.summary_tokens


class Runs:
    """Sorted, disjoint id runs, kept as two lists of starts and ends: a run is added by
    bisection, so a history of many condensations costs n log n, where merging every run
    again at each condensation cost n squared."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, s: int, e: int) -> list[ranges.Run]:
        """Add ``s..e``; return its parts that were not in a run already."""
        if s > e:
            return []
        starts, ends = self.starts, self.ends
        i = bisect.bisect_left(ends, s - 1)  # the first run that ends at or after s - 1
        j, cur, new = i, s, []
        while j < len(starts) and starts[j] <= e + 1:  # runs touching s..e
            if starts[j] > cur:
                new.append((cur, min(starts[j] - 1, e)))
            cur = max(cur, ends[j] + 1)
            j += 1
        if cur <= e:
            new.append((cur, e))
        lo = min(s, starts[i]) if i < j else s
        hi = max(e, ends[j - 1]) if i < j else e
        starts[i:j], ends[i:j] = [lo], [hi]
        return new


class Timeline:
    """One conversation's rows and its sweeps (one per path asked), kept up to date."""

    def __init__(self, cid: str):
        self.cid = cid
        self.rows = _Rows()
        self.conds: dict[int, _Condensation] = {}
        self.sweeps: dict[tuple[ranges.Run, ...], Sweep] = {}
        self.lock = threading.Lock()
        # (start, end, condensation) spans, each id under the first condensation that hid
        # it: on a path (its condensations only), and everywhere; rebuilt as condensations land.
        self._spans: dict[tuple[ranges.Run, ...] | None, tuple[list[tuple[int, int, int]], list[int]]] = {}
        self._spans_of = -1

    def hidden_by(self, seqs: list[int], path: list[ranges.Run]) -> dict[int, int | None]:
        """The condensation that first hid each of ``seqs``: for an id on ``path``, among the
        condensations on it (another branch's do not apply there); else among all."""
        if self._spans_of != len(self.conds):
            self._spans, self._spans_of = {}, len(self.conds)
        out: dict[int, int | None] = {}
        for key in (tuple(path), None):
            found = self._spans.get(key)
            if found is None:
                spans = first_hiders([(c, s, e) for c, cond in self.conds.items() if key is None or on_path(path, c)
                                      for s, e in cond.runs])
                found = self._spans[key] = (spans, [s for s, _, _ in spans])
            spans, starts = found
            for seq in seqs:
                if seq in out or (key is not None and not on_path(path, seq)):
                    continue
                k = bisect.bisect_right(starts, seq) - 1
                out[seq] = spans[k][2] if k >= 0 and spans[k][0] <= seq <= spans[k][1] else None
        return out

    def refresh(self, db: "Session") -> None:
        """Read the rows and condensations written since the last refresh."""
        before = self.rows.last
        while True:
            batch = db.timeline_rows(self.cid, self.rows.last, BATCH)
            self.rows.add(batch)
            if len(batch) < BATCH:
                break
        if self.rows.last == before:
            return
        known = max(self.conds, default=-1)
        runs: dict[int, list[ranges.Run]] = {}
        for cond, s, e in db.ranges_after(self.cid, known):
            runs.setdefault(cond, []).append((s, e))
        for seq, _strategy, _reason, length, offset, _before, _after in db.condensation_sizes(self.cid, known):
            summary = -(-length // CHARS_PER_TOKEN) if length is not None and offset is not None else None
            self.conds[seq] = _Condensation(runs.get(seq, []), summary)

    def sweep(self, path: list[ranges.Run]) -> Sweep:
        """The calls on ``path`` (as far as it goes), from the sweep of the longest path
        already swept that it extends (an appended conversation's HEAD path grows)."""
        key = tuple(path)
        found = self.sweeps.get(key)
        if found is None:
            for old_key, old in list(self.sweeps.items()):
                if _extends(key, old_key):
                    found = old
                    del self.sweeps[old_key]
                    found.path = list(path)
                    break
            else:
                found = Sweep(list(path))
            if len(self.sweeps) >= 16:  # the branches asked for lately
                del self.sweeps[next(iter(self.sweeps))]
            self.sweeps[key] = found
        upto = min(path[-1][1], self.rows.last) if path else -1
        if upto > found.upto:
            found.extend(self.rows, self.conds, upto)
        return found


def _extends(new: tuple[ranges.Run, ...], old: tuple[ranges.Run, ...]) -> bool:
    """Whether path ``new`` is ``old`` with more ids after its end (same branch, grown)."""
    return bool(old) and len(new) == len(old) and new[:-1] == old[:-1] and new[-1][0] == old[-1][0] \
        and new[-1][1] >= old[-1][1]


class Timelines:
    """Every conversation's timeline in this process."""

    def __init__(self) -> None:
        self._by_cid: dict[str, Timeline] = {}
        self._lock = threading.Lock()

    def get(self, cid: str) -> Timeline:
        with self._lock:
            found = self._by_cid.get(cid)
            if found is None:
                found = self._by_cid[cid] = Timeline(cid)
            return found


def call_at(sweep: Sweep, seq: int) -> int:
    """The number of the last call at or before event ``seq`` (0: none yet)."""
    return bisect.bisect_right(sweep.seqs, seq)


def sampled(calls: list[Point], most: int) -> list[Point]:
    """At most ``most`` points: the calls in buckets of equal size, each bucket's peak kept
    (a context meter is about the peaks)."""
    if len(calls) <= most:
        return calls
    out: list[Point] = []
    size = len(calls) / most
    for k in range(most):
        bucket = calls[int(k * size) : max(int((k + 1) * size), int(k * size) + 1)]
        out.append(max(bucket, key=lambda p: p.tokens))
    return out
