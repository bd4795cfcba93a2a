"""Condenser strategies, driven through a real SQLite store.

Sources and how they were adapted:
* legacy reference §7.1 (``test_condenser.py``) and §7.6 (vectors derived with the corrected
  harness), replayed with the *corrected* harness of §7.0: after each appended event the
  condenser is asked; a Condensation is stored as the next event (``conv.condense`` does that)
  and nothing is yielded; otherwise the view is yielded;
* legacy reference §7.2 (``test_conversation_window_condenser.py``) with this library's event
  kinds. Legacy ids start at 1; ours are the store's ids, starting at 0. The expected sets
  below are written in our ids, with the legacy set beside them;
* the SDK reference §3.2/§3.4: reasons, SOFT/HARD requirements, the token trigger;
* this library's own guarantees: masked results keep their pairing, RecentEvents does not
  repeat its head, ConversationWindow never writes an empty condensation, nothing loops,
  long runs stay bounded and well-formed, and concurrent condensers never both write.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from dataclasses import dataclass
from typing import Iterable, Iterator

import pytest

from openhands_memory import condensers as condenser_module
from openhands_memory.view.tokens import FRESH
from openhands_memory.condensers import (
    AmortizedForgettingCondenser,
    BrowserOutputCondenser,
    ConversationWindowCondenser,
    NoOpCondenser,
    ObservationMaskingCondenser,
    PipelineCondenser,
    RecentEventsCondenser,
)
from openhands_memory.errors import (
    ConcurrentCondensation,
    ConfigError,
    NoCondensationAvailable,
)
from openhands_memory.events import (
    ActionEvent,
    AgentErrorEvent,
    Condensation,
    CondensationRequest,
    CondensationSummaryEvent,
    Event,
    MessageEvent,
    ObservationBase,
    ObservationEvent,
    RecallAction,
    RecallObservation,
    SystemPromptEvent,
)
from openhands_memory.conversation import Conversation, EventStore
from openhands_memory.view import View

from . import factories as f

# --- helpers -----------------------------------------------------------------------------


def harness(conv: Conversation, condenser, events: Iterable[Event]) -> Iterator[View]:
    """The corrected harness of §7.0, over a real store."""
    for e in events:
        conv.append(e)
        result = conv.condense(condenser).result
        if isinstance(result, Condensation):
            continue  # stored as the next event by conv.condense; nothing is yielded
        yield result


def expected_size(i: int, m: int) -> int:
    return i + 1 if i < m else ((i - m) % (m // 2)) + m // 2 + 1


def expected_condensations(i: int, m: int) -> int:
    return 0 if i < m else ((i - m) // (m // 2)) + 1


def messages(n: int, prefix: str = "E") -> list[Event]:
    return [f.user(f"{prefix}{i}") for i in range(n)]


def text_of(e: Event) -> str:
    if isinstance(e, MessageEvent):
        return "".join(c.text for c in e.llm_message.content)
    if isinstance(e, ObservationEvent):
        content = e.observation.get("content")
        if isinstance(content, list):
            return "".join(c.get("text", "") for c in content)
        return str(content)
    if isinstance(e, AgentErrorEvent):
        return e.error
    if isinstance(e, RecallObservation):
        return e.content
    if isinstance(e, CondensationSummaryEvent):
        return e.summary
    return ""


def condensation_rows(store: EventStore, cid: str) -> list[dict]:
    rows = store.db.execute(
        "SELECT id, strategy, reason, tokens_before, tokens_after FROM condensation "
        "WHERE conversation_id = ? ORDER BY id",
        (cid,),
    ).fetchall()
    return [dict(zip(("id", "strategy", "reason", "tokens_before", "tokens_after"), r)) for r in rows]


def forgotten_ranges(store: EventStore, cid: str) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for c, s, e in store.db.execute(
        "SELECT condensation_id, start_id, end_id FROM forgotten_range WHERE conversation_id = ? "
        "ORDER BY condensation_id, start_id",
        (cid,),
    ):
        out.setdefault(c, []).append((s, e))
    return out


def expand(runs: Iterable[tuple[int, int]]) -> set[int]:
    return {i for s, e in runs for i in range(s, e + 1)}


def event_count(store: EventStore, cid: str) -> int:
    return store.db.execute("SELECT COUNT(*) FROM event WHERE conversation_id = ?", (cid,)).fetchone()[0]


def pair(n: int, text: str | None = None, *, think: bool = False) -> list[Event]:
    return [f.action(f"r{n}", f"c{n}", think=think), f.observation(f"c{n}", text)]


def browser_pair(n: int, url: str, *, sdk: bool = False) -> list[Event]:
    """A browser call and its page; ``sdk``: the page as the SDK writes it, without the URL."""
    call = f"b{n}"
    act = f.action(f"rb{n}", call, tool="browser_navigate", args={"url": url})
    obs = ObservationEvent(
        tool_name="browser_navigate",
        tool_call_id=call,
        observation={
            "kind": "BrowserObservation",
            **({} if sdk else {"url": url}),
            "content": [{"type": "text", "text": f"page text of {url}"}],
        },
        action_id=act.id,
    )
    return [act, obs]


def assert_well_formed(view: View, history: list[Event], *, where: str = "") -> None:
    """Independent checks of the SDK's four properties (not the library's own code)."""
    events = view.events
    assert view.dropped == [], f"{where}: enforcement had to drop {view.dropped}"
    calls = [e.tool_call_id for e in events if isinstance(e, ActionEvent)]
    results = [e.tool_call_id for e in events if isinstance(e, ObservationBase)]
    assert len(results) == len(set(results)), f"{where}: a tool call has two results"
    assert set(calls) == set(results), f"{where}: unpaired {set(calls) ^ set(results)}"
    # batches: a response's actions are all in the view or none are
    whole: dict[str, int] = {}
    for e in history:
        if isinstance(e, ActionEvent):
            whole[e.llm_response_id] = whole.get(e.llm_response_id, 0) + 1
    shown: dict[str, int] = {}
    for e in events:
        if isinstance(e, ActionEvent):
            shown[e.llm_response_id] = shown.get(e.llm_response_id, 0) + 1
    for rid, n in shown.items():
        assert n == whole[rid], f"{where}: batch {rid} split ({n} of {whole[rid]} shown)"
    # thinking tool loops over the whole history: any non-tool event ends one
    loops: list[set[str]] = []
    current: set[str] | None = None
    for e in history:
        if isinstance(e, ActionEvent) and e.thinking_blocks:
            if current is not None:
                loops.append(current)
            current = {e.id}
        elif isinstance(e, (ActionEvent, ObservationBase)):
            if current is not None:
                current.add(e.id)
        elif current is not None:
            loops.append(current)
            current = None
    if current is not None:
        loops.append(current)
    in_view = {e.id for e in events}
    for loop in loops:
        assert loop <= in_view or not (loop & in_view), f"{where}: a thinking tool loop was split"
    # provider messages: every tool call answered right after its assistant turn
    pending: set[str] = set()
    for m in view.to_messages():
        if m["role"] == "assistant" and m.get("tool_calls"):
            assert not pending, f"{where}: {pending} unanswered before the next assistant turn"
            pending = {c["id"] for c in m["tool_calls"]}
        elif m["role"] == "tool":
            assert m["tool_call_id"] in pending, f"{where}: tool result without its call"
            pending.discard(m["tool_call_id"])
        else:
            assert not pending, f"{where}: {pending} unanswered"
    assert not pending


# --- §7.1 view transformers ---------------------------------------------------------------


def test_noop_returns_the_view_unchanged(conv):
    conv.append_many(messages(3))
    view = conv.view()
    result = conv.condense(NoOpCondenser()).result
    assert result is view
    assert [text_of(e) for e in result] == ["E0", "E1", "E2"]
    assert event_count(conv.store, conv.id) == 3


def test_observation_masking_respects_attention_window(conv):
    # legacy [E1, Obs1, E3, E4, Obs2]; an observation needs its call, so E1 and E4 are the calls
    a1, o1 = pair(1, "first output")
    a2, o2 = pair(2, "second output")
    conv.append_many([a1, o1, f.user("E3"), a2, o2])
    result = conv.condense(ObservationMaskingCondenser(attention_window=3)).result
    assert isinstance(result, View)
    assert len(result) == 5
    masked = result[1]
    assert isinstance(masked, ObservationEvent)
    assert text_of(masked) == "<MASKED>"
    assert masked.tool_call_id == "c1" and masked.seq == o1.seq  # pairing kept: our fix
    for i in range(2, 5):  # inside the window: the very same events
        assert result[i].id == conv.view()[i].id
        assert text_of(result[i]) == text_of(conv.view()[i])
    msgs = result.to_messages()
    assert [m["role"] for m in msgs] == ["assistant", "tool", "user", "assistant", "tool"]
    assert msgs[0]["tool_calls"][0]["id"] == "c1"
    assert msgs[1]["tool_call_id"] == "c1" and msgs[1]["content"] == [{"type": "text", "text": "<MASKED>"}]
    assert msgs[4]["tool_call_id"] == "c2" and "second output" in msgs[4]["content"][0]["text"]
    # a rewrite is never stored
    assert event_count(conv.store, conv.id) == 5
    assert text_of(conv.view()[1]) == "first output"


def test_observation_masking_masks_errors_and_keeps_them_paired(conv):
    a = f.action("r1", "c1")
    conv.append_many([a, f.error("c1", "boom"), *messages(4)])
    result = conv.condense(ObservationMaskingCondenser(attention_window=2)).result
    assert isinstance(result[1], AgentErrorEvent) and result[1].error == "<MASKED>"
    assert result.to_messages()[1] == {
        "role": "tool", "tool_call_id": "c1", "name": "terminal",
        "content": [{"type": "text", "text": "<MASKED>"}],
    }


def test_browser_output_respects_attention_window(conv):
    # legacy [B1, B2, E3, E4, B3, B4]; each browser output comes with its call
    urls = [f"https://example.com/page{i}" for i in range(1, 5)]
    events = [
        *browser_pair(1, urls[0]), *browser_pair(2, urls[1]),
        f.user("E3"), f.user("E4"),
        *browser_pair(3, urls[2]), *browser_pair(4, urls[3]),
    ]
    conv.append_many(events)
    result = conv.condense(BrowserOutputCondenser(attention_window=3)).result
    assert len(result) == 10
    b1 = result[1]
    assert isinstance(b1, ObservationEvent) and b1.tool_call_id == "b1"
    assert text_of(b1) == f"Visited URL {urls[0]}\nContent omitted"  # legacy OpenHands' words
    for pos, url in ((3, urls[1]), (7, urls[2]), (9, urls[3])):
        assert text_of(result[pos]) == f"page text of {url}"
    assert [text_of(result[i]) for i in (4, 5)] == ["E3", "E4"]
    assert_well_formed(result, events)
    # window 1 keeps only the newest page
    narrow = conv.condense(BrowserOutputCondenser()).result
    assert [("page text" in text_of(narrow[p])) for p in (1, 3, 7, 9)] == [False, False, False, True]


def test_browser_output_names_the_url_of_an_sdk_page_from_its_call(conv):
    """The SDK's BrowserObservation has no URL field: the masked page names its call's."""
    conv.append_many([*browser_pair(1, "https://example.com/a", sdk=True),
                      *browser_pair(2, "https://example.com/b", sdk=True)])
    result = conv.condense(BrowserOutputCondenser()).result
    assert text_of(result[1]) == "Visited URL https://example.com/a\nContent omitted"
    assert text_of(result[3]) == "page text of https://example.com/b"


@pytest.mark.parametrize(
    "keep_first, max_events, expected",
    [
        (1, 5, ["E1", "E2", "E3", "E4", "E5"]),
        (1, 3, ["E1", "E4", "E5"]),
        (1, 2, ["E1", "E5"]),
        (2, 3, ["E1", "E2", "E5"]),
    ],
)
def test_recent_events(conv, keep_first, max_events, expected):
    conv.append_many([f.user(f"E{i}") for i in range(1, 6)])
    result = conv.condense(RecentEventsCondenser(keep_first=keep_first, max_events=max_events)).result
    assert [text_of(e) for e in result] == expected
    assert event_count(conv.store, conv.id) == 5


def test_recent_events_does_not_repeat_its_head(conv):
    # legacy: n=3, keep_first=1, max_events=100 -> [e0, e0, e1, e2]; fixed: unchanged
    conv.append_many(messages(3))
    result = conv.condense(RecentEventsCondenser(keep_first=1, max_events=100)).result
    assert [text_of(e) for e in result] == ["E0", "E1", "E2"]


def test_recent_events_cuts_only_between_pairs(conv):
    conv.append_many([f.user("task"), *pair(1), *pair(2), *pair(3)])
    # naive tail of 2 would keep [a3, o3]; a tail of 3 would start at o2 and orphan it
    result = conv.condense(RecentEventsCondenser(keep_first=1, max_events=4)).result
    assert [e.seq for e in result] == [0, 5, 6]
    assert_well_formed(result, list(conv.events()))


# --- §7.1 / §7.6 rolling: AmortizedForgetting ---------------------------------------------


@pytest.mark.parametrize("keep_first", [0, 1, 4])
def test_amortized_gives_expected_view_size(conv, keep_first):
    m = 12
    condenser = AmortizedForgettingCondenser(max_size=m, keep_first=keep_first)
    events = messages(60)
    for i, view in enumerate(harness(conv, condenser, events)):
        assert len(view) == expected_size(i, m), i
        assert text_of(view[-1]) == text_of(events[i + expected_condensations(i, m)])
        assert [text_of(e) for e in view[:keep_first]] == [f"E{j}" for j in range(min(keep_first, i + 1))]
        assert len(condensation_rows(conv.store, conv.id)) == expected_condensations(i, m)


def test_amortized_vector_from_7_6(conv):
    condenser = AmortizedForgettingCondenser(max_size=12, keep_first=4)
    views = list(harness(conv, condenser, messages(20)))
    assert len(views) == 18  # two inputs produced condensations instead of views
    rows = condensation_rows(conv.store, conv.id)
    assert [r["id"] for r in rows] == [13, 21]
    assert all(r["strategy"] == "amortized" and r["reason"] == "events" for r in rows)
    assert forgotten_ranges(conv.store, conv.id) == {13: [(4, 10)], 21: [(11, 18)]}
    # right after each condensation
    assert conv.view(at=13).seqs == [0, 1, 2, 3, 11, 12]
    assert conv.view(at=21).seqs == [0, 1, 2, 3, 19, 20]
    assert conv.view().seqs == [0, 1, 2, 3, 19, 20]


@pytest.mark.parametrize(
    "kwargs, setting",
    [
        ({"max_size": 4, "keep_first": 2}, "keep_first"),
        ({"max_size": 0}, "max_size"),
        ({"keep_first": -1}, "keep_first"),
        ({"max_size": 12, "keep_first": 6}, "keep_first"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"hard_fallback": "explode"}, "hard_fallback"),
        ({"minimum_progress": 1.5}, "minimum_progress"),
    ],
)
def test_amortized_invalid_config(kwargs, setting):
    with pytest.raises(ConfigError, match=rf"amortized\.{setting}"):
        AmortizedForgettingCondenser(**kwargs)


@pytest.mark.parametrize(
    "build, setting",
    [
        (lambda: ObservationMaskingCondenser(attention_window=0), "observation_masking.attention_window"),
        (lambda: BrowserOutputCondenser(attention_window=0), "browser_output_masking.attention_window"),
        (lambda: RecentEventsCondenser(keep_first=-1), "recent.keep_first"),
        (lambda: RecentEventsCondenser(max_events=0), "recent.max_events"),
        (lambda: RecentEventsCondenser(keep_first=5, max_events=5), "recent.keep_first"),
    ],
)
def test_view_transformer_invalid_config(build, setting):
    with pytest.raises(ConfigError, match=setting.replace(".", r"\.")):
        build()


def test_pipeline_chains_sub_condensers(conv):
    """§7.1 pipeline_chains_sub_condensers: Amortized(10) then BrowserOutput(2).

    Adapted: a browser output needs its call, so every third step appends a call and its
    page as one unit (two events). The legacy view-size formula counts single events, so it
    is replaced by the bounds it implies: a condensation happens exactly when the view
    outgrows max_size, and leaves the head and the newest max_size // 2 - keep_first
    events (one fewer when keeping exactly that many would orphan a page from its call).
    """
    pipeline = PipelineCondenser([AmortizedForgettingCondenser(max_size=10), BrowserOutputCondenser(attention_window=2)])
    condensations = 0
    for i in range(30):
        # every third step is a browser page (from the second on, so the head is a message)
        unit = browser_pair(i, f"https://example.com/{i}") if i % 3 == 1 else [f.user(f"E{i}")]
        before = len(conv.view()) + len(unit)
        conv.append_many(unit)
        result = conv.condense(pipeline).result
        if isinstance(result, Condensation):
            condensations += 1
            assert before > 10
            after = conv.view()
            assert len(after) in (4, 5)
            assert after[0].seq == 0 and after[-1].seq == unit[-1].seq
            continue
        assert before <= 10 and len(result) == before
        pages = [e for e in result if isinstance(e, ObservationEvent)]
        shown = [("page text" in text_of(p)) for p in pages]
        assert shown == [False] * max(0, len(pages) - 2) + [True] * min(2, len(pages))
        for p in pages[:-2]:
            assert text_of(p).startswith(f"Visited {p.observation['url']}")
        assert_well_formed(result, list(conv.events()))
    assert condensations >= 5


# --- §7.2 ConversationWindow ---------------------------------------------------------------


class Legacy:
    """Builds the §7.2 histories: S, U"x", R"q", RO, C/O pairs and bare O (no call)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.n = 0
        self.last_recall: RecallAction | None = None

    def S(self) -> "Legacy":
        self.events.append(f.system())
        return self

    def U(self, text: str = "User Task 1") -> "Legacy":
        self.events.append(f.user(text))
        return self

    def R(self, query: str = "User Task 1") -> "Legacy":
        self.last_recall = RecallAction(query=query)
        self.events.append(self.last_recall)
        return self

    def RO(self) -> "Legacy":
        assert self.last_recall is not None
        self.events.append(RecallObservation(action_id=self.last_recall.id, content="repo knowledge"))
        return self

    def CO(self) -> "Legacy":
        self.n += 1
        self.events += pair(self.n)
        return self

    def O(self) -> "Legacy":  # noqa: E743 - the reference's letter
        self.n += 1
        self.events.append(f.observation(f"ghost{self.n}"))  # its call is not in the history
        return self


