"""History trees (revision 0006): parents, HEAD, and the path from a leaf to the root.

The OpenHands SDK keeps a conversation as a tree. Every event names its parent (the leaf
when it was appended), HEAD can be moved back (``navigate_to``) and the next event then
starts a branch; abandoned branches stay stored, and the agent sees the path from HEAD to
the root. Here:

* ``event.parent_seq`` is set only where the parent is not the row before (a branch's first
  event; -1 for a new root): the SDK's rule for an event without ``parent_id`` (its parent
  is the previous event) is the default, so a linear history stores nothing. Rows the SDK
  never makes HEAD (``ConversationStateUpdateEvent``) may sit between an event and its
  parent; when they chain to that parent themselves, the event still counts as a
  continuation, and they are marked ``detached``: the path's interval carries them (so a
  path stays a few intervals), but the view reads past them, as a tool loop runs across
  them on the SDK's path.
* A branch is a run of consecutive ids, so a path is a few id intervals, found by one
  statement that seeks ``ix_event_jump`` once per branch on it (``Session.path``).
* ``conversation.head`` is HEAD: NULL while it is the newest row (every linear history and
  any branch being appended to), -1 for an empty HEAD, else an id. Appending a node makes it
  HEAD again, as the SDK's ``append_event`` does.
* A Condensation applies on the paths it lies on: the hidden runs in force on a path are
  those written by a condensation on it and not merged away by one on it
  (``Session.hidden_on_path``). A branch that starts inside a forgotten range sees what its
  own path forgot and nothing else: never a sibling's summary or forgotten range.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import Mapping, Sequence

from .. import ranges
from ..errors import EventNotFound, UnknownParent
from ..events import Event
from ..ranges import Run
from .session import END, NON_NODE_KINDS, Session

ROOT_PARENT_ID = "__root__"  # the SDK's parent_id of a new root (after navigate_to(None))
EMPTY = -1  # conversation.head of an empty HEAD; event.parent_seq of a new root


def is_node(kind: str) -> bool:
    return kind not in NON_NODE_KINDS


def is_prefix(path: Sequence[Run]) -> bool:
    """Whether a path is every id from 0 to its leaf (no branch on it): the linear case."""
    return len(path) == 1 and path[0][0] == 0


def subtract(path: Sequence[Run], hidden: Sequence[Run]) -> list[Run]:
    """The parts of ``path`` that no run of ``hidden`` (sorted, disjoint) covers."""
    return [run for s, e in path for run in ranges.complement(hidden, e, start=s)]


def edge_quads(path: Sequence[Run], visible: Sequence[Run]) -> list[tuple[int, int, int | None, int | None]]:
    """For each visible interval (s, e): the row before s on the path and the row after e,
    each only when it is hidden (None when it is visible, so the intervals are neighbours in
    the view, or when there is none). The view asks SQL about loops across hidden edges."""
    before = {path[i][0]: path[i - 1][1] for i in range(1, len(path))}
    after = {path[i][1]: path[i + 1][0] for i in range(len(path) - 1)}
    starts = [s for s, _ in visible]

    def shown(seq: int) -> bool:
        k = bisect.bisect_right(starts, seq) - 1
        return k >= 0 and visible[k][1] >= seq

    first, leaf = (path[0][0], path[-1][1]) if path else (0, -1)
    out = []
    for s, e in visible:
        pred = before.get(s, s - 1 if s > first else None)
        succ = after.get(e, e + 1 if e < leaf else None)
        out.append((s, e, None if pred is None or shown(pred) else pred, None if succ is None or shown(succ) else succ))
    return out


def normalized_head(db: Session, cid: str, seq: int | None) -> int | None:
    """What ``conversation.head`` stores for HEAD at ``seq`` (None: the newest row; -1:
    empty): None when ``seq`` is a node and the newest row, or only non-nodes chained to it
    follow (then the newest node, which ``leaf`` resolves None to, is ``seq``)."""
    if seq is None or seq == EMPTY:
        return seq
    last = db.last_seq(cid)
    if seq > last or seq < 0:
        raise EventNotFound(cid, seq)
    if db.last_node(cid, seq, seq) != seq:  # HEAD on a non-node (the SDK allows it): say so
        return seq
    return None if seq == last or db.chains_between(cid, seq + 1, last) else seq


def leaf(db: Session, cid: str) -> int | None:
    """HEAD resolved: the event the next one will follow (None: empty, or no events)."""
    head = db.head(cid)
    if head == EMPTY:
        return None
    if head is not None:
        return head
    last = db.last_seq(cid)
    return None if last < 0 else db.last_node(cid, 0, last)


@dataclass
class Parents:
    """The parents of a transaction's appended rows (see ``assign``): the rows whose parent is
    not the row before them, and HEAD once they are stored."""

    jumps: list[tuple[int, int]]
    head: int | None
    head_changed: bool
    detached: list[int]  # non-node rows a new row skipped to name an earlier parent


def assign(db: Session, cid: str, first: int, events: Sequence[Event], head: int | None,
           known: Mapping[str, int] | None = None) -> Parents:
    """Give the events about to be stored at ``first``, ``first + 1``, ... their parents.

    An event that names one (the SDK's ``parent_id``) gets it. One that does not follows the
    event HEAD was moved to, if it was, else the row before it (the SDK's rule for an event
    without ``parent_id``). Appending a node makes it HEAD (the newest row: None). A parent
    the conversation does not hold is refused (``UnknownParent``). ``known``: every external
    id of the conversation's rows with its id, when the caller keeps them (a bulk load, while
    the external ids' index is deferred): read there instead of in SQL."""
    if head is None and _follows(db, cid, first, events, known):
        # Each row follows the row before it and HEAD stays the newest row: nothing to give
        # (a load's common case, where the loop below costs more than writing the rows).
        return Parents([], None, False, [])
    jumps: list[tuple[int, int]] = []
    detached: list[int] = []
    placed: dict[str, int] = {}
    chained: list[bool] = []  # per new row: a non-node whose parent is the row before it
    start_head = head
    missing = {e.parent_id for e in events if e.parent_id not in (None, ROOT_PARENT_ID)} - {e.id for e in events}
    if not missing:
        stored: Mapping[str, int] = {}
    elif known is None:
        stored = dict((uid, seq) for seq, uid in db.seqs_of(cid, first, sorted(missing)))
    else:
        stored = {uid: known[uid] for uid in missing if known.get(uid, first) < first}
    for k, e in enumerate(events):
        seq = first + k
        parent: int | None
        if e.parent_id is None:
            parent = head
        elif e.parent_id == ROOT_PARENT_ID:
            parent = EMPTY
        else:
            found = placed.get(e.parent_id, stored.get(e.parent_id))
            if found is None:
                raise UnknownParent(cid, e.id, e.parent_id)
            parent = found
        if parent is not None and (parent == seq - 1 or (parent == EMPTY and seq == 0)):
            parent = None
        elif parent is not None and parent >= 0 and _chains(db, cid, first, chained, parent + 1, seq - 1):
            detached += range(parent + 1, seq)  # carried in the interval, off the path
            parent = None
        if parent is not None:
            jumps.append((seq, parent))
        chained.append(parent is None and not is_node(e.kind))  # type: ignore[attr-defined]
        placed[e.id] = seq
        if is_node(e.kind):  # type: ignore[attr-defined]
            head = None
    return Parents(jumps, head, head != start_head, sorted(set(detached)))


def _follows(db: Session, cid: str, first: int, events: Sequence[Event], known: Mapping[str, int] | None) -> bool:
    """Whether each event names no parent or the row just before it (the SDK names it)."""
    if not events:
        return True
    named = [e.parent_id for e in events[1:]]
    # The SDK names the event before, our own JSON Lines none: each compared in C first.
    if named != [e.id for e in events[:-1]] and named.count(None) != len(named) and \
            not all(p is None or p == before.id for before, p in zip(events, named)):
        return False
    parent = events[0].parent_id
    if parent is None:
        return True
    if parent == ROOT_PARENT_ID:
        return first == 0
    if known is not None:
        return known.get(parent) == first - 1
    return [seq for seq, _ in db.seqs_of(cid, first, [parent])] == [first - 1]


def _chains(db: Session, cid: str, first: int, chained: list[bool], lo: int, hi: int) -> bool:
    """``Session.chains_between`` over stored rows and the rows of this batch (from ``first``)."""
    if lo > hi:
        return True
    if hi >= first and not all(chained[max(lo - first, 0) : hi - first + 1]):
        return False
    return lo >= first or db.chains_between(cid, lo, min(hi, first - 1))


def store(db: Session, cid: str, first: int, events: Sequence[Event], head: int | None,
          known: Mapping[str, int] | None = None) -> Parents:
    """``assign``, then write the parents and HEAD, inside the caller's transaction (the rows
    must be inserted already)."""
    parents = assign(db, cid, first, events, head, known)
    if parents.jumps:
        db.set_parents(cid, parents.jumps)
    if parents.detached:
        db.set_detached(cid, parents.detached)
    if parents.head_changed:
        db.set_head(cid, parents.head)
    return parents


def _state(text: str | None) -> dict | None:
    """A ``base_state.json`` as an object, or None when it is not one (HEAD is then left
    alone: the SDK's state is the SDK's to judge)."""
    try:
        state = json.loads(text) if text else None
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def head_from_base_state(db: Session, cid: str, text: str | None) -> bool:
    """Set HEAD from the SDK's ``base_state.json`` (``leaf_event_id``, ``head_is_empty``),
    inside the caller's transaction; whether it changed. A leaf this conversation does not
    hold (yet) changes nothing: the SDK writes an event before the state that names it."""
    state = _state(text)
    if state is None:
        return False
    if state.get("head_is_empty"):
        want: int | None = EMPTY
    else:
        uid = state.get("leaf_event_id")
        if not isinstance(uid, str):
            want = None
        else:
            found = db.seqs_of(cid, END, [uid])
            if not found:
                return False
            want = normalized_head(db, cid, found[0][0])
    if db.head(cid) == want:
        return False
    db.set_head(cid, want)
    return True


def base_state_with_head(text: str, leaf_uid: str | None) -> str:
    """The SDK's ``base_state.json`` with HEAD moved to the event ``leaf_uid`` (None: an empty
    HEAD), as ``navigate_to`` leaves it; other fields as they were."""
    state = _state(text)
    if state is None:
        return text
    state["leaf_event_id"] = leaf_uid
    state["head_is_empty"] = leaf_uid is None
    return json.dumps(state, ensure_ascii=False, separators=(",", ":"))


def shifted_condensation(payload: str, moves: Sequence[tuple[int, int, int]]) -> str | None:
    """A Condensation's JSON with the ids of its ``forgotten_ranges`` moved as a fork moves
    rows (``moves``: start, end, shift per interval); None when it names no ranges. A range
    is cut per interval and each part moved by its own shift: a strategy's range may span a
    jump of the path, and the ids of other branches inside it name no row of the fork."""
    data = json.loads(payload)
    runs = data.get("forgotten_ranges")
    if not runs:
        return None
    data["forgotten_ranges"] = [list(run) for run in ranges.moved([(a, b) for a, b in runs], moves)]
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def visible_now(db: Session, cid: str) -> list[Run]:
    """The ids of HEAD's path that no condensation on it hides (what the view reads)."""
    path = db.path(cid)
    return subtract(path, hidden_in_force(db, cid, path)) if path else []


def hidden_in_force(db: Session, cid: str, path: Sequence[Run]) -> list[Run]:
    """The ids hidden on a path, as sorted disjoint runs."""
    return ranges.merge((s, e) for _, s, e, _ in db.hidden_on_path(cid, path))


@dataclass(frozen=True)
class Branch:
    """One leaf of a conversation's tree and the path to it."""

    leaf: int
    path: list[Run]  # oldest first
    fork: int | None  # the nearest event on its path with two children or more (None: none)
    head: bool

    @property
    def length(self) -> int:
        return ranges.count(self.path)


def branches(db: Session, cid: str) -> list[Branch]:
    """Every leaf of the tree (a node no node follows), oldest first, with its path and its
    fork point: the nearest event before it on its path that has two children or more."""
    last = db.last_seq(cid)
    if last < 0:
        return []
    jumps = db.jumps(cid)
    starts = [0] + [j for j, _ in jumps]
    jumped = {j for j, _ in jumps}
    children: dict[int, int] = {}
    for _, p in jumps:
        if p >= 0:
            children[p] = children.get(p, 0) + 1
    forks = sorted((p for p, n in children.items() if n + (p + 1 <= last and p + 1 not in jumped) >= 2),
                   reverse=True)
    current = leaf(db, cid)
    out: list[Branch] = []
    for k, start in enumerate(starts):
        end = (starts[k + 1] - 1) if k + 1 < len(starts) else last
        if start > end:
            continue
        tip = db.last_node(cid, start, end)
        if tip is None or tip in children:
            continue
        path = db.path(cid, tip)
        fork = next((p for p in forks if p < tip and any(s <= p <= e for s, e in path)), None)
        out.append(Branch(tip, path, fork, tip == current))
    return out
