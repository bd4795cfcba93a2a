"""The doctor: checks a database, and repairs what can be repaired, in one transaction.

Two depths:

* **quick** (the default) checks what an agent resuming a conversation relies on, at a cost
  that follows the tail: ids 0..n-1 without gaps (from the primary key), tool calls and
  results paired since the newest condensation, the newest condensation's row and ranges, and
  the live hidden runs equal to what its ranges make of the runs before it.
* **full** checks everything, over the whole history: SQLite's ``integrity_check`` and
  ``foreign_key_check``, every tool call, every condensation's row and ranges against its
  event's JSON, and every hidden run against a replay of all forgotten ranges.

Repairs (``repair``): a synthetic AgentErrorEvent "interrupted" result appended for each call
without a result anywhere; missing condensation rows and ranges rebuilt from the event's
JSON; stray ranges deleted; hidden runs recomputed. Id gaps, orphan or repeated results and a
damaged file are reported only. Repair a conversation no agent is running: a call the agent
is still executing would look unanswered.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from .. import ranges
from ..storage import hidden
from ..storage.session import Session

if TYPE_CHECKING:
    from ..conversation import EventStore

INTERRUPTED = "interrupted: the tool call never got a result (added by openhands-memory doctor --fix)"

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
    hidden_wrong: bool = False

    def __bool__(self) -> bool:
        return bool(self.dangling or self.missing_rows or self.missing_ranges or self.stray_ranges or self.hidden_wrong)


@dataclass
class Report:
    full: bool
    conversations: int = 0
    events: int = 0
    problems: list[Problem] = field(default_factory=list)
    plans: dict[str, Plan] = field(default_factory=dict)
    fixed: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"healthy": self.healthy, "mode": "full" if self.full else "quick",
                "conversations": self.conversations, "events": self.events, "fixed": self.fixed,
                "problems": [asdict(p) for p in self.problems]}


def expected_runs(db: Session, cid: str, seq: int, payload: str) -> list[ranges.Run]:
    """The ranges a Condensation's JSON asks for (as the store records them)."""
    data = json.loads(payload)
    runs = [(s, e) for s, e in data.get("forgotten_ranges") or [] if s <= e and s >= 0 and e < seq]
    uids = [u for u in data.get("forgotten_event_ids") or [] if isinstance(u, str)]
    return ranges.merge(runs, ranges.runs_of(i for i, _ in db.ids_of(cid, seq, uids)))


def _ids(db: Session, cid: str, problems: list[Problem]) -> int:
    count, low, high = db.event_span(cid)
    if count and (low != 0 or high != count - 1):
        missing = [i for a, b in db.id_gaps(cid) for i in range(a + 1, min(b, a + 1001))]
        where = ranges.text(missing) if missing else ""
        if low:
            where = f"0..{low - 1}" + (f", {where}" if where else "")
        problems.append(Problem(cid, "id gaps", f"ids should run 0..{count - 1} without gaps; missing: {where}"))
    return count


def _calls(db: Session, cid: str, after: int, problems: list[Problem], plan: Plan) -> None:
    for call_id, actions, results, first_action, tool in db.unpaired_calls(cid, after):
        rids = db.result_ids(cid, call_id) if results else []
        if actions and not results:
            plan.dangling.append((first_action, call_id, tool or ""))
            problems.append(Problem(cid, "dangling tool call",
                                    f"action {first_action} ({tool}, {call_id}) has no result", True, [first_action]))
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
            plan.missing_ranges[seq] = expected
            problems.append(Problem(cid, "condensation without ranges",
                                    f"Condensation {seq} forgets {ranges.count(expected)} events but no range "
                                    "records it", True, [seq]))
    if after < 0:
        for cond in sorted(db.range_owners(cid) - rows):
            plan.stray_ranges.append(cond)
            problems.append(Problem(cid, "ranges without condensation",
                                    f"forgotten ranges point at condensation {cond}, which does not exist", True, [cond]))


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


def check_conversation(db: Session, cid: str, full: bool) -> tuple[list[Problem], Plan, int]:
    problems: list[Problem] = []
    plan = Plan()
    count = _ids(db, cid, problems)
    if full:
        _calls(db, cid, -1, problems, plan)
        _condensations(db, cid, -1, problems, plan)
        _hidden_full(db, cid, problems, plan)
        return problems, plan, count
    latest = db.latest_condensation(cid)
    if latest is None:
        _calls(db, cid, -1, problems, plan)
        return problems, plan, count
    previous = db.latest_condensation(cid, latest - 1)
    _calls(db, cid, latest, problems, plan)
    _condensations(db, cid, latest - 1, problems, plan)
    if not plan.missing_rows:
        _hidden_latest(db, cid, latest, previous, problems, plan)
    return problems, plan, count


def check(store: "EventStore", *, full: bool = False, progress: Progress | None = None) -> Report:
    """Check every conversation (quick, or ``full``); see the module's docstring."""
    report = Report(full)
    with store.reading() as db:
        report.problems += [Problem(None, p.split(":", 1)[0], p.split(": ", 1)[-1]) for p in db.file_problems(full)]
        cids = [c for c, _, _ in db.conversations()]
    for k, cid in enumerate(cids):
        # One snapshot per conversation: a long check never holds one over the whole file.
        with store.reading() as db:
            found, plan, n = check_conversation(db, cid, full)
        report.problems += found
        report.events += n
        if plan:
            report.plans[cid] = plan
        if progress is not None:
            progress(k + 1, len(cids))
    report.conversations = len(cids)
    return report


def repair(store: "EventStore", report: Report) -> list[str]:
    """Carry out every plan of ``report`` in one write transaction; what was done."""
    from ..events import AgentErrorEvent, event_from_json
    from ..storage import condensations
    from ..conversation import Conversation

    done: list[str] = []
    with store.writing() as db:
        for cid, plan in report.plans.items():
            for cond in plan.stray_ranges:
                db.delete_ranges(cid, cond)
                done.append(f"{cid}: deleted the ranges of missing condensation {cond}")
            for seq in plan.missing_rows:
                payload = db.event(cid, seq)[1]  # type: ignore[index]
                condensations.record(db, cid, seq, event_from_json(payload))  # type: ignore[arg-type]
                done.append(f"{cid}: rebuilt the condensation row of event {seq} from its JSON")
            for seq, runs in plan.missing_ranges.items():
                db.insert_ranges(cid, seq, runs)
                done.append(f"{cid}: recorded the ranges condensation {seq} forgets ({ranges.count(runs)} events)")
            if plan.missing_rows or plan.missing_ranges or plan.stray_ranges or plan.hidden_wrong:
                changed = hidden.rebuild(db, cid)
                if changed:
                    done.append(f"{cid}: recomputed the hidden runs ({changed} row(s) changed)")
            if plan.dangling:
                errors = [AgentErrorEvent(tool_name=tool or "unknown", tool_call_id=call, error=INTERRUPTED)
                          for _, call, tool in plan.dangling]
                with Conversation(store, cid).writing(within=db) as w:
                    seqs = w.append(errors)
                done.append(f"{cid}: appended an 'interrupted' result for {len(errors)} dangling call(s) as "
                            f"event{'s' if len(seqs) > 1 else ''} {ranges.text(seqs)}")
    return done