def run_window(conv: Conversation, events: list[Event]) -> tuple[Condensation, set[int]]:
    conv.append_many(events)
    conv.request_condensation()
    result = conv.condense(ConversationWindowCondenser()).result
    assert isinstance(result, Condensation)
    ranges = forgotten_ranges(conv.store, conv.id)[result.seq]
    return result, expand(ranges)


@pytest.mark.parametrize(
    "build, forgotten, kept",
    [
        # legacy [5,6,7,8] (ids from 1): the same events
        (lambda h: h.S().U().R().RO().CO().CO().CO(), {4, 5, 6, 7}, [0, 1, 2, 3, 8, 9]),
        # no_system_message: legacy [4,5,6,7]
        (lambda h: h.U().R().RO().CO().CO().CO(), {3, 4, 5, 6}, [0, 1, 2, 7, 8]),
        # no_recall_observation: legacy [4,5,6,7]; R stays without its observation
        (lambda h: h.S().U().R().CO().CO().CO(), {3, 4, 5, 6}, [0, 1, 2, 7, 8]),
        # short_history_no_truncation: legacy [5,6]
        (lambda h: h.S().U().R().RO().CO(), {4, 5}, [0, 1, 2, 3]),
        # dangling_observations_at_cut_point: legacy [5,6,7,8] = O, O, C, O. The bare
        # observations (ids 4, 5) answer no call, so enforcement already keeps them out of
        # every view; the window then forgets the oldest pair (6, 7) and keeps the newest.
        (lambda h: h.S().U().R().RO().O().O().CO().CO(), {6, 7}, [0, 1, 2, 3, 8, 9]),
        # multiple_user_messages: legacy [5,6,7,8,9]: the second user message, its recall
        # and the recall's (now dangling) observation go; the first user message stays
        (
            lambda h: h.S().U().R().RO().CO().U("User Task 2").R("User Task 2").RO().CO(),
            {4, 5, 6, 7, 8},
            [0, 1, 2, 3, 9, 10],
        ),
    ],
    ids=["basic_truncation", "no_system_message", "no_recall_observation",
         "short_history_no_truncation", "dangling_observations_at_cut_point", "multiple_user_messages"],
)
def test_conversation_window_vectors(conv, build, forgotten, kept):
    history = build(Legacy()).events
    cond, gone = run_window(conv, history)
    assert gone & set(range(len(history))) == forgotten
    view = conv.view()
    assert view.seqs == kept
    assert not view.unhandled_condensation_request
    assert condensation_rows(conv.store, conv.id)[0]["strategy"] == "conversation_window"
    orphans = {e.seq for e in history if isinstance(e, ObservationEvent) and e.tool_call_id.startswith("ghost")}
    if orphans:  # bare observations stay out of every view (enforcement), never forgotten
        assert {s for d in view.dropped for s in d.seqs} == orphans
        view.dropped = []
    assert_well_formed(view, list(conv.events()))


