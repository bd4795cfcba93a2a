"""doctor: check a database, and with --fix repair what can be repaired, in one transaction.

Checks: SQLite's integrity_check and foreign_key_check; per conversation, ids 0..n-1 without
gaps; tool calls and results paired by tool_call_id over the whole history (a call without
a result, a result without a call, a call answered twice); every Condensation event has its
condensation row, and its forgotten ranges when it forgets something; no ranges without a
condensation; each condensation's ``hidden`` equals the union of the ranges so far.

Repairs (--fix): a synthetic AgentErrorEvent "interrupted" result appended for each call that
has no result anywhere; missing condensation rows and ranges rebuilt from the event's JSON;
stray ranges deleted; ``hidden`` recomputed. Id gaps, orphan or repeated results and a
damaged file are reported only. Run --fix on a conversation no agent is running: a call the
agent is still executing would look unanswered.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any

import click

from .. import ranges
from ..events import OBSERVATION_KINDS
from . import output_format
from .opening import open_readonly, open_store
from .output import echo_json, id_runs

_RESULT_KINDS = ", ".join(f"'{k}'" for k in sorted(OBSERVATION_KINDS))
INTERRUPTED = "interrupted: the tool call never got a result (added by openhands-memory doctor --fix)"


@dataclass
class Problem:
    conversation: str | None
    check: str
    detail: str
    fixable: bool = False
    ids: list[int] = field(default_factory=list)


@dataclass
class Plan:
    """What --fix would do for one conversation."""

    dangling: list[tuple[int, str, str]] = field(default_factory=list)  # (action id, call id, tool)
    missing_rows: list[int] = field(default_factory=list)  # Condensation events without a row
    missing_ranges: dict[int, list[ranges.Run]] = field(default_factory=dict)
    stray_ranges: list[int] = field(default_factory=list)  # condensation ids with ranges, no row
    hidden_wrong: bool = False

    def __bool__(self) -> bool:
        return bool(self.dangling or self.missing_rows or self.missing_ranges or self.stray_ranges or self.hidden_wrong)


def _expected_runs(db: sqlite3.Connection, cid: str, seq: int, payload: str) -> list[ranges.Run]:
    """The ranges a Condensation's JSON asks for (as the store records them)."""
    data = json.loads(payload)
    runs = [(s, e) for s, e in data.get("forgotten_ranges") or [] if s <= e and s >= 0 and e < seq]
    uids = [u for u in data.get("forgotten_event_ids") or [] if isinstance(u, str)]
    seqs: list[int] = []
    for i in range(0, len(uids), 500):
        chunk = uids[i : i + 500]
        seqs += [r[0] for r in db.execute(
            f"SELECT id FROM event WHERE conversation_id = ? AND id < ? AND uid IN ({', '.join('?' for _ in chunk)})",
            (cid, seq, *chunk),
        )]
    return ranges.merge(runs, ranges.runs_of(seqs))


