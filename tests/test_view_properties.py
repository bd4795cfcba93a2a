"""Property tests for the view: random agent histories against a reference fold.

The oracle below is plain Python written from the references alone (legacy fold + SDK §2.4),
sharing no code with ``openhands_memory.view`` / ``history`` / ``properties``:

1. forgotten = union of every Condensation's ids (ranges of sequence numbers, and external
   ids of events stored before it);
2. visible = LLM-visible events not forgotten, in order; the summary of the NEWEST
   condensation that has both summary and offset is inserted at min(offset, len);
3. the four properties to a fixpoint, in the order [observation uniqueness, batch atomicity,
   tool-call matching, tool-loop atomicity], restarting after any drop; batches and tool
   loops are computed over ALL events (a loop is a maximal run of actions/results that starts
   at an action with thinking blocks; any other event, stored or not LLM-visible, ends it);
4. unhandled request = a CondensationRequest newer than the newest Condensation.

Properties:
(a) the SQL view, and ``view(at=N)``, equal the oracle;
(b) no view and no message list holds an unpaired tool call, a split batch or a partial
    thinking loop;
(c) the cached view equals a fresh query (another EventStore on the file) after every append;
(d) a write by another EventStore invalidates the cache;
(e) cutting a clean view at two of its manipulation indices gives a clean next view (with
    the two gaps the SDK documents, which are asserted to be the only ones).
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Sequence

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from openhands_memory.events import (
    ActionEvent,
    AgentErrorEvent,
    Condensation,
    CondensationRequest,
    ConversationStateUpdateEvent,
    Event,
    Message,
    MessageEvent,
    MessageToolCall,
    ObservationEvent,
    PauseEvent,
    SystemPromptEvent,
    TextContent,
    ThinkingBlock,
    UserRejectObservation,
)
from openhands_memory.conversation import EventStore
from openhands_memory.view import View

SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=False,
)

VISIBLE = frozenset(
    {
        "SystemPromptEvent", "MessageEvent", "ActionEvent", "ObservationEvent",
        "UserRejectObservation", "AgentErrorEvent",
    }
)
RESULTS = frozenset({"ObservationEvent", "UserRejectObservation", "AgentErrorEvent"})
SUMMARY = "CondensationSummaryEvent"

# --- event builders (explicit external ids, so failures read well) --------------------------


def system(uid: str) -> Event:
    return SystemPromptEvent(id=uid, system_prompt=TextContent(text="You are an agent."), tools=[])


def user(uid: str) -> Event:
    return MessageEvent(id=uid, source="user", llm_message=Message(role="user", content=[TextContent(text=uid)]))


def agent(uid: str) -> Event:
    return MessageEvent(
        id=uid,
        source="agent",
        llm_message=Message(role="assistant", content=[TextContent(text=uid)]),
        llm_response_id=f"resp-{uid}",
    )


def action(uid: str, rid: str, call: str, *, first: bool, think: bool, reasoning: bool) -> Event:
    return ActionEvent(
        id=uid,
        thought=[TextContent(text=f"thought {uid}")] if first else [],
        reasoning_content=f"reasoning {uid}" if first and reasoning else None,
        thinking_blocks=[ThinkingBlock(thinking=f"think {uid}", signature="s")] if first and think else [],
        action={"kind": "TerminalAction", "command": uid},
        tool_name="terminal",
        tool_call_id=call,
        tool_call=MessageToolCall(id=call, name="terminal", arguments='{"command": "x"}'),
        llm_response_id=rid,
    )


def result(uid: str, kind: str, call: str) -> Event:
    if kind == "obs":
        return ObservationEvent(
            id=uid, tool_name="terminal", tool_call_id=call, action_id="a",
            observation={"kind": "TerminalObservation", "content": [{"type": "text", "text": uid}]},
        )
    if kind == "rej":
        return UserRejectObservation(id=uid, tool_name="terminal", tool_call_id=call, action_id="a")
    return AgentErrorEvent(id=uid, tool_name="terminal", tool_call_id=call, error=f"error {uid}")


# --- the history strategy -------------------------------------------------------------------

STEPS = ["user"] * 3 + ["agent"] + ["batch"] * 7 + ["pause", "state", "request"] + ["condense"] * 3


class _Builder:
    """``tidy``: the history a well-behaved agent leaves: no pending action, no duplicate
    result, and every condensation cuts its current view at two manipulation indices, as a
    condenser does (random cuts otherwise)."""

    def __init__(self, draw, tidy: bool = False):
        self.draw = draw
        self.tidy = tidy
        self.events: list[Event] = []
        self.n_batches = 0

    def uid(self, prefix: str) -> str:
        return f"{prefix}{len(self.events)}"

    def add(self, e: Event) -> None:
        self.events.append(e)

    def condense(self) -> None:
        draw, p = self.draw, len(self.events)
        if p == 0:
            return
        if self.tidy:
            return self.condense_at_indices()
        mode = draw(st.sampled_from(["ranges", "ids", "both", "none"]))
        runs = None
        ids: list[str] = []
        if mode in ("ranges", "both"):
            runs = []
            for _ in range(draw(st.integers(1, 3))):
                s = draw(st.integers(0, p - 1))
                length = draw(st.integers(1, max(1, min(p - s, 12))))
                runs.append((s, s + length - 1))
        if mode in ("ids", "both"):
            for i in draw(st.lists(st.integers(0, p - 1), max_size=4)):
                ids.append(self.events[i].id)
            extra = draw(st.sampled_from([None, "summary", "unknown"]))
            if extra == "summary":  # the SDK's derived id: names no stored event
                conds = [e.id for e in self.events if isinstance(e, Condensation)]
                if conds:
                    ids.append(draw(st.sampled_from(conds)) + "-summary")
            elif extra == "unknown":
                ids.append("no-such-event")
        uid = self.uid("k")
        summary = draw(st.sampled_from([None, f"S-{uid}"]))
        offset = draw(st.one_of(st.none(), st.integers(0, 14)))
        self.add(
            Condensation(
                id=uid, forgotten_event_ids=ids, forgotten_ranges=runs, summary=summary,
                summary_offset=offset, llm_response_id="test",
            )
        )

    def condense_at_indices(self) -> None:
        draw = self.draw
        view = View.from_events(fresh(self.events))
        indices = sorted(view.manipulation_indices)
        i = draw(st.sampled_from(indices))
        j = draw(st.sampled_from([k for k in indices if k >= i]))
        seqs = [e.seq for e in view[i:j] if e.seq is not None]
        uid = self.uid("k")
        summary = draw(st.booleans())
        self.add(
            Condensation(
                id=uid, forgotten_ranges=[(s, s) for s in seqs], summary=f"S-{uid}" if summary else None,
                summary_offset=i if summary else None, llm_response_id="test",
            )
        )

    def batch(self, last: bool) -> None:
        draw = self.draw
        self.n_batches += 1
        rid = f"r{self.n_batches}"
        k = draw(st.integers(1, 3))
        calls = [f"{rid}c{j}" for j in range(k)]
        think = draw(st.booleans())
        reasoning = draw(st.booleans())
        kinds = [draw(st.sampled_from(["obs", "obs", "rej", "err"])) for _ in calls]
        answered_early: set[str] = set()
        for j, call in enumerate(calls):
            self.add(action(self.uid("a"), rid, call, first=j == 0, think=think, reasoning=reasoning))
            if kinds[j] == "err" and draw(st.booleans()):  # invalid call: error emitted at once
                self.add(result(self.uid("e"), "err", call))
                answered_early.add(call)
            if j < k - 1 and not self.tidy and draw(st.integers(0, 15)) == 0:  # rare: mid-batch
                self.condense()
        rest = [c for c in calls if c not in answered_early]
        pending: set[str] = set()
        if rest and not self.tidy and draw(st.integers(0, 3 if last else 25)) == 0:
            pending = set(draw(st.lists(st.sampled_from(rest), min_size=1, max_size=len(rest), unique=True)))
        if draw(st.integers(0, 7)) == 0:  # something arrives while the tools run
            between = draw(st.sampled_from(["user", "pause", "request"]))
            self.step(between, last=False)
        order = draw(st.permutations([c for c in rest if c not in pending]))
        for call in order:
            kind = kinds[calls.index(call)]
            self.add(result(self.uid({"obs": "o", "rej": "x", "err": "e"}[kind]), kind, call))
        answered = [c for c in calls if c not in pending]
        if answered and not self.tidy and draw(st.integers(0, 7)) == 0:  # crash recovery: a late duplicate
            call = draw(st.sampled_from(answered))
            self.add(result(self.uid("d"), "obs", call))

    def step(self, kind: str, last: bool) -> None:
        if kind == "user":
            self.add(user(self.uid("m")))
        elif kind == "agent":
            self.add(agent(self.uid("g")))
        elif kind == "batch":
            self.batch(last)
        elif kind == "pause":
            self.add(PauseEvent(id=self.uid("p")))
        elif kind == "state":
            self.add(ConversationStateUpdateEvent(id=self.uid("u"), key="agent_status", value="running"))
        elif kind == "request":
            self.add(CondensationRequest(id=self.uid("q")))
        elif kind == "condense":
            self.condense()


@st.composite
def histories(draw, max_steps: int = 24, tidy: bool | None = None) -> list[Event]:
    b = _Builder(draw, tidy=draw(st.booleans()) if tidy is None else tidy)
    if draw(st.integers(0, 9)) > 0:
        b.add(system(b.uid("sys")))
    n = draw(st.integers(0, max_steps))
    steps = draw(st.lists(st.sampled_from(STEPS), min_size=n, max_size=n))
    for i, kind in enumerate(steps):
        b.step(kind, last=i == len(steps) - 1)
    return b.events


def features(events: Sequence[Event]) -> list[str]:
    """Labels for hypothesis' statistics: which shapes a generated history has."""
    out = []
    answered = [e.tool_call_id for e in events if e.kind in RESULTS]  # type: ignore[attr-defined]
    calls = [e for e in events if isinstance(e, ActionEvent)]
    if any(a.thinking_blocks for a in calls):
        out.append("thinking")
    per_response = Counter(a.llm_response_id for a in calls)
    if any(count > 1 for count in per_response.values()):
        out.append("parallel batch")
    mid_batch = False
    for k, e in enumerate(events):
        if isinstance(e, Condensation) and 0 < k < len(events) - 1:
            before = [x for x in events[:k] if isinstance(x, ActionEvent)]
            after = [x for x in events[k + 1 :] if isinstance(x, ActionEvent)]
            mid_batch |= bool(before and after and before[-1].llm_response_id == after[0].llm_response_id)
    if mid_batch:
        out.append("condensation mid-batch")
    if any(a.tool_call_id not in answered for a in calls):
        out.append("pending action")
    if len(answered) != len(set(answered)):
        out.append("duplicate result")
    for k in range(len(events) - 2):
        a, e, b = events[k : k + 3]
        if isinstance(a, ActionEvent) and isinstance(e, AgentErrorEvent) and isinstance(b, ActionEvent) \
                and a.llm_response_id == b.llm_response_id:
            out.append("interleaved error")
            break
    conds = [e for e in events if isinstance(e, Condensation)]
    if conds:
        out.append(f"{min(len(conds), 3)}{'+' if len(conds) >= 3 else ''} condensation(s)")
    if any(c.has_summary_metadata for c in conds):
        out.append("summary")
    return out