@pytest.mark.parametrize(
    "build",
    [
        # only_essential_events: legacy writes forgotten=[] (and loops on the next request)
        lambda h: h.S().U().R().RO(),
        # only_dangling_observations_in_recent_slice: legacy forgets the two bare observations
        # ([5,6]); here they are already out of the view, which holds only essentials
        lambda h: h.S().U().R().RO().O().O(),
        # empty_history: legacy writes forgotten=[]
        lambda h: h,
    ],
    ids=["only_essential_events", "only_dangling_observations", "empty_history"],
)
def test_conversation_window_never_writes_an_empty_condensation(conv, build):
    history = build(Legacy()).events
    if history:
        conv.append_many(history)
    conv.request_condensation()
    before = event_count(conv.store, conv.id)
    for _ in range(3):  # asked again and again: refuses each time, writes nothing
        with pytest.raises(NoCondensationAvailable):
            conv.condense(ConversationWindowCondenser())
    assert event_count(conv.store, conv.id) == before
    assert condensation_rows(conv.store, conv.id) == []


def test_conversation_window_waits_for_a_request(conv):
    conv.append_many(Legacy().S().U().R().RO().CO().CO().CO().CO().events)
    view = conv.view()
    assert conv.condense(ConversationWindowCondenser()).result is view


