"""What an OpenHands agent server sends through its webhooks, stored as a conversation.

The agent server (``openhands-agent-server``, 1.58) POSTs, for each webhook it is given
(``OH_WEBHOOKS_0_BASE_URL``):

* ``{base}/events/{conversation_id.hex}``: a JSON list of events, each
  ``event.model_dump(mode="json")``, a few at a time (``event_buffer_size``), retried until
  answered 2xx (``num_retries``), the oldest dropped when its queue overflows;
* ``{base}/conversations``: the conversation's info (``ConversationInfo``: title, status,
  agent, stats) when a conversation starts, pauses, changes or stops.

Here each batch is one transaction (``ingest_events``), so that answering after the commit
makes the sender's retry the only redelivery:

* *Idempotent by the SDK's event id* (the ``uid`` column): an event stored already, or
  waiting, is skipped; a batch delivered twice stores nothing twice.
* *Parents kept.* Each event keeps its ``parent_id`` (the writer gives it its parent as the
  SDK folder's import does: ``storage/tree.py``). The tree stores a parent before its
  children, so an event whose parent has not arrived (its batch was dropped or is still being
  retried) is neither refused nor lost: it waits in ``ingest_pending`` as it came, and is
  stored, in arrival order, in the transaction that stores its parent (a later batch, or
  ``sync`` filling the gap).
* *Live state is not history.* The agent server also pushes ``ConversationStateUpdateEvent``s
  that its own event log never holds (a subscriber's first snapshot, the final state): those
  carry no ``parent_id``, while every event the SDK persists has one but the very first. They
  are not stored as events; what they say (status, stats, HEAD) goes to the conversation's
  info (``metadata["agent_server"]``) and HEAD (``leaf_event_id``, as ``base_state.json``
  names it for ``DatabaseFileStore``).
* *Each event's JSON as it came* (``model_dump(mode="json")``, compact) is its payload.

A malformed batch, an unknown kind, an event larger than the library stores: one
``IngestRefused`` with its reason, and nothing of the batch stored.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Iterable

from pydantic_core import to_json

from ..errors import IngestRefused, OpenHandsMemoryError, shown
from ..events import EVENT_CLASSES, Event
from ..storage import END, tree
from ..storage.codec import MAX_EVENT_BYTES
from .common import ImportFailed, load_json, parse_event_dict

if TYPE_CHECKING:
    from ..conversation import EventStore, Writer
    from ..storage import Session

#: The largest request body taken: one event as large as the library stores, in its list.
MAX_BODY_BYTES = MAX_EVENT_BYTES + (64 << 10)
#: The header the agent server sends its session key in (its ``session_api_keys[0]``), and
#: its REST API reads it from.
KEY_HEADER = "X-Session-API-Key"
#: Who made a conversation the agent server's webhooks created (its metadata's ``created_by``).
CREATED_BY = "openhands-agent-server"
#: The key of a conversation's metadata that holds what the agent server says of it.
INFO_KEY = "agent_server"
# Statuses only the conversations webhook reports (the agent server sets it as it deletes).
OUT_OF_STREAM = frozenset({"deleting"})
_STATE_KIND = "ConversationStateUpdateEvent"


@dataclass
class Incoming:
    """One event of a batch: the event, its JSON as stored, and whether it is live state."""

    event: Event
    payload: str
    live: bool


@dataclass
class IngestResult:
    """What one batch did."""

    conversation_id: str
    received: int = 0  # events in the batch, live state included
    stored: int = 0  # rows written (the batch's and those that waited for it)
    duplicates: int = 0  # stored or waiting already
    waiting: int = 0  # kept in ingest_pending: their parent has not arrived
    released: int = 0  # stored now, having waited for a parent this batch brought

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def conversation_key(hex_id: str) -> str:
    """The conversation's id here: the agent server's UUID in its usual spelling (as
    ``DatabaseFileStore`` names it), from the hex the webhook's path holds."""
    try:
        return str(uuid.UUID(hex=hex_id))
    except ValueError:
        raise IngestRefused("bad_conversation", f"{shown(hex_id)} is not a conversation id (a UUID's hex)") from None


def parse_batch(body: bytes, max_event_bytes: int = MAX_EVENT_BYTES) -> list[Incoming]:
    """The events a webhook's body holds, in order; ``IngestRefused`` for the first one that
    cannot be stored (nothing is stored of such a batch)."""
    if len(body) > max_event_bytes + (64 << 10):
        raise IngestRefused("too_large", f"the batch is {len(body):,} bytes, more than the "
                                         f"{max_event_bytes:,} bytes an event may hold")
    try:
        data = load_json(body, "the batch")
    except ImportFailed as e:
        raise IngestRefused("malformed", str(e)) from None
    if not isinstance(data, list):
        raise IngestRefused("malformed", f"the batch is a JSON {type(data).__name__}, not a list of events")
    return [_incoming(k, item, max_event_bytes) for k, item in enumerate(data)]


