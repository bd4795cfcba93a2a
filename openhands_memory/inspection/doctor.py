"""The doctor: checks a database, and repairs what can be repaired, in one transaction.

Two depths:

* **quick** (the default) checks what an agent resuming a conversation relies on, at a cost
  that follows the tail: ids 0..n-1 without gaps (from the primary key), tool calls and
  results paired since the newest condensation, the newest condensation's row and ranges
  (each inside one interval of its path), and the live hidden runs equal to what its ranges
  make of the runs before it.
* **full** checks everything, over the whole history: SQLite's ``integrity_check`` and
  ``foreign_key_check``, every tool call, every condensation's row and ranges against its
  event's JSON, every forgotten range inside the events before its condensation and on that
  condensation's path, and every hidden run against a replay of all forgotten ranges.

Repairs (``repair``): a synthetic AgentErrorEvent "interrupted" result appended for each call
without a result anywhere; missing condensation rows and ranges rebuilt from the event's
JSON; stray ranges deleted; ranges that span a jump of their condensation's path cut at it
(read from the parents); hidden runs recomputed. Id gaps, orphan or repeated results, ranges
outside the events before their condensation and a damaged file are reported only.

Repairs run beside live agents, so they never act on what the check saw: the repair is one
write transaction that holds each conversation's write lock and checks again, under that
lock, everything it is about to repair (a result that landed since the check leaves its call
alone). And a call without a result may be one an agent is still executing — its result
would then land after ours, a second result no repair can take back. So a dangling call is
repaired only when its agent has moved on (an action of a later LLM response follows it) or
when it is at least ``min_age`` seconds old (its event's timestamp; ``DEFAULT_MIN_AGE``);
otherwise it is reported, saying why it is left. ``min_age=0`` repairs every dangling call:
for a database no agent is writing to.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .. import ranges
from ..storage import condensations, hidden
from ..storage.session import Session

if TYPE_CHECKING:
    from ..conversation import EventStore

INTERRUPTED = "interrupted: the tool call never got a result (added by openhands-memory doctor --fix)"

#: How old (seconds) a dangling call of a conversation's newest batch must be before a repair
#: answers it: until then its tool may still be running. Tools run for minutes (a build, a
#: test suite; the SDK's terminal has no overall limit), and a result written while one runs
#: becomes a duplicate; a crashed agent's call waits ten minutes, or ``min_age=0``.
DEFAULT_MIN_AGE = 600.0

#: ``progress(conversations done, conversations in all)``, called as the checks go.
Progress = Callable[[int, int], None]


@dataclass
class Problem:
    conversation: str | None
    check: str
    detail: str
    fixable: bool = False
    ids: list[int] = field(default_factory=list)


@dataclass
class Plan:
    """What a repair would do for one conversation."""

    dangling: list[tuple[int, str, str]] = field(default_factory=list)  # (action id, call id, tool)
    missing_rows: list[int] = field(default_factory=list)  # Condensation events without a row
    missing_ranges: dict[int, list[ranges.Run]] = field(default_factory=dict)
    stray_ranges: list[int] = field(default_factory=list)  # condensation ids with ranges, no row
    off_path: list[int] = field(default_factory=list)  # condensations whose ranges span ids off their path
    hidden_wrong: bool = False

    def __bool__(self) -> bool:
        return bool(self.dangling or self.missing_rows or self.missing_ranges or self.stray_ranges
                    or self.off_path or self.hidden_wrong)


@dataclass
class Report:
    full: bool
    conversations: int = 0
    events: int = 0
    problems: list[Problem] = field(default_factory=list)
    plans: dict[str, Plan] = field(default_factory=dict)
    fixed: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # see Repaired
    min_age: float = DEFAULT_MIN_AGE

    @property
    def healthy(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"healthy": self.healthy, "mode": "full" if self.full else "quick",
                "conversations": self.conversations, "events": self.events, "fixed": self.fixed,
                "left": self.left, "problems": [asdict(p) for p in self.problems]}


def expected_runs(db: Session, cid: str, seq: int, payload: str) -> list[ranges.Run]:
    """The ranges a Condensation's JSON asks for, before they are cut to its path."""
    data = json.loads(payload)
    runs = [(s, e) for s, e in data.get("forgotten_ranges") or [] if s <= e and s >= 0 and e < seq]
    uids = [u for u in data.get("forgotten_event_ids") or [] if isinstance(u, str)]
    return ranges.merge(runs, ranges.runs_of(i for i, _ in db.seqs_of(cid, seq, uids)))