def check_conversation(db: sqlite3.Connection, cid: str) -> tuple[list[Problem], Plan, int]:
    problems: list[Problem] = []
    plan = Plan()
    count, low, high = db.execute(
        "SELECT COUNT(*), MIN(id), MAX(id) FROM event WHERE conversation_id = ?", (cid,)
    ).fetchone()
    if count and (low != 0 or high != count - 1):
        gaps = db.execute(
            "SELECT id, nxt FROM (SELECT id, LEAD(id) OVER (ORDER BY id) AS nxt FROM event "
            "WHERE conversation_id = ?) WHERE nxt != id + 1 LIMIT 20",
            (cid,),
        ).fetchall()
        missing = [i for a, b in gaps for i in range(a + 1, min(b, a + 1001))]
        where = id_runs(missing) if missing else ""
        if low:
            where = f"0..{low - 1}" + (f", {where}" if where else "")
        problems.append(Problem(cid, "id gaps", f"ids should run 0..{count - 1} without gaps; missing: {where}"))
    # Tool calls and their results, by call id, over the whole history.
    for call_id, actions, results, first_action, tool, result_ids in db.execute(
        f"SELECT tool_call_id, SUM(kind = 'ActionEvent'), SUM(kind IN ({_RESULT_KINDS})), "
        f"MIN(CASE WHEN kind = 'ActionEvent' THEN id END), MAX(tool_name), "
        f"GROUP_CONCAT(CASE WHEN kind IN ({_RESULT_KINDS}) THEN id END) "
        f"FROM event WHERE conversation_id = ? AND tool_call_id IS NOT NULL GROUP BY tool_call_id "
        f"HAVING SUM(kind = 'ActionEvent') != 1 OR SUM(kind IN ({_RESULT_KINDS})) != 1 ORDER BY MIN(id)",
        (cid,),
    ):
        rids = [int(x) for x in (result_ids or "").split(",") if x]
        if actions and not results:
            plan.dangling.append((first_action, call_id, tool or ""))
            problems.append(Problem(cid, "dangling tool call",
                                    f"action {first_action} ({tool}, {call_id}) has no result", True, [first_action]))
        elif results and not actions:
            problems.append(Problem(cid, "orphan result",
                                    f"result {id_runs(rids)} answers {call_id}, which no action made", False, rids))
        if results > 1:
            problems.append(Problem(cid, "duplicated result",
                                    f"tool call {call_id} has {results} results: {id_runs(rids)}", False, rids))
        if actions > 1:
            problems.append(Problem(cid, "duplicated call id",
                                    f"{actions} actions share tool call id {call_id}", False))
    # Condensations, their rows and ranges.
    rows = {r[0]: r[1] for r in db.execute("SELECT id, hidden FROM condensation WHERE conversation_id = ?", (cid,))}
    recorded: dict[int, list[ranges.Run]] = {}
    for cond, s, e in db.execute(
        "SELECT condensation_id, start_id, end_id FROM forgotten_range WHERE conversation_id = ? "
        "ORDER BY condensation_id, start_id", (cid,),
    ):
        recorded.setdefault(cond, []).append((s, e))
    events = db.execute(
        "SELECT id, payload FROM event WHERE conversation_id = ? AND kind = 'Condensation' ORDER BY id", (cid,)
    ).fetchall()
    kinds = dict(db.execute(
        f"SELECT id, kind FROM event WHERE conversation_id = ? AND id IN ({', '.join(str(i) for i in rows) or 'NULL'})",
        (cid,),
    ).fetchall())
    for seq in sorted(rows):
        if kinds.get(seq) != "Condensation":
            problems.append(Problem(cid, "condensation row without event",
                                    f"condensation row {seq} belongs to a {kinds.get(seq, 'missing')} event"))
    for seq, payload in events:
        expected = _expected_runs(db, cid, seq, payload)
        if seq not in rows:
            plan.missing_rows.append(seq)
            problems.append(Problem(cid, "condensation without row",
                                    f"Condensation {seq} has no condensation row", True, [seq]))
        elif expected and not recorded.get(seq):
            plan.missing_ranges[seq] = expected
            problems.append(Problem(cid, "condensation without ranges",
                                    f"Condensation {seq} forgets {ranges.count(expected)} events but no range "
                                    "records it", True, [seq]))
    for cond in sorted(set(recorded) - set(rows)):
        plan.stray_ranges.append(cond)
        problems.append(Problem(cid, "ranges without condensation",
                                f"forgotten ranges point at condensation {cond}, which does not exist", True, [cond]))
    hidden: list[ranges.Run] = []
    for seq in sorted(rows):
        hidden = ranges.merge(hidden, recorded.get(seq, []))
        stored = [tuple(r) for r in json.loads(rows[seq])]
        if stored != hidden and not plan.hidden_wrong:
            plan.hidden_wrong = True
            problems.append(Problem(cid, "hidden out of date",
                                    f"condensation {seq}'s hidden runs differ from the union of the ranges so far", True, [seq]))
    return problems, plan, count


def check(db: sqlite3.Connection) -> tuple[list[Problem], dict[str, Plan], int, int]:
    problems: list[Problem] = []
    integrity = [r[0] for r in db.execute("PRAGMA integrity_check")]
    if integrity != ["ok"]:
        problems.append(Problem(None, "integrity", "; ".join(integrity[:5])))
    broken = db.execute("PRAGMA foreign_key_check").fetchall()
    if broken:
        tables = sorted({r[0] for r in broken})
        problems.append(Problem(None, "foreign keys",
                                f"{len(broken)} row(s) point at missing rows (tables: {', '.join(tables)})"))
    plans: dict[str, Plan] = {}
    total = 0
    cids = [r[0] for r in db.execute("SELECT id FROM conversation ORDER BY created_at, id")]
    for cid in cids:
        found, plan, n = check_conversation(db, cid)
        problems += found
        total += n
        if plan:
            plans[cid] = plan
    return problems, plans, len(cids), total


