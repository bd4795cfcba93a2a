"""Turning events into rows and rows back into events.

The hot paths (append, the view) speak SQL to the sqlite3 connection directly: SQLAlchemy's
per-statement overhead is several times SQLite's own cost for a one-row insert.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Iterable, Sequence

from . import hidden, ranges
from .errors import MalformedEvent
from .events import EVENT_CLASSES, Condensation, CondensationNote, Event


def event_row(conversation_id: str, seq: int, event: Event) -> tuple[Any, ...]:
    """Values in ``EVENT_COLUMNS`` order."""
    # Field values live in __dict__; reading them there skips pydantic's __getattr__, which
    # raises (slowly) for the kinds that lack a field.
    fields = event.__dict__
    return (
        conversation_id,
        seq,
        fields["kind"],
        event.source,
        event.timestamp,
        event.id,
        fields.get("tool_call_id"),
        fields.get("tool_name"),
        fields.get("llm_response_id"),
        event.has_thinking,
        type(event).llm_visible,
        None,
        event.model_dump_json(exclude_none=True),
    )


def decode(kind: str, payload: str, seq: int) -> Event:
    cls = EVENT_CLASSES.get(kind)
    if cls is None:  # written by a newer version that knows more kinds
        from .events import event_from_json

        return event_from_json(payload).with_seq(seq)
    return cls.model_validate_json(payload).with_seq(seq)


EVENT_COLUMNS = (
    "conversation_id", "id", "kind", "source", "timestamp", "uid", "tool_call_id", "tool_name",
    "llm_response_id", "has_thinking", "llm_visible", "token_count", "payload",
)
INSERT_EVENT = (
    f"INSERT INTO event ({', '.join(EVENT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in EVENT_COLUMNS)})"
)
INSERT_CONDENSATION = (
    "INSERT INTO condensation (conversation_id, id, summary, summary_offset, strategy, reason, "
    "config, tokens_before, tokens_after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_RANGE = (
    "INSERT INTO forgotten_range (conversation_id, condensation_id, start_id, end_id) "
    "VALUES (?, ?, ?, ?)"
)


def _placeholders(n: int) -> str:
    return ", ".join("?" for _ in range(n))


def _validated_runs(cond: Condensation, seq: int) -> list[ranges.Run]:
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


def _seqs_of(db: sqlite3.Connection, conversation_id: str, seq: int, uids: Sequence[str]) -> list[int]:
    found: list[int] = []
    for i in range(0, len(uids), 500):
        chunk = list(uids[i : i + 500])
        found += [
            r[0]
            for r in db.execute(
                # "+id" keeps the planner on the uid index: a range on the primary key
                # would read the whole history.
                f"SELECT id FROM event WHERE conversation_id = ? AND +id < ? "
                f"AND uid IN ({_placeholders(len(chunk))})",
                (conversation_id, seq, *chunk),
            )
        ]
    return found


def record_condensation(db: sqlite3.Connection, conversation_id: str, seq: int, cond: Condensation) -> None:
    """Write the condensation row, its forgotten ranges and the hidden runs it changes, for a
    Condensation stored at ``seq``.

    External ids that name no stored event (such as the SDK's ``<id>-summary``) are ignored,
    as the SDK ignores them.
    """
    runs = _validated_runs(cond, seq)
    if cond.forgotten_event_ids:
        runs += ranges.runs_of(_seqs_of(db, conversation_id, seq, cond.forgotten_event_ids))
    runs = ranges.merge(runs)
    note = cond.note or CondensationNote()
    db.execute(
        INSERT_CONDENSATION,
        (
            conversation_id,
            seq,
            cond.summary,
            cond.summary_offset,
            note.strategy,
            note.reason,
            json.dumps(note.config) if note.config is not None else None,
            note.tokens_before,
            note.tokens_after,
        ),
    )
    db.executemany(INSERT_RANGE, [(conversation_id, seq, s, e) for s, e in runs])
    hidden.apply(db, conversation_id, seq, runs)


def latest_condensation_id(db: sqlite3.Connection, conversation_id: str) -> int | None:
    row = db.execute(
        "SELECT MAX(id) FROM condensation WHERE conversation_id = ?", (conversation_id,)
    ).fetchone()
    return row[0]


def duplicate_uid(
    db: sqlite3.Connection, conversation_id: str, events: Iterable[Event], before: int | None = None
) -> str | None:
    """The first external id in ``events`` that repeats within them or is already stored.

    ``before``: only events with smaller ids count as stored. A failed ``executemany`` leaves
    the batch's earlier rows in the open transaction; they must not be taken for old ones.
    """
    seen: set[str] = set()
    uids = []
    for e in events:
        if e.id in seen:
            return e.id
        seen.add(e.id)
        uids.append(e.id)
    for i in range(0, len(uids), 500):
        chunk = uids[i : i + 500]
        hit = db.execute(
            f"SELECT uid FROM event WHERE conversation_id = ? AND +id < ? "
            f"AND uid IN ({_placeholders(len(chunk))}) LIMIT 1",
            (conversation_id, 2**62 if before is None else before, *chunk),
        ).fetchone()
        if hit is not None:
            return hit[0]
    return None