# --- requirements: SOFT, HARD, fallbacks, no loops ----------------------------------------


def thinking_loop_history(pairs: int = 12) -> list[Event]:
    """A system prompt, then one tool loop that starts with thinking and never ends."""
    events: list[Event] = [f.system()]
    for k in range(pairs):
        events += pair(k, think=(k == 0))
    return events


def test_events_only_is_soft(conv):
    conv.append_many(thinking_loop_history())
    condenser = AmortizedForgettingCondenser(max_size=10, keep_first=2)
    view = conv.view()
    assert condenser.reasons(view) == {condenser_module.Reason.EVENTS}
    for _ in range(5):  # stays uncondensable; each step returns the view and writes nothing
        result = conv.step(condenser)
        assert result.seqs == view.seqs
    assert event_count(conv.store, conv.id) == 25
    assert condensation_rows(conv.store, conv.id) == []


def test_request_is_hard_and_raises_by_default(conv):
    conv.append_many(thinking_loop_history())
    conv.request_condensation()
    condenser = AmortizedForgettingCondenser(max_size=10, keep_first=2)
    before = event_count(conv.store, conv.id)
    for _ in range(3):
        with pytest.raises(NoCondensationAvailable):
            conv.step(condenser)
    assert event_count(conv.store, conv.id) == before
    assert conv.view().unhandled_condensation_request