def repair(store: Any, plans: dict[str, Plan]) -> list[str]:
    """Carry out every plan in one write transaction; what was done, for the report."""
    from .. import rows as row_sql
    from ..events import AgentErrorEvent, event_from_json
    from ..store import Conversation

    done: list[str] = []
    with store.writing() as db:
        for cid, plan in plans.items():
            for cond in plan.stray_ranges:
                db.execute("DELETE FROM forgotten_range WHERE conversation_id = ? AND condensation_id = ?", (cid, cond))
                done.append(f"{cid}: deleted the ranges of missing condensation {cond}")
            for seq in plan.missing_rows:
                payload = db.execute("SELECT payload FROM event WHERE conversation_id = ? AND id = ?", (cid, seq)).fetchone()[0]
                row_sql.record_condensation(db, cid, seq, event_from_json(payload))  # type: ignore[arg-type]
                done.append(f"{cid}: rebuilt the condensation row of event {seq} from its JSON")
            for seq, runs in plan.missing_ranges.items():
                db.executemany(row_sql.INSERT_RANGE, [(cid, seq, s, e) for s, e in runs])
                done.append(f"{cid}: recorded the ranges condensation {seq} forgets ({ranges.count(runs)} events)")
            if plan.missing_rows or plan.missing_ranges or plan.stray_ranges or plan.hidden_wrong:
                hidden: list[ranges.Run] = []
                changed = 0
                conds = [r[0] for r in db.execute(
                    "SELECT id FROM condensation WHERE conversation_id = ? ORDER BY id", (cid,))]
                for seq in conds:
                    runs = db.execute(
                        "SELECT start_id, end_id FROM forgotten_range WHERE conversation_id = ? AND condensation_id = ?",
                        (cid, seq)).fetchall()
                    hidden = ranges.merge(hidden, runs)
                    changed += db.execute(
                        "UPDATE condensation SET hidden = ? WHERE conversation_id = ? AND id = ? AND hidden != ?",
                        (json.dumps([list(r) for r in hidden]), cid, seq, json.dumps([list(r) for r in hidden])),
                    ).rowcount
                if changed:
                    done.append(f"{cid}: recomputed hidden runs of {changed} condensation(s)")
            if plan.dangling:
                errors = [AgentErrorEvent(tool_name=tool or "unknown", tool_call_id=call, error=INTERRUPTED)
                          for _, call, tool in plan.dangling]
                seqs = Conversation(store, cid).insert(db, errors)
                done.append(f"{cid}: appended an 'interrupted' result for {len(errors)} dangling call(s) as "
                            f"event{'s' if len(seqs) > 1 else ''} {id_runs(seqs)}")
    return done


@click.command()
@click.argument("db")
@click.option("--fix", is_flag=True, help="Repair what can be repaired, in one transaction.")
@output_format("text", "json", default="text")
def doctor(db: str, fix: bool, fmt: str) -> None:
    """Check DB: the file, id gaps, tool calls and results, condensation bookkeeping.

    Exit status 0 when healthy, 1 when problems remain.

    \b
    Example:
      openhands-memory doctor agent.db
      openhands-memory doctor agent.db --fix
    """
    conn = open_readonly(db)
    try:
        problems, plans, n_convs, n_events = check(conn)
    finally:
        conn.close()
    done: list[str] = []
    if fix and plans:
        store = open_store(db)
        try:
            done = repair(store, plans)
            problems, plans, n_convs, n_events = check(store.db)
        finally:
            store.close()
    if fmt == "json":
        echo_json({"healthy": not problems, "conversations": n_convs, "events": n_events,
                   "fixed": done, "problems": [asdict(p) for p in problems]})
    else:
        for line in done:
            click.echo(f"fixed: {line}")
        for p in problems:
            where = f"{p.conversation}: " if p.conversation is not None else ""
            mark = "  [--fix repairs it]" if p.fixable else ""
            click.echo(f"problem: {where}{p.check}: {p.detail}{mark}")
        checked = f"{n_convs} conversation{'s' if n_convs != 1 else ''}, {n_events:,} events checked"
        if not problems:
            click.echo(click.style(f"{db} is healthy", fg="green") + f" ({checked})")
        else:
            fixable = sum(p.fixable for p in problems)
            hint = f"; {fixable} can be repaired: run `openhands-memory doctor {db} --fix`" if fixable and not fix else ""
            click.echo(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} ({checked}){hint}")
    if problems:
        raise SystemExit(1)