def _ids(db: Session, cid: str, problems: list[Problem]) -> int:
    count, low, high = db.event_span(cid)
    if count and (low != 0 or high != count - 1):
        missing = [i for a, b in db.id_gaps(cid) for i in range(a + 1, min(b, a + 1001))]
        where = ranges.text(missing) if missing else ""
        if low:
            where = f"0..{low - 1}" + (f", {where}" if where else "")
        problems.append(Problem(cid, "id gaps", f"ids should run 0..{count - 1} without gaps; missing: {where}"))
    return count


def _age(stamp: str | None, now: float) -> float | None:
    """Seconds since ``stamp`` (an event's ISO timestamp; naive ones are local time, as the
    SDK writes them), or None when it cannot be read."""
    try:
        return now - datetime.fromisoformat(stamp).timestamp()  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def may_be_running(db: Session, cid: str, action_id: int, now: float, min_age: float) -> str | None:
    """Why the dangling call of action ``action_id`` may be one its agent is still executing
    (see the module's docstring), or None when a result written for it cannot race one."""
    if min_age <= 0:
        return None
    _, stamp, moved_on = db.action_batch(cid, action_id)
    if moved_on:
        return None
    age = _age(stamp, now)
    if age is None:
        return f"its timestamp ({stamp}) gives no age, and no later action follows it, so its tool may still be running"
    if age < min_age:
        return (f"it is {max(age, 0):.0f} s old and no later action follows it, so its tool may still be running "
                f"(--fix answers it once it is {min_age:g} s old; --min-age 0 if no agent is running)")
    return None


def _calls(db: Session, cid: str, after: int, problems: list[Problem], plan: Plan, min_age: float) -> None:
    now = time.time()
    for call_id, actions, results, first_action, tool in db.unpaired_calls(cid, after):
        rids = db.result_ids(cid, call_id) if results else []
        if actions and not results:
            running = may_be_running(db, cid, first_action, now, min_age)
            what = f"action {first_action} ({tool}, {call_id}) has no result"
            if running:
                problems.append(Problem(cid, "dangling tool call", f"{what}; left alone: {running}", False,
                                        [first_action]))
                continue
            plan.dangling.append((first_action, call_id, tool or ""))
            problems.append(Problem(cid, "dangling tool call", what, True, [first_action]))
        elif results and not actions:
            problems.append(Problem(cid, "orphan result",
                                    f"result {ranges.text(rids)} answers {call_id}, which no action made", False, rids))
        if results > 1:
            problems.append(Problem(cid, "duplicated result",
                                    f"tool call {call_id} has {results} results: {ranges.text(rids)}", False, rids))
        if actions > 1:
            problems.append(Problem(cid, "duplicated call id",
                                    f"{actions} actions share tool call id {call_id}", False))