def fresh(events: Sequence[Event]) -> list[Event]:
    """Unstored copies: appending sets ``seq`` on an event object, so never share them."""
    return [e.model_copy() for e in events]


# --- the oracle -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    uid: str
    kind: str
    rid: str | None = None
    call: str | None = None
    thinking: bool = False


def item(e: Event) -> Item:
    return Item(
        e.id,
        e.kind,  # type: ignore[attr-defined]
        getattr(e, "llm_response_id", None) if e.kind == "ActionEvent" else None,  # type: ignore[attr-defined]
        getattr(e, "tool_call_id", None),
        bool(getattr(e, "thinking_blocks", None)),
    )


def is_tool(x: Item) -> bool:
    return x.kind == "ActionEvent" or x.kind in RESULTS


def o_uniqueness(view: list[Item], all_items: list[Item]) -> set[str]:
    seen, drop = set(), set()
    for x in view:
        if x.kind in RESULTS:
            (drop.add(x.uid) if x.call in seen else seen.add(x.call))
    return drop


def batches(items: list[Item]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for x in items:
        if x.kind == "ActionEvent":
            out[x.rid].add(x.uid)  # type: ignore[index]
    return out


def o_batch(view: list[Item], all_items: list[Item]) -> set[str]:
    every = batches(all_items)
    return set().union(*[ids for rid, ids in batches(view).items() if ids != every[rid]])


def o_matching(view: list[Item], all_items: list[Item]) -> set[str]:
    calls = {x.call for x in view if x.kind == "ActionEvent"}
    answers = {x.call for x in view if x.kind in RESULTS}
    return {
        x.uid for x in view
        if (x.kind == "ActionEvent" and x.call not in answers) or (x.kind in RESULTS and x.call not in calls)
    }


def tool_loops(items: list[Item]) -> list[set[str]]:
    loops, cur = [], None
    for x in items:
        if x.kind == "ActionEvent" and x.thinking:
            if cur is not None:
                loops.append(cur)
            cur = {x.uid}
        elif is_tool(x):
            if cur is not None:
                cur.add(x.uid)
        else:
            if cur is not None:
                loops.append(cur)
            cur = None
    if cur is not None:
        loops.append(cur)
    return loops


def o_loops(view: list[Item], all_items: list[Item]) -> set[str]:
    present = {x.uid for x in view}
    drop: set[str] = set()
    for loop in tool_loops(all_items):
        if loop & present and not loop <= present:
            drop |= loop & present
    return drop


ORACLE_PROPERTIES = (o_uniqueness, o_batch, o_matching, o_loops)

PROPERTY_NAMES = {
    "o_uniqueness": "observation_uniqueness",
    "o_batch": "batch_atomicity",
    "o_matching": "tool_call_matching",
    "o_loops": "tool_loop_atomicity",
}


def oracle(events: Sequence[Event]) -> tuple[list[tuple[str, str]], bool, list[str]]:
    """(kinds and external ids of the view, unhandled request flag, properties that dropped)."""
    forgotten: set[int] = set()
    earlier: dict[str, int] = {}
    summary: tuple[str, int] | None = None
    last_cond = last_req = None
    for i, e in enumerate(events):
        if isinstance(e, Condensation):
            for s, t in e.forgotten_ranges or []:
                forgotten.update(range(s, t + 1))
            forgotten.update(earlier[u] for u in e.forgotten_event_ids if u in earlier)
            if e.summary is not None and e.summary_offset is not None:
                summary = (e.id, e.summary_offset)
            last_cond = i
        elif isinstance(e, CondensationRequest):
            last_req = i
        earlier[e.id] = i
    all_items = [item(e) for e in events]
    view = [x for i, x in enumerate(all_items) if x.kind in VISIBLE and i not in forgotten]
    if summary is not None:
        view.insert(min(summary[1], len(view)), Item(f"{summary[0]}-summary", SUMMARY))
    fired: list[str] = []
    changed = True
    while changed:
        changed = False
        for prop in ORACLE_PROPERTIES:
            drop = prop(view, all_items)
            if drop:
                fired.append(prop.__name__)
                view = [x for x in view if x.uid not in drop]
                changed = True
                break
    unhandled = last_req is not None and (last_cond is None or last_req > last_cond)
    return [(x.kind, x.uid) for x in view], unhandled, fired


def shape(view: View) -> tuple[list[tuple[str, str]], bool]:
    return [(e.kind, e.id) for e in view], view.unhandled_condensation_request  # type: ignore[attr-defined]


def full_shape(view: View):
    return shape(view), view.seqs, [d.property for d in view.dropped]


# --- (b): well-formedness checks --------------------------------------------------------------


def check_well_formed(view: View, history: Sequence[Event]) -> None:
    events = list(view)
    calls = [e.tool_call_id for e in events if isinstance(e, ActionEvent)]
    answers = [e.tool_call_id for e in events if e.kind in RESULTS]  # type: ignore[attr-defined]
    assert len(calls) == len(set(calls))
    assert len(answers) == len(set(answers)), "two results for one call"
    assert set(calls) == set(answers), "unpaired tool call or result"
    all_items = [item(e) for e in history]
    every = batches(all_items)
    present = {e.id for e in events}
    for rid, ids in batches([item(e) for e in events]).items():
        assert ids == every[rid], f"split batch {rid}"
    for loop in tool_loops(all_items):
        assert not (loop & present) or loop <= present, f"partial thinking loop {sorted(loop)}"
    check_messages(view.to_messages(), events)


def check_messages(messages: list[dict], events: list[Event]) -> None:
    open_calls: set[str] = set()
    turn: set[str] = set()
    sent: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in turn and m["tool_call_id"] in open_calls, m
            open_calls.discard(m["tool_call_id"])
            continue
        assert not open_calls, f"unanswered tool calls {open_calls}"
        turn = set()
        if m.get("tool_calls"):
            turn = {c["id"] for c in m["tool_calls"]}
            open_calls = set(turn)
            sent += [c["id"] for c in m["tool_calls"]]
    assert not open_calls, f"unanswered tool calls {open_calls} at the end"
    actions = [e for e in events if isinstance(e, ActionEvent)]
    assert sorted(sent) == sorted(a.tool_call_id for a in actions), "a call of the view was not sent"
    # every thinking action leads its assistant message, which carries the thinking blocks
    leaders = {m["tool_calls"][0]["id"]: m for m in messages if m.get("tool_calls")}
    for a in actions:
        if a.thinking_blocks:
            assert a.tool_call_id in leaders and leaders[a.tool_call_id].get("thinking_blocks")


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Two EventStores (two connections) on one file; a new conversation per example."""
    path = tmp_path_factory.mktemp("props") / "props.db"
    a = EventStore(path)
    b = EventStore(path)
    yield a, b
    a.close()
    b.close()


def new_conversation(store: EventStore):
    return store.create_conversation(str(uuid.uuid4()))


# --- (a) SQL view and view(at=N) equal the oracle ---------------------------------------------


@settings(max_examples=300, **SETTINGS)
@given(history=histories(), data=st.data())
def test_sql_view_equals_oracle(stores, history, data):
    store, _ = stores
    conv = new_conversation(store)
    conv.append_many(fresh(history))
    expected_view, expected_flag, fired = oracle(history)
    event(f"dropped by: {'/'.join(sorted(set(fired))) or 'nothing'}")
    event(f"length {10 * (len(history) // 10)}+")
    for label in features(history):
        event(label)
    view = conv.view()
    assert shape(view) == (expected_view, expected_flag)
    assert [d.property for d in view.dropped] == [PROPERTY_NAMES[p] for p in fired]
    # the in-memory fold agrees too
    assert shape(View.from_events(fresh(history))) == (expected_view, expected_flag)
    check_well_formed(view, history)
    if history:
        for n in data.draw(st.lists(st.integers(0, len(history) - 1), max_size=4, unique=True)):
            at = conv.view(at=n)
            assert shape(at) == oracle(history[: n + 1])[:2], f"view(at={n})"
            check_well_formed(at, history[: n + 1])


@settings(max_examples=200, **SETTINGS)
@given(history=histories())
def test_dropped_reports_the_oracles_steps(history):
    _, _, fired = oracle(history)
    view = View.from_events(fresh(history))
    assert [d.property for d in view.dropped] == [PROPERTY_NAMES[p] for p in fired]


# --- (b) every prefix is well formed, in views and messages -----------------------------------


@settings(max_examples=120, **SETTINGS)
@given(history=histories())
def test_every_prefix_is_well_formed(history):
    for n in range(len(history) + 1):
        prefix = fresh(history[:n])
        check_well_formed(View.from_events(prefix), prefix)


# --- (c) the cached view equals a fresh query after every append ------------------------------


@settings(max_examples=120, **SETTINGS)
@given(history=histories(), data=st.data())
def test_cache_equals_fresh_query_after_every_append(stores, history, data):
    store, other = stores
    conv = new_conversation(store)
    events = fresh(history)
    i = 0
    conv.view()
    while i < len(events):
        size = data.draw(st.sampled_from([1, 1, 1, 2, 3]), label="chunk")
        conv.append_many(events[i : i + size])
        i += size
        cached = conv.view()
        fresh_view = other.conversation(conv.id).view()  # a new Conversation: no cache
        assert full_shape(cached) == full_shape(fresh_view), f"after {i} events"
        assert shape(cached) == oracle(history[:i])[:2], f"after {i} events"
        assert cached.to_messages() == fresh_view.to_messages()
    assert conv.view() is conv.view()  # nothing new: the same cached object


def test_cache_counts_a_batch_split_by_a_condensation(stores):
    """Regression (found by the test above): a condensation lands between two actions of one
    batch and forgets the first. The cached view must count the hidden action when the second
    arrives, or it keeps a split batch that a fresh query drops."""
    store, other = stores
    conv = new_conversation(store)
    conv.append(user("m0"))
    conv.append(action("a1", "r1", "c1", first=True, think=False, reasoning=False))
    conv.append(Condensation(id="k", forgotten_ranges=[(1, 1)]))
    conv.view()  # cached: nothing of r1 is visible
    conv.append(action("a2", "r1", "c2", first=False, think=False, reasoning=False))
    conv.append(result("o2", "obs", "c2"))
    cached = conv.view()
    assert [e.id for e in cached] == ["m0"]
    assert [d.property for d in cached.dropped] == ["batch_atomicity", "tool_call_matching"]
    assert full_shape(cached) == full_shape(other.conversation(conv.id).view())


# --- (d) another connection's write invalidates the cache -------------------------------------


@settings(max_examples=120, **SETTINGS)
@given(history=histories(), data=st.data())
def test_other_writer_invalidates_the_cache(stores, history, data):
    store, other = stores
    conv = new_conversation(store)
    theirs = other.conversation(conv.id)
    events = fresh(history)
    i = 0
    while i < len(events):
        writer = data.draw(st.sampled_from(["mine", "theirs"]), label="writer")
        size = data.draw(st.integers(1, 3), label="chunk")
        (conv if writer == "mine" else theirs).append_many(events[i : i + size])
        i += size
        if data.draw(st.booleans(), label="look"):
            assert shape(conv.view()) == oracle(history[:i])[:2], f"after {i} events ({writer})"
    assert shape(conv.view()) == oracle(history)[:2]
    # and one more write from the other side, after the view was cached
    late = user("late-user-message")
    theirs.append(late)
    assert "late-user-message" in [e.id for e in conv.view()]
    assert shape(conv.view()) == oracle(list(history) + [late])[:2]


def test_other_writer_condensation_invalidates(stores):
    store, other = stores
    conv = new_conversation(store)
    conv.append_many([user("m0"), user("m1"), user("m2")])
    assert [e.id for e in conv.view()] == ["m0", "m1", "m2"]
    other.conversation(conv.id).append(
        Condensation(id="k", forgotten_ranges=[(0, 1)], summary="S", summary_offset=0)
    )
    assert [e.id for e in conv.view()] == ["k-summary", "m2"]
    conv.append(user("m4"))  # our own append after theirs: still right
    assert [e.id for e in conv.view()] == ["k-summary", "m2", "m4"]


# --- (e) cutting a clean view at manipulation indices keeps it clean --------------------------


def batch_split(view: View, i: int, j: int) -> str | None:
    """The response id of a batch the cut [i, j) splits, if any."""
    inside: dict[str, set[bool]] = defaultdict(set)
    for k, e in enumerate(view):
        if isinstance(e, ActionEvent):
            inside[e.llm_response_id].add(i <= k < j)
    return next((rid for rid, where in inside.items() if len(where) == 2), None)


def loop_split(view: View, i: int, j: int, history: Sequence[Event]) -> set[str] | None:
    cut = {e.id for e in view[i:j]}
    present = {e.id for e in view}
    for loop in tool_loops([item(e) for e in history]):
        if loop & present and loop & cut and not loop <= cut:
            return loop
    return None


def explain_unsafe_cut(view: View, i: int, j: int, history: Sequence[Event]) -> str | None:
    """The SDK's two documented gaps between manipulation indices and enforcement."""
    rid = batch_split(view, i, j)
    if rid is not None:
        pos = [k for k, e in enumerate(view) if isinstance(e, ActionEvent) and e.llm_response_id == rid]
        # the index sets only keep ADJACENT actions of a batch together (§2.5: "index 3
        # splits batch r1"); a result between them (an interleaved error) opens a cut
        assert pos != list(range(pos[0], pos[-1] + 1)), "a cut split a contiguous batch"
        return "interleaved batch"
    loop = loop_split(view, i, j, history)
    if loop is not None:
        pos = [k for k, e in enumerate(view) if e.id in loop]
        # the view's index sets see a loop end at any non-tool event; in the history a summary
        # does not exist, so the loop runs on (§2.4: "the two can disagree")
        assert any(view[k].kind == SUMMARY for k in range(pos[0], pos[-1])), (  # type: ignore[attr-defined]
            "a cut split a thinking loop with no summary inside it"
        )
        return "summary inside a loop"
    return None


def cut_condensation(view: View, i: int, j: int, uid: str, data) -> Condensation:
    seqs = [e.seq for e in view[i:j] if e.seq is not None]
    summary = data.draw(st.booleans(), label="with summary")
    if data.draw(st.booleans(), label="by ranges"):
        runs = [(s, s) for s in seqs]
        ids: list[str] = []
    else:
        runs, ids = None, [e.id for e in view[i:j] if e.seq is not None]
    return Condensation(
        id=uid, forgotten_event_ids=ids, forgotten_ranges=runs,
        summary=f"cut {i}:{j}" if summary else None, summary_offset=i if summary else None,
    )


@settings(max_examples=300, **SETTINGS)
@given(history=histories(tidy=True), data=st.data())
def test_cut_at_manipulation_indices_keeps_a_clean_view_clean(stores, history, data):
    store, _ = stores
    view = View.from_events(fresh(history))
    if view.dropped:
        event("view not clean: nothing to check")
        return
    indices = sorted(view.manipulation_indices)
    pairs = [(i, j) for a, i in enumerate(indices) for j in indices[a + 1 :]]
    if not pairs:
        return
    chosen = data.draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=6, unique=True))
    for n, (i, j) in enumerate(chosen):
        cond = cut_condensation(view, i, j, f"cut{n}", data)
        after = fresh(history) + [cond]
        nxt = View.from_events(after)
        check_well_formed(nxt, after)
        gap = explain_unsafe_cut(view, i, j, history)
        event(f"cut: {gap or 'safe'}")
        if gap is None:
            assert nxt.dropped == [], f"cut [{i}:{j}) of a clean view dropped {nxt.dropped}"
            forgotten = {e.id for e in view[i:j] if e.seq is not None}
            assert [e.id for e in nxt if e.kind != SUMMARY] == [  # type: ignore[attr-defined]
                e.id for e in view if e.id not in forgotten and e.kind != SUMMARY  # type: ignore[attr-defined]
            ]
    # one of the cuts through SQL, on top of the stored history
    i, j = chosen[0]
    conv = new_conversation(store)
    conv.append_many(fresh(history))
    assert shape(conv.view()) == shape(view)
    cond = cut_condensation(view, i, j, "sqlcut", data)
    conv.append(cond)
    after = list(history) + [cond]
    assert shape(conv.view()) == oracle(after)[:2]
    if explain_unsafe_cut(view, i, j, history) is None:
        assert conv.view().dropped == []