def _incoming(k: int, item: Any, limit: int) -> Incoming:
    where = f"event {k} of the batch"
    if not isinstance(item, dict):
        raise IngestRefused("malformed", f"{where} is a JSON {type(item).__name__}, not an object")
    kind = item.get("kind")
    if isinstance(kind, str) and kind not in EVENT_CLASSES:
        raise IngestRefused("unknown_kind", f"{where} is of kind {shown(kind)}, which this library does not know")
    # Compact JSON by pydantic-core (the parser's own Rust, a tenth of json.dumps's time).
    raw = to_json(item)
    if len(raw) > limit:
        raise IngestRefused("too_large", f"{where} ({item.get('id')!r}) is more than the {limit:,} bytes "
                                         "an event may hold")
    try:
        event = parse_event_dict(item, where)
    except ImportFailed as e:
        raise IngestRefused("malformed", str(e)) from None
    live = event.kind == _STATE_KIND and event.parent_id is None  # type: ignore[attr-defined]
    return Incoming(event, raw.decode(), live)


def ingest_events(store: "EventStore", hex_id: str, body: bytes, *,
                  max_event_bytes: int = MAX_EVENT_BYTES) -> IngestResult:
    """Store one webhook batch of conversation ``hex_id`` in one transaction (see the module)."""
    cid = conversation_key(hex_id)
    batch = parse_batch(body, max_event_bytes)
    result = IngestResult(cid, received=len(batch))
    if not batch:
        return result
    from ..conversation import Conversation

    with Conversation(store, cid).writing() as w:
        _ensure(w.db, cid)
        _store_batch(w, cid, batch, result)
    return result


def _ensure(db: "Session", cid: str) -> None:
    if not db.conversation_exists(cid):
        db.insert_conversation(cid, datetime.now(UTC).isoformat(), {"created_by": CREATED_BY})


def _store_batch(w: "Writer", cid: str, batch: list[Incoming], result: IngestResult) -> None:
    db = w.db
    events = [x for x in batch if not x.live]
    uids = [x.event.id for x in events]
    seen = {uid for _, uid in db.seqs_of(cid, END, uids)} | db.pending_uids(cid, uids)
    named = {x.event.parent_id for x in events} - {None, tree.ROOT_PARENT_ID}  # type: ignore[attr-defined]
    present = {uid for _, uid in db.seqs_of(cid, END, sorted(named))} if named else set()
    ready: list[Incoming] = []
    held: list[Incoming] = []
    for item in events:
        e = item.event
        if e.id in seen:
            result.duplicates += 1
            continue
        seen.add(e.id)
        parent = e.parent_id  # type: ignore[attr-defined]
        if parent is None or parent == tree.ROOT_PARENT_ID or parent in present:
            ready.append(item)
            present.add(e.id)
        else:  # its parent is later in the batch, waiting, or not come yet
            held.append(item)
    if ready:
        w.append([x.event for x in ready], [x.payload for x in ready])
        result.stored += len(ready)
    if held:
        now = datetime.now(UTC).isoformat()
        db.put_pending(cid, [(x.event.id, x.event.parent_id, now, x.payload) for x in held])  # type: ignore[attr-defined]
    if ready:  # only a stored event can be the parent a waiting one lacks
        _release(w, cid, result)
    if held:
        result.waiting = len(db.pending_uids(cid, [x.event.id for x in held]))
    # Live state last, after every row it may name: HEAD only from a full state that no event
    # of the batch follows (an event appended after it made itself HEAD, as the SDK does).
    last_event = max((k for k, x in enumerate(batch) if not x.live), default=-1)
    for k, item in enumerate(batch):
        if item.live:
            _apply_state(w, cid, item, head=k > last_event)


def _release(w: "Writer", cid: str, result: IngestResult) -> None:
    """Store the waiting events whose parents are stored now, in arrival order, until none is
    (only their ids and parents are read to judge; the JSON only of those that go)."""
    db = w.db
    while rows := db.pending(cid):
        have = {uid for _, uid in db.seqs_of(cid, END, sorted({parent for _, parent in rows}))}
        go: list[str] = []
        for uid, parent in rows:
            if parent in have:
                go.append(uid)
                have.add(uid)
        if not go:
            return
        payloads = db.pending_payloads(cid, go)
        events = [parse_event_dict(json.loads(payloads[uid]), f"waiting event {uid}") for uid in go]
        w.append(events, [payloads[uid] for uid in go])
        db.drop_pending(cid, go)
        result.stored += len(go)
        result.released += len(go)