def test_request_with_reset_fallback_writes_a_reset(conv):
    conv.append_many(thinking_loop_history())
    conv.request_condensation()
    condenser = AmortizedForgettingCondenser(max_size=10, keep_first=2, hard_fallback="reset")
    view = conv.step(condenser)
    assert [type(e) for e in view] == [SystemPromptEvent]
    (row,) = condensation_rows(conv.store, conv.id)
    assert "request" in row["reason"] and "reset" in row["reason"]
    assert not view.unhandled_condensation_request
    for _ in range(5):  # handled: later steps change nothing
        assert conv.step(condenser).seqs == [0]
    assert len(condensation_rows(conv.store, conv.id)) == 1


def test_request_on_a_small_view_halves_it(conv):
    # legacy: a request while n <= max_size // 2 crashed on an empty min(); the SDK fix
    # keeps len(view) // 2 - keep_first events from the tail
    conv.append_many(messages(8))
    conv.request_condensation()
    condenser = AmortizedForgettingCondenser(max_size=100, keep_first=1)
    view = conv.step(condenser)
    assert view.seqs == [0, 5, 6, 7]
    assert condensation_rows(conv.store, conv.id)[0]["reason"] == "request"


def test_pending_tool_call_defers_and_never_loops(conv):
    conv.append_many([f.system(), f.user("task")])
    for k in range(8):
        conv.append_many(pair(k))
    condenser = AmortizedForgettingCondenser(max_size=10, keep_first=2)
    # a call still waiting for its result: the view leaves it out, and a cut stays possible
    conv.append(f.action("rp", "pending"))
    steps = 0
    while steps < 20:
        steps += 1
        before = event_count(conv.store, conv.id)
        conv.step(condenser)
        if event_count(conv.store, conv.id) == before:
            break
    assert steps <= 2
    assert len(conv.view()) <= 10


# --- token trigger ---------------------------------------------------------------------------


def token_history() -> list[Event]:
    return [
        f.system(), f.user("please investigate"),
        *pair(1, "x" * 40_000),  # sent cut to 30,000 characters (a terminal's cap): ~7.5k tokens
        *pair(2, "short"), *pair(3, "short too"),
    ]


def test_long_observation_triggers_a_hard_token_condensation(conv):
    conv.append_many(token_history())
    condenser = AmortizedForgettingCondenser(max_size=100, keep_first=2, max_tokens=3000, tokenizer="chars/4")
    view = conv.step(condenser)
    assert view.seqs == [0, 1, 4, 5, 6, 7]
    (row,) = condensation_rows(conv.store, conv.id)
    assert row["reason"] == "tokens"
    assert row["tokens_before"] > 7_500 > 1500 > row["tokens_after"] > 0
    assert condenser.view_tokens(view, conv.tokens) == row["tokens_after"]
    # counts are cached in the rows of every LLM-visible event the views covered
    counts = dict(conv.store.db.execute(
        "SELECT id, token_count FROM event WHERE conversation_id = ? AND llm_visible", (conv.id,)))
    assert all(n is not None and n > 0 for n in counts.values()), counts
    assert counts[3] > 7_500
    # and the next step is quiet
    assert conv.step(condenser).seqs == view.seqs
    assert len(condensation_rows(conv.store, conv.id)) == 1