def _condensations(db: Session, cid: str, after: int, problems: list[Problem], plan: Plan) -> None:
    """Condensation events after ``after`` against their rows and ranges."""
    rows = db.condensation_ids(cid, after)
    kinds = db.kinds_of(cid, sorted(rows))
    for seq in sorted(rows):
        if kinds.get(seq) != "Condensation":
            problems.append(Problem(cid, "condensation row without event",
                                    f"condensation row {seq} belongs to a {kinds.get(seq, 'missing')} event"))
    for seq, payload in db.condensation_events(cid, after):
        expected = expected_runs(db, cid, seq, payload)
        if seq not in rows:
            plan.missing_rows.append(seq)
            problems.append(Problem(cid, "condensation without row",
                                    f"Condensation {seq} has no condensation row", True, [seq]))
        elif expected and not db.ranges_of(cid, seq):
            expected = condensations.on_path(expected, db.path(cid, seq), seq)  # as ``record`` stores them
            if not expected:  # its JSON names only ids off its path: it forgot nothing
                continue
            plan.missing_ranges[seq] = expected
            problems.append(Problem(cid, "condensation without ranges",
                                    f"Condensation {seq} forgets {ranges.count(expected)} events but no range "
                                    "records it", True, [seq]))
    if after < 0:
        for cond in sorted(db.range_owners(cid) - rows):
            plan.stray_ranges.append(cond)
            problems.append(Problem(cid, "ranges without condensation",
                                    f"forgotten ranges point at condensation {cond}, which does not exist", True, [cond]))


def _runs(runs: list[ranges.Run]) -> str:
    return ", ".join(str(s) if s == e else f"{s}..{e}" for s, e in runs) or "none"


def _ranges_on_path(db: Session, cid: str, rows: list[tuple[int, int, int]], problems: list[Problem],
                    plan: Plan) -> None:
    """Each forgotten range of ``rows`` ((condensation, start, end)) lies among the events
    before its condensation and inside one interval of that condensation's path. A range
    that spans a jump of the path (written before ranges were cut at jumps) names rows of
    other branches: the view never shows them anyway, but a fork moved the whole range by one
    interval's shift and hid what followed. Cutting it at the jumps is read from the parents
    alone (fixable); a range outside the events before its condensation says nothing about
    what was meant (reported only)."""
    branched = bool(rows) and bool(db.jumps(cid))
    paths: dict[int, list[ranges.Run]] = {}
    for cond, start, end in rows:
        if not 0 <= start <= end < cond:
            problems.append(Problem(cid, "forgotten range outside its events",
                                    f"condensation {cond} forgets {start}..{end}, which is not among the events "
                                    f"before it (0..{cond - 1}); fix by hand", False, [cond]))
            continue
        if cond not in paths:
            paths[cond] = db.path(cid, cond) if branched else [(0, cond)]
        path = paths[cond]
        if any(s <= start and end <= e for s, e in path):
            continue
        problems.append(Problem(cid, "forgotten range off its path",
                                f"condensation {cond} forgets {start}..{end}, which spans events off its path "
                                f"({_runs(path)}); on its path that is "
                                f"{_runs(condensations.on_path([(start, end)], path, cond))}", True, [cond]))
        if cond not in plan.off_path:
            plan.off_path.append(cond)


def _hidden_full(db: Session, cid: str, problems: list[Problem], plan: Plan) -> None:
    want, have = hidden.replay(db, cid), hidden.stored(db, cid)
    if want != have:
        plan.hidden_wrong = True
        first = min(set(want) ^ set(have))[0]
        problems.append(Problem(cid, "hidden out of date",
                                f"the hidden runs from condensation {first} on differ from its forgotten ranges",
                                True, [first]))


def _hidden_latest(db: Session, cid: str, latest: int, previous: int | None, problems: list[Problem], plan: Plan) -> None:
    """The live runs equal what the newest condensation's ranges make of the runs before it."""
    before = hidden.at(db, cid, previous)
    want = hidden.bridge(db, cid, ranges.merge(before, db.ranges_of(cid, latest)), settled=before)
    if want != hidden.live(db, cid):
        plan.hidden_wrong = True
        problems.append(Problem(cid, "hidden out of date",
                                f"the live hidden runs differ from what condensation {latest} forgot",
                                True, [latest]))


def _tree(db: Session, cid: str, count: int, problems: list[Problem]) -> None:
    """Parents precede their rows (else a path could loop) and HEAD is an event: a history
    tree written by the library always is; a hand edit may not be. Not repaired: which parent
    or HEAD was meant cannot be known."""
    bad = [seq for seq, parent in db.jumps(cid) if not -1 <= parent < seq]
    if bad:
        problems.append(Problem(cid, "tree", f"events {ranges.text(bad)} name a parent that does not "
                                "precede them (history tree); fix by hand", False, bad[:20]))
    head = db.head(cid)
    if head is not None and not -1 <= head < count:
        problems.append(Problem(cid, "tree", f"HEAD names event {head}, which does not exist; "
                                "navigate to an event to fix it"))