def _apply_state(w: "Writer", cid: str, item: Incoming, *, head: bool) -> None:
    """What a live state update says: the conversation's info, and HEAD (a full state, when
    ``head``)."""
    data = json.loads(item.payload)
    key, value = data.get("key"), data.get("value")
    # The stream is ordered: a status it brings is the newest, and says since when.
    at = data.get("timestamp") if isinstance(data.get("timestamp"), str) else None
    if key == "full_state" and isinstance(value, dict):
        if head and tree.head_from_base_state(w.db, cid, json.dumps(value)):
            w.branched = True
        _merge_info(w.db, cid, {**info_summary(value), "status_at": at})
    elif key == "execution_status" and isinstance(value, str):
        _merge_info(w.db, cid, {"status": value, "status_at": at})
    elif key == "stats" and isinstance(value, dict):
        _merge_info(w.db, cid, _stats_summary(value))


def _merge_info(db: "Session", cid: str, info: dict[str, Any]) -> None:
    meta = db.metadata(cid) or {}
    old = meta.get(INFO_KEY) if isinstance(meta.get(INFO_KEY), dict) else {}
    if "status_at" not in info and "status_at" in old and info.get("status") not in OUT_OF_STREAM:
        # The conversations webhook is sent in the background beside the event stream and may
        # arrive after it (the info composed as a run starts, "idle", after the stream's
        # "finished"): its status never overrides one the stream gave.
        info = {k: v for k, v in info.items() if k != "status"}
    new = {**old, **{k: v for k, v in info.items() if v is not None}}
    if new != old:
        db.set_metadata(cid, {**meta, INFO_KEY: new})


def info_summary(info: dict[str, Any]) -> dict[str, Any]:
    """What is kept of the agent server's ``ConversationInfo`` (or a full state): title,
    status, agent, model, cost and tokens, times. Never its secrets: only these fields."""
    agent = info.get("agent") if isinstance(info.get("agent"), dict) else {}
    llm = agent.get("llm") if isinstance(agent.get("llm"), dict) else {}
    summary: dict[str, Any] = {
        "title": info.get("title") if isinstance(info.get("title"), str) else None,
        "status": info.get("execution_status") if isinstance(info.get("execution_status"), str) else None,
        "agent": agent.get("kind") if isinstance(agent.get("kind"), str) else None,
        "model": llm.get("model") if isinstance(llm.get("model"), str) else None,
        "created_at": info.get("created_at") if isinstance(info.get("created_at"), str) else None,
        "updated_at": info.get("updated_at") if isinstance(info.get("updated_at"), str) else None,
    }
    if isinstance(info.get("stats"), dict):
        summary.update(_stats_summary(info["stats"]))
    return summary


def _stats_summary(stats: dict[str, Any]) -> dict[str, Any]:
    """Cost and tokens summed over the conversation's LLMs (``ConversationStats``)."""
    usage = stats.get("usage_to_metrics")
    if not isinstance(usage, dict):
        return {}
    cost, prompt, completion = 0.0, 0, 0
    for metrics in usage.values():
        if not isinstance(metrics, dict):
            continue
        cost += _number(metrics.get("accumulated_cost"))
        tokens = metrics.get("accumulated_token_usage")
        if isinstance(tokens, dict):
            prompt += int(_number(tokens.get("prompt_tokens")))
            completion += int(_number(tokens.get("completion_tokens")))
    return {"cost_usd": round(cost, 6), "prompt_tokens": prompt, "completion_tokens": completion}


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def ingest_conversation(store: "EventStore", body: bytes) -> str:
    """Store the agent server's ``ConversationInfo`` (the ``/conversations`` webhook) in the
    conversation's metadata, creating the conversation if its events have not come yet; its
    id here."""
    try:
        data = load_json(body, "the conversation info")
    except ImportFailed as e:
        raise IngestRefused("malformed", str(e)) from None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise IngestRefused("malformed", "the conversation info is not a JSON object with an \"id\"")
    try:
        cid = str(uuid.UUID(data["id"]))
    except ValueError:
        raise IngestRefused("bad_conversation", f"{shown(data['id'])} is not a conversation id (a UUID)") from None
    from ..conversation import Conversation

    with Conversation(store, cid).writing() as w:
        _ensure(w.db, cid)
        _merge_info(w.db, cid, info_summary(data))
    return cid


def waiting_counts(store: "EventStore") -> dict[str, int]:
    """Each conversation with events waiting for their parents: how many wait."""
    with store.reading() as db:
        return db.pending_counts()


def known_uids(store: "EventStore", cid: str, uids: Iterable[str]) -> set[str]:
    """Which of ``uids`` conversation ``cid`` stores or holds waiting."""
    uids = list(uids)
    with store.reading() as db:
        return {uid for _, uid in db.seqs_of(cid, END, uids)} | db.pending_uids(cid, uids)


__all__ = ["CREATED_BY", "INFO_KEY", "KEY_HEADER", "MAX_BODY_BYTES", "IngestRefused", "IngestResult", "OpenHandsMemoryError",
           "conversation_key", "ingest_conversation", "ingest_events", "info_summary", "known_uids",
           "parse_batch", "waiting_counts"]