def test_token_trigger_with_no_cut_is_hard(conv):
    # the huge observation is in the one thinking loop that spans the view: no cut, HARD
    events = [f.system(), *pair(0, "y" * 40_000, think=True), *pair(1)]
    conv.append_many(events)
    raising = AmortizedForgettingCondenser(max_size=100, keep_first=2, max_tokens=3000, tokenizer="chars/4")
    with pytest.raises(NoCondensationAvailable):
        conv.step(raising)
    assert condensation_rows(conv.store, conv.id) == []
    resetting = AmortizedForgettingCondenser(
        max_size=100, keep_first=2, max_tokens=3000, tokenizer="chars/4", hard_fallback="reset")
    assert conv.step(resetting).seqs == [0]
    assert condensation_rows(conv.store, conv.id)[0]["reason"].startswith("tokens")


def test_condense_says_what_a_step_did(conv):
    """``conv.condense`` returns the outcome the condense command prints: what was forgotten,
    the tokens before and after and who counted them, the fallback that made it."""
    events = [f.system(), *pair(0, "y" * 40_000, think=True), *pair(1)]
    conv.append_many(events)
    resetting = AmortizedForgettingCondenser(
        max_size=100, keep_first=2, max_tokens=3000, tokenizer="chars/4", hard_fallback="reset")
    preview = conv.condense(resetting, dry_run=True)
    assert preview.stored_as is None and len(conv) == len(events)  # a dry run writes nothing
    done = conv.condense(resetting)
    assert done.stored_as == len(events) and conv.view().seqs == [0]
    assert done.forgotten_ids == preview.forgotten_ids == done.view.seqs[1:]
    assert done.fallback == "reset" and done.failure is None and done.error is None
    row = condensation_rows(conv.store, conv.id)[0]
    assert (done.tokens_before, done.tokens_after) == (row["tokens_before"], row["tokens_after"])
    assert done.tokens_before > 3000 > done.tokens_after and done.token_counter == "chars/4"
    # a strategy that counts nothing: the declared estimate, said as such
    conv.append_many([f.user() for _ in range(12)])
    plain = conv.condense(AmortizedForgettingCondenser(max_size=12, keep_first=1))
    assert plain.condensation is not None and plain.token_counter == "chars/4 estimate"
    assert plain.tokens_before > plain.tokens_after > 0


@dataclass(frozen=True)
class SevenPerMessage:
    name: str = "seven-per-message"

    def count(self, messages: list[dict]) -> int:
        return 7 * len(messages)


class SevenAmortized(AmortizedForgettingCondenser):
    def counter(self):
        return SevenPerMessage()


def test_switching_tokenizer_clears_cached_counts(conv):
    conv.append_many(token_history())
    AmortizedForgettingCondenser(max_size=100, keep_first=2, max_tokens=3000, tokenizer="chars/4")
    conv.step(AmortizedForgettingCondenser(max_size=100, keep_first=2, max_tokens=3000, tokenizer="chars/4"))
    assert conv.metadata["token_counter"] == "chars/4"
    forgotten_before = conv.store.db.execute(
        "SELECT token_count FROM event WHERE conversation_id = ? AND id = 3", (conv.id,)).fetchone()[0]
    assert forgotten_before > 7_500
    conv.step(SevenAmortized(max_size=100, keep_first=2, max_tokens=10**6))
    assert conv.metadata["token_counter"] == "seven-per-message"
    counts = dict(conv.store.db.execute(
        "SELECT id, token_count FROM event WHERE conversation_id = ? AND llm_visible", (conv.id,)))
    # the forgotten events' counts were cleared; the visible ones were recounted
    assert counts[2] is None and counts[3] is None
    assert all(counts[i] == 7 for i in conv.view().seqs)


def test_model_tokenizer_and_context_window_cap():
    """The one test that imports litellm (about 2 s)."""
    from openhands_memory.llm import context_window

    window = context_window("gpt-4o")
    assert window is not None and window >= 100_000
    capped = AmortizedForgettingCondenser(max_size=100, max_tokens=10**9, tokenizer="gpt-4o")
    assert capped.token_limit() == window
    assert AmortizedForgettingCondenser(max_size=100, max_tokens=1000, tokenizer="gpt-4o").token_limit() == 1000
    assert AmortizedForgettingCondenser(max_size=100, max_tokens=1000, tokenizer="chars/4").token_limit() == 1000


def test_model_tokenizer_counts_and_replaces_estimates(tmp_path):
    with EventStore(tmp_path / "tok.db") as store:
        conv = store.create_conversation("t")
        conv.append_many(token_history())
        conv.step(AmortizedForgettingCondenser(max_size=100, keep_first=2, max_tokens=10**6, tokenizer="chars/4"))
        estimate = dict(store.db.execute("SELECT id, token_count FROM event WHERE conversation_id = 't'"))
        conv.step(AmortizedForgettingCondenser(max_size=100, keep_first=2, max_tokens=10**6, tokenizer="gpt-4o"))
        assert conv.metadata["token_counter"] == "litellm:gpt-4o"
        counted = dict(store.db.execute("SELECT id, token_count FROM event WHERE conversation_id = 't'"))
        assert all(counted[i] is not None for i in range(8))
        assert counted != estimate
        assert 2_000 < counted[3] < 40_000  # 40k repeated characters: tiktoken packs them


# --- long runs ---------------------------------------------------------------------------------