def _waiting(db: Session, cid: str, problems: list[Problem]) -> None:
    """Events an agent server sent whose parents never came (``io/agent_server.py``): the
    conversation has a gap, and is not shown as complete. Not repaired here: only the agent
    server holds what is missing."""
    waiting = db.pending_count(cid)
    if waiting:
        problems.append(Problem(cid, "gap", f"{waiting} event(s) the agent server sent wait for a parent it has "
                                "not delivered (a batch dropped or still retried); fill the gap with "
                                "`openhands-memory sync DB --agent-server URL`"))


def check_conversation(db: Session, cid: str, full: bool,
                       min_age: float = DEFAULT_MIN_AGE) -> tuple[list[Problem], Plan, int]:
    problems: list[Problem] = []
    plan = Plan()
    count = _ids(db, cid, problems)
    _tree(db, cid, count, problems)
    _waiting(db, cid, problems)
    if full:
        _calls(db, cid, -1, problems, plan, min_age)
        _condensations(db, cid, -1, problems, plan)
        _ranges_on_path(db, cid, db.forgotten_ranges(cid), problems, plan)
        _hidden_full(db, cid, problems, plan)
        return problems, plan, count
    latest = db.latest_condensation(cid)
    if latest is None:
        _calls(db, cid, -1, problems, plan, min_age)
        return problems, plan, count
    previous = db.latest_condensation(cid, latest - 1)
    _calls(db, cid, latest, problems, plan, min_age)
    _condensations(db, cid, latest - 1, problems, plan)
    _ranges_on_path(db, cid, [(latest, s, e) for s, e in db.ranges_of(cid, latest)], problems, plan)
    if not plan.missing_rows:
        if db.jumps(cid):  # a history tree: runs in force depend on each condensation's path
            _hidden_full(db, cid, problems, plan)
        else:
            _hidden_latest(db, cid, latest, previous, problems, plan)
    return problems, plan, count


def _other_names(store: "EventStore") -> list[Problem]:
    """A database file is written through one name. SQLite keeps a WAL per name: two names
    of one file (hard links) in use have two WALs, each copied into the file over pages the
    other wrote, and a WAL left beside another name is copied in when the file is next
    opened by that name, over whatever was written since."""
    from ..files import other_names

    path = store.location.path
    if path is None:  # a server's database has no file names
        return []
    found = []
    for other in other_names(path):
        wal = Path(f"{other}-wal")
        if wal.exists() and wal.stat().st_size:
            found.append(Problem(None, "another name", (
                f"{other} is another name (a hard link) of this file, with a WAL of its own ({wal}, "
                f"{wal.stat().st_size:,} bytes) that SQLite copies into the file when it is opened as {other}, over "
                f"what was written through {path.name} since; open the database by one name only, and move {wal} "
                f"aside once nothing has it open as {other}")))
    return found


def check(store: "EventStore", *, full: bool = False, progress: Progress | None = None,
          min_age: float = DEFAULT_MIN_AGE) -> Report:
    """Check every conversation (quick, or ``full``); see the module's docstring. ``min_age``:
    what a later ``repair`` of the report leaves to a live agent."""
    report = Report(full, min_age=min_age)
    if full:
        report.problems += _other_names(store)
    with store.reading() as db:
        report.problems += [Problem(None, p.split(":", 1)[0], p.split(": ", 1)[-1]) for p in db.file_problems(full)]
        cids = [c for c, _, _ in db.conversations()]
    for k, cid in enumerate(cids):
        # One snapshot per conversation: a long check never holds one over the whole file.
        with store.reading() as db:
            found, plan, n = check_conversation(db, cid, full, min_age)
        report.problems += found
        report.events += n
        if plan:
            report.plans[cid] = plan
        if progress is not None:
            progress(k + 1, len(cids))
    report.conversations = len(cids)
    return report