def test_documented_gaps_are_real():
    """The two exceptions (e) allows, shown concretely: a cut at a manipulation index that the
    next rebuild must repair. Both follow the SDK (§2.4, §2.5)."""
    # 1. interleaved error batch: [M, A(r1,c1), E(c1), A(r1,c2), O(c2), M]; index 3 is allowed
    m0, m1 = user("m0"), user("m1")
    a1 = action("a1", "r1", "c1", first=True, think=False, reasoning=False)
    e1 = result("e1", "err", "c1")
    a2 = action("a2", "r1", "c2", first=False, think=False, reasoning=False)
    o2 = result("o2", "obs", "c2")
    history = [m0, a1, e1, a2, o2, m1]
    view = View.from_events(fresh(history))
    assert 1 in view.manipulation_indices and 3 in view.manipulation_indices
    nxt = View.from_events(fresh(history) + [Condensation(id="k", forgotten_ranges=[(1, 2)])])
    assert [e.id for e in nxt] == ["m0", "m1"]
    assert [d.property for d in nxt.dropped] == ["batch_atomicity", "tool_call_matching"]
    # 2. a summary inside a thinking loop: the view's index sets end the loop at the summary
    t1 = action("t1", "r1", "c1", first=True, think=True, reasoning=False)
    history = [
        user("m0"), user("m1"), t1, result("o1", "obs", "c1"),
        action("t2", "r2", "c2", first=True, think=False, reasoning=False), result("o2", "obs", "c2"),
        Condensation(id="k", forgotten_ranges=[(0, 0)], summary="S", summary_offset=3),
    ]
    view = View.from_events(fresh(history))
    assert [e.id for e in view] == ["m1", "t1", "o1", "k-summary", "t2", "o2"]
    assert view.dropped == []
    assert 4 in view.manipulation_indices and 6 in view.manipulation_indices
    nxt = View.from_events(fresh(history) + [Condensation(id="k2", forgotten_ranges=[(4, 5)])])
    assert [e.id for e in nxt] == ["m1", "k-summary"]
    assert [d.property for d in nxt.dropped] == ["tool_loop_atomicity"]