class AgentHistory:
    """Generated agent work: messages, single calls, parallel batches, errors, requests, and
    thinking tool loops whose batches arrive one at a time (a step between each, as in an
    agent loop) and which end with the agent's reply.

    ``units()`` yields what the agent appends between two steps: one event or one answered
    call/batch. ``slack`` bounds how far past ``max_size`` a view may get: the largest unit
    (a batch of 4 calls and results) or the longest tool loop (10 events), which strategies
    keep or forget whole.
    """

    slack = 10

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.n = 0

    def _id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def _result(self, call: str) -> Event:
        if self.rng.random() < 0.1:
            return f.error(call, "command not found")
        return f.observation(call, "o" * self.rng.choice([20, 200, 2000]))

    def _batch(self, k: int, think: bool = False) -> list[Event]:
        rid = self._id("resp")
        calls = [self._id("call") for _ in range(k)]
        acts = [f.action(rid, c, think=think and i == 0) for i, c in enumerate(calls)]
        return acts + [self._result(c) for c in calls]

    def units(self) -> Iterator[list[Event]]:
        yield [f.system()]
        yield [f.user("the task")]
        while True:
            roll = self.rng.random()
            if roll < 0.10:
                yield [f.user(f"follow-up {self.n}")]
            elif roll < 0.20:
                yield [f.agent_says(f"report {self.n}")]
            elif roll < 0.55:
                yield self._batch(1)
            elif roll < 0.70:
                yield self._batch(self.rng.choice([2, 3, 4]))
            elif roll < 0.90:  # a thinking tool loop: at most 2 + 3 calls, then a reply
                yield self._batch(self.rng.choice([1, 2]), think=True)
                for _ in range(self.rng.randint(1, 3)):
                    yield self._batch(1)
                yield [f.agent_says(f"loop done {self.n}")]
            elif roll < 0.98:
                call = self._id("call")
                yield [f.action(self._id("resp"), call), f.error(call, "invalid arguments")]
            else:
                yield [CondensationRequest()]


def rolling_strategies() -> list[tuple[str, object]]:
    """Every rolling strategy that runs offline, at sizes that give many rounds quickly."""
    out: list[tuple[str, object]] = [
        ("amortized", AmortizedForgettingCondenser(max_size=40, keep_first=2)),
        ("amortized+tokens", AmortizedForgettingCondenser(
            max_size=60, keep_first=2, max_tokens=2500, tokenizer="chars/4")),
    ]
    for name in ("LLMSummarizingCondenser", "StructuredSummaryCondenser", "LLMAttentionCondenser"):
        cls = getattr(condenser_module, name, None)
        if cls is None:
            continue
        try:
            out.append((name, cls(max_size=40, keep_first=2)))  # no llm_config: offline default
        except (TypeError, ConfigError):
            continue
    return out


@pytest.mark.parametrize("name, condenser", rolling_strategies(), ids=lambda x: x if isinstance(x, str) else "")
def test_long_run_stays_bounded_and_well_formed(tmp_path, name, condenser):
    bound = condenser.max_size + AgentHistory.slack
    with EventStore(tmp_path / "long.db") as store:
        conv = store.create_conversation("long")
        history: list[Event] = []
        gen = AgentHistory(seed=sum(map(ord, name))).units()
        rounds = steps = 0
        while rounds < 50:
            steps += 1
            assert steps < 5000, "too few condensations"
            unit = next(gen)
            conv.append_many(unit)
            history += unit
            before = event_count(store, conv.id)
            try:
                view = conv.step(condenser)
            except NoCondensationAvailable:
                assert event_count(store, conv.id) == before  # refused, and wrote nothing
                continue
            if event_count(store, conv.id) > before:
                rounds += 1
                history.append(conv.get(before))
                assert isinstance(history[-1], Condensation)
            assert len(view) <= bound, f"step {steps}: {len(view)} events"
            assert_well_formed(view, history, where=f"{name} step {steps}")
            assert conv.step(condenser).seqs == view.seqs  # idempotent: nothing more to do
            summaries = [e for e in view if isinstance(e, CondensationSummaryEvent)]
            assert len(summaries) <= 1
        # the stored rows tell the same story as the in-memory history
        assert event_count(store, conv.id) == len(history)
        assert len(condensation_rows(store, conv.id)) == rounds


# --- races -------------------------------------------------------------------------------------


@dataclass
class Interleaved(NoOpCondenser):
    """Condenses with ``inner``, but lets ``rival`` condense after our view was read."""

    inner: object = None
    rival: object = None

    def condense(self, view: View, tokens=FRESH, calls=None):
        result = self.inner.condense(view, tokens, calls)
        if self.rival is not None:
            rival, self.rival = self.rival, None
            assert isinstance(rival.condense(self.inner).result, Condensation)
        return result


def test_two_stores_race_one_condensation_wins(db_path):
    with EventStore(db_path) as s1, EventStore(db_path) as s2:
        c1 = s1.create_conversation("race")
        c2 = s2.conversation("race")
        c1.append_many(messages(13))
        amortized = AmortizedForgettingCondenser(max_size=12, keep_first=4)
        assert c1.view().seqs == c2.view().seqs  # both computed a view
        with pytest.raises(ConcurrentCondensation):
            c1.condense(Interleaved(inner=amortized, rival=c2))
        assert [r["id"] for r in condensation_rows(s1, "race")] == [13]
        assert event_count(s1, "race") == 14
        assert forgotten_ranges(s1, "race") == {13: [(4, 10)]}
        # the loser's next try starts from a fresh view: nothing left to do
        assert c1.condense(amortized).result.seqs == [0, 1, 2, 3, 11, 12]