def _cut_at_jumps(db: Session, cid: str, cond: int, done: list[str], left: list[str]) -> bool:
    """Rewrite the ranges of condensation ``cond`` as what they forget on its path (read again
    under the repair's lock); whether they changed. Left alone when one of them lies outside
    the events before it: which ids were meant cannot be known."""
    have = db.ranges_of(cid, cond)
    if any(not 0 <= s <= e < cond for s, e in have):
        left.append(f"{cid}: condensation {cond} forgets ids outside the events before it; its ranges were "
                    "left as they are")
        return False
    want = condensations.on_path(have, db.path(cid, cond), cond)
    if want == have:
        return False
    db.delete_ranges(cid, cond)
    db.insert_ranges(cid, cond, want)
    done.append(f"{cid}: cut the ranges condensation {cond} forgot at the jumps of its path: {_runs(have)} -> "
                f"{_runs(want)}")
    return True


@dataclass
class Repaired:
    fixed: list[str] = field(default_factory=list)
    #: What the check had planned and the repair left, and why (e.g. a result landed since).
    left: list[str] = field(default_factory=list)


def repair(store: "EventStore", report: Report) -> Repaired:
    """Carry out the plans of ``report`` in one write transaction. Each conversation's write
    lock is taken in turn (in id order, so two repairs cannot deadlock) and each planned
    repair checked again under it: what no longer needs it, or may race a live agent, is
    left, saying why."""
    from ..events import AgentErrorEvent, event_from_json
    from ..conversation import Conversation

    out = Repaired()
    done, left = out.fixed, out.left
    now = time.time()
    with store.writing() as db:
        for cid in sorted(report.plans):
            plan = report.plans[cid]
            db.hold(cid)
            rows = db.condensation_ids(cid) if plan.missing_rows or plan.stray_ranges else set()
            rebuild = plan.hidden_wrong
            for cond in plan.stray_ranges:
                if cond not in rows:
                    db.delete_ranges(cid, cond)
                    done.append(f"{cid}: deleted the ranges of missing condensation {cond}")
                    rebuild = True
            for seq in plan.missing_rows:
                if seq not in rows:
                    payload = db.event(cid, seq)[1]  # type: ignore[index]
                    condensations.record(db, cid, seq, event_from_json(payload))  # type: ignore[arg-type]
                    done.append(f"{cid}: rebuilt the condensation row of event {seq} from its JSON")
                    rebuild = True
            for cond in plan.off_path:
                rebuild = _cut_at_jumps(db, cid, cond, done, left) or rebuild
            for seq, runs in plan.missing_ranges.items():
                if not db.ranges_of(cid, seq):
                    db.insert_ranges(cid, seq, runs)
                    done.append(f"{cid}: recorded the ranges condensation {seq} forgets ({ranges.count(runs)} events)")
                    rebuild = True
            if rebuild:
                changed = hidden.rebuild(db, cid)
                if changed:
                    done.append(f"{cid}: recomputed the hidden runs ({changed} row(s) changed)")
            errors = []
            for action, call, tool in plan.dangling:
                answered = db.result_ids(cid, call)
                running = None if answered else may_be_running(db, cid, action, now, report.min_age)
                if answered:
                    left.append(f"{cid}: action {action} ({call}): its result landed after the check, as "
                                       f"event {ranges.text(answered)}; nothing to repair")
                elif running:
                    left.append(f"{cid}: action {action} ({call}): {running}")
                else:
                    errors.append(AgentErrorEvent(tool_name=tool or "unknown", tool_call_id=call, error=INTERRUPTED))
            if errors:
                with Conversation(store, cid).writing(within=db) as w:
                    seqs = w.append(errors)
                done.append(f"{cid}: appended an 'interrupted' result for {len(errors)} dangling call(s) as "
                            f"event{'s' if len(seqs) > 1 else ''} {ranges.text(seqs)}")
    return out