def test_two_stores_race_explicit_views(db_path):
    with EventStore(db_path) as s1, EventStore(db_path) as s2:
        c1 = s1.create_conversation("race")
        c1.append_many(messages(13))
        c2 = s2.conversation("race")
        amortized = AmortizedForgettingCondenser(max_size=12, keep_first=4)
        v1, v2 = c1.view(), c2.view()
        k1, k2 = amortized.condense(v1), amortized.condense(v2)
        assert isinstance(k1, Condensation) and isinstance(k2, Condensation)
        with c2.writing() as w:
            w.condensation(k2, view=v2)
        with pytest.raises(ConcurrentCondensation):
            with c1.writing() as w:
                w.condensation(k1, view=v1)
        assert event_count(s1, "race") == 14
        assert len(condensation_rows(s1, "race")) == 1
        assert s1.db.execute("SELECT COUNT(*) FROM forgotten_range").fetchone()[0] == 1
        assert stale_condensations(forgotten_ranges(s1, "race")) == []
        # had the loser written anyway, the stale-view check below would flag it
        with c1.writing() as w:  # no view given: nothing checks it is fresh
            w.condensation(k1)
        assert stale_condensations(forgotten_ranges(s1, "race")) == [14]


def stale_condensations(ranges: dict[int, list[tuple[int, int]]]) -> list[int]:
    """Condensations that look computed from a stale view.

    With AmortizedForgetting, a condensation made from the current view forgets events
    that all come after everything earlier condensations forgot (the head stays, the
    forgotten middle moves forward). One made from a view read before an earlier
    condensation landed forgets some of the same events again.
    """
    stale, seen = [], -1
    for cid in sorted(ranges):
        ids = expand(ranges[cid])
        if min(ids) <= seen:
            stale.append(cid)
        seen = max(seen, max(ids))
    return stale


def _stepper(path: str, cid: str, done, out) -> None:
    store = EventStore(path)
    conv = store.conversation(cid)
    condenser = AmortizedForgettingCondenser(max_size=20, keep_first=2)
    steps = lost = 0
    try:
        while True:
            finished = done.is_set()
            try:
                view = conv.step(condenser)
                steps += 1
                if view.dropped:
                    out.put(("dropped", repr(view.dropped)))
                    return
            except ConcurrentCondensation:
                lost += 1
            if finished:
                break
        out.put(("ok", steps, lost))
    except BaseException as e:  # pragma: no cover - reported to the parent
        out.put(("error", repr(e)))
    finally:
        store.close()


def _appender(path: str, cid: str, units: int, done) -> None:
    store = EventStore(path)
    conv = store.conversation(cid)
    try:
        for k in range(units):
            if k % 4 == 3:
                conv.append(f.agent_says(f"note {k}"))
            else:
                conv.append_many(pair(k, "out" * 30))
            time.sleep(0.001)
    finally:
        done.set()
        store.close()


def test_two_processes_stepping_while_a_third_appends(db_path):
    with EventStore(db_path) as store:
        conv = store.create_conversation("mp")
        conv.append_many([f.system(), f.user("task")])
    ctx = multiprocessing.get_context("spawn")
    done, out = ctx.Event(), ctx.Queue()
    steppers = [ctx.Process(target=_stepper, args=(str(db_path), "mp", done, out)) for _ in range(2)]
    appender = ctx.Process(target=_appender, args=(str(db_path), "mp", 300, done))
    for p in steppers:
        p.start()
    appender.start()
    reports = [out.get(timeout=120) for _ in steppers]
    for p in [*steppers, appender]:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert all(r[0] == "ok" for r in reports), reports
    with EventStore(db_path) as store:
        conv = store.conversation("mp")
        ranges = forgotten_ranges(store, "mp")
        assert len(ranges) >= 5
        assert stale_condensations(ranges) == []
        view = conv.view()
        history = list(conv.events())
        assert_well_formed(view, history, where="final")
        assert len(view) <= 20 + AgentHistory.slack
        appended = sum(1 if k % 4 == 3 else 2 for k in range(300))
        assert event_count(store, "mp") == 2 + appended + len(ranges)


def test_a_dry_run_writes_nothing_not_even_token_counts(store, conv):
    """Token counts are cached in rows by the conversation; a dry run keeps them in memory."""
    conv.append_many([f.system(), f.user()] + [e for i in range(30) for e in (f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}"))])
    condenser = AmortizedForgettingCondenser(max_size=20, keep_first=2, max_tokens=100, tokenizer="chars/4")
    before = store.db.execute("SELECT COUNT(token_count), metadata FROM event, conversation").fetchone()
    assert isinstance(conv.condense(condenser, dry_run=True).result, Condensation)
    assert store.db.execute("SELECT COUNT(token_count), metadata FROM event, conversation").fetchone() == before
    assert len(conv) == 62
    conv.condense(condenser)  # for real: the counts are cached now
    assert store.db.execute("SELECT COUNT(token_count) FROM event").fetchone()[0] > 0


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: AmortizedForgettingCondenser(max_size=20.0), "amortized.max_size (20.0) must be an integer"),
        (lambda: AmortizedForgettingCondenser(max_size=True), "amortized.max_size (True) must be an integer"),
        (lambda: AmortizedForgettingCondenser(max_sise=20), "amortized.max_sise is not a setting of type 'amortized'; did you mean 'max_size'?"),
        (lambda: BrowserOutputCondenser(attention_window=0), "browser_output_masking.attention_window (0) must be at least 1"),
        (lambda: PipelineCondenser([NoOpCondenser(), "recent"]), "pipeline.condensers[1] ('recent') must be an instance of Condenser"),
    ],
)
def test_settings_are_checked_in_python_as_in_toml(build, message):
    """A typo or a wrong type passed in Python is the same one-line ConfigError a TOML file
    gets, never a value silently kept (10.0 events) or a keyword silently dropped."""
    with pytest.raises(ConfigError) as info:
        build()
    assert str(info.value) == message
