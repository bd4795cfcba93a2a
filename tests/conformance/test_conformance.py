"""This project side by side with the real OpenHands SDK (1.58.x) on the same histories.

For every case (tests/conformance/trajectories.py) the SDK's ``View.from_events`` and
``LLM.format_messages_for_llm`` run in the SDK's own environment (one subprocess for all
cases, see conftest.py), and this project's view (both the SQL view of a stored conversation
and the in-memory fold) must give:

* the same view, event id for event id, and the same ``unhandled_condensation_request``;
* the same provider messages for each model configuration (the switches the SDK resolves
  for it are passed to ``view.to_messages``): roles, tool-call ids, contents with every tool
  result rendered, thinking blocks, reasoning content, cache markers;
* the same condenser decision (what is forgotten, the summary's offset, or a refusal) where
  the case asks for one, the SDK's summary call being stubbed.

Branched histories (the SDK's history tree): the events stored in one ``append_many`` (their
parents resolved by uid) and HEAD moved with ``navigate``, or appended without parents stretch by
stretch with ``navigate`` in between; ``conv.view()`` must be the SDK's ``View.from_events`` of
``path_to_root(HEAD)``, ``conv.view(at=N)`` the SDK's view of ``path_to_root(N)``.

Differences that come from this project's design are asserted as such (docs/architecture.md,
"Where our semantics differ from the SDK"): several live summaries (we show the newest), and
tool results placed right after their batch when another event sits between.
"""

from __future__ import annotations

import json
import uuid

import pytest

from openhands_memory.condensers import LLMSummarizingCondenser
from openhands_memory.errors import NoCondensationAvailable
from openhands_memory.events import ActionEvent, Condensation, ObservationBase, event_from_dict
from openhands_memory.conversation import Conversation, EventStore
from openhands_memory.view import View

from .conftest import CASES
from .trajectories import ROOT_PARENT_ID
from .exports import SETTINGS

BY_ID = {c["id"]: c for c in CASES}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = EventStore(tmp_path_factory.mktemp("conformance") / "conformance.db")
    yield s
    s.close()


def our_views(case: dict, store: EventStore) -> tuple[View, View]:
    """(the stored conversation's view, the in-memory view) of a case's events."""
    events = [event_from_dict(e) for e in case["events"]]
    memory = View.from_events(events)
    conv = store.create_conversation(str(uuid.uuid4()))
    conv.append_many([event_from_dict(e) for e in case["events"]])
    return conv.view(), memory


def results_pulled_forward(view: View) -> bool:
    """Does an event sit between a batch and one of its results (the documented difference)?"""
    events = view.events
    i = 0
    while i < len(events):
        e = events[i]
        if not isinstance(e, ActionEvent):
            i += 1
            continue
        calls = set()
        j = i
        while j < len(events) and isinstance(events[j], ActionEvent) and events[j].llm_response_id == e.llm_response_id:
            calls.add(events[j].tool_call_id)
            j += 1
        while j < len(events) and calls and isinstance(events[j], ObservationBase) and events[j].tool_call_id in calls:
            calls.discard(events[j].tool_call_id)
            j += 1
        answered_later = {x.tool_call_id for x in events[j:] if isinstance(x, ObservationBase)}
        if calls & answered_later:
            return True
        i = max(j, i + 1)
    return False


def difference(case: dict, view: View, sdk_view: list[str]) -> str | None:
    """Which documented difference applies to a case, if any."""
    if case.get("difference"):
        return case["difference"]
    if len(summaries(sdk_view)) > 1:
        # Arises in SDK histories too: after a hard reset (summary right after the system
        # prompt) a condenser with keep_first >= 2 keeps that summary and adds new ones.
        return "latest-summary-only"
    if results_pulled_forward(view):
        return "results-after-their-batch"
    return None


def same_calls_and_results(ours: list[dict], theirs: list[dict]) -> bool:
    """Equal assistant and tool messages, order aside (the SDK's order can put a result after
    a later assistant turn; ours cannot)."""
    key = lambda m: json.dumps(m, sort_keys=True)  # noqa: E731
    pick = lambda ms: sorted(key(m) for m in ms if m["role"] in ("assistant", "tool"))  # noqa: E731
    return pick(ours) == pick(theirs)


def options(switches: dict) -> dict:
    return {k: switches[k] for k in ("vision", "reasoning_content", "cache_prompt", "string_content")}


def summaries(ids: list[str]) -> list[str]:
    return [i for i in ids if i.endswith("-summary")]


TREES = [c["id"] for c in CASES if "leaf" in c]  # branched histories (the SDK's tree)
LINEAR = [i for i in BY_ID if i not in set(TREES)]


@pytest.mark.parametrize("case_id", LINEAR)
def test_view_and_messages_equal_the_sdk(case_id, sdk, store):
    case, theirs = BY_ID[case_id], sdk["cases"][case_id]
    assert "error" not in theirs, f"the SDK could not take this history: {theirs.get('error')}"
    stored, memory = our_views(case, store)
    assert_like_the_sdk(case, stored, memory, theirs, sdk["switches"])


def assert_like_the_sdk(case: dict, stored: View, memory: View, theirs: dict, switches_of: dict, where: str = "") -> None:
    """Our stored view and in-memory fold of one history against the SDK's view of it (``theirs``:
    ids, request flag, messages per config), documented differences asserted as such."""
    ours, folded = [e.id for e in stored.events], [e.id for e in memory.events]
    if ours != folded:
        pytest.fail(f"{where}: the stored view is not the in-memory fold of the same events "
                    f"(the fold {'equals' if folded == theirs['view'] else 'differs from'} the SDK's view)\n"
                    + explain(case, ours, theirs["view"]))
    assert stored.unhandled_condensation_request == memory.unhandled_condensation_request, where
    assert stored.unhandled_condensation_request == theirs["unhandled_condensation_request"], where

    why = difference(case, stored, theirs["view"])
    if why == "latest-summary-only":
        # The SDK keeps every summary no later condensation forgot; we show the newest only.
        assert [i for i in ours if not i.endswith("-summary")] == [i for i in theirs["view"] if not i.endswith("-summary")], (
            f"{where}\n" + explain(case, ours, theirs["view"]))
        assert len(summaries(theirs["view"])) > 1 and summaries(ours) == summaries(theirs["view"])[-1:], where
        return
    assert ours == theirs["view"], f"{where}\n" + explain(case, ours, theirs["view"])

    for name in case["configs"]:
        switches = switches_of[name]
        assert switches["native_tool_calling"]
        mine = stored.to_messages(**options(switches))
        assert mine == memory.to_messages(**options(switches)), f"{where} {name}"
        sdk_messages = theirs["messages"][name]
        if why == "results-after-their-batch":
            # The same assistant and tool messages; ours put each batch's results right after it.
            assert same_calls_and_results(mine, sdk_messages), f"{where} {name}"
            continue
        assert [m["role"] for m in mine] == [m["role"] for m in sdk_messages], f"{where} {name}"
        for k, (a, b) in enumerate(zip(mine, sdk_messages)):
            assert a == b, f"{where} {name}: message {k} differs"


def explain(case: dict, ours: list[str], theirs: list[str]) -> str:
    """Where two views differ, by position in the case's events (kind, tool call)."""
    at = {e["id"]: (i, e) for i, e in enumerate(case["events"])}

    def name(uid: str) -> str:
        if uid not in at:
            return f"summary of {at[uid.removesuffix('-summary')][0]}" if uid.removesuffix("-summary") in at else uid
        i, e = at[uid]
        return f"{i} {e['kind']}" + (f" {e['tool_call_id']}" if e.get("tool_call_id") else "")

    mine, sdk = set(ours), set(theirs)
    return (f"  ours:      {[at[u][0] if u in at else 'summary' for u in ours]}\n"
            f"  the SDK's: {[at[u][0] if u in at else 'summary' for u in theirs]}\n"
            f"  only ours: {[name(u) for u in ours if u not in sdk]}; only the SDK's: {[name(u) for u in theirs if u not in mine]}")


# --- branched histories -------------------------------------------------------------------------


def path_to_root(case: dict, uid: str | None) -> list[dict]:
    """The SDK's ``EventLog.path_to_root`` over a case's event dicts, root first."""
    by_id = {e["id"]: (i, e) for i, e in enumerate(case["events"])}
    out = []
    while uid is not None:
        i, e = by_id[uid]
        out.append(e)
        parent = e.get("parent_id")
        uid = None if parent == ROOT_PARENT_ID else parent if parent is not None else (
            case["events"][i - 1]["id"] if i > 0 else None)
    return out[::-1]


def stored_tree(case: dict, store: EventStore) -> tuple[Conversation, dict[str, int]]:
    """A case's events stored in one ``append_many`` (parents resolved by uid), HEAD moved to
    the case's leaf (or emptied); with the sequence number of each uid."""
    conv = store.create_conversation(str(uuid.uuid4()))
    seqs = conv.append_many([event_from_dict(e) for e in case["events"]])
    seq_of = {e["id"]: s for e, s in zip(case["events"], seqs)}
    conv.navigate(None if case["head_is_empty"] else seq_of[case["leaf"]])
    return conv, seq_of


def fold(events: list[dict]) -> View:
    return View.from_events([event_from_dict(e) for e in events])


@pytest.mark.parametrize("case_id", TREES)
def test_branched_view_and_messages_equal_the_sdk(case_id, sdk, store):
    """HEAD's view (``conv.view()``) and the view from each abandoned branch's event
    (``conv.view(at=...)``) are the SDK's ``View.from_events(path_to_root(...))``."""
    case, theirs = BY_ID[case_id], sdk["cases"][case_id]
    assert "error" not in theirs, f"the SDK could not take this history: {theirs.get('error')}"
    conv, seq_of = stored_tree(case, store)
    head = None if case["head_is_empty"] else case["leaf"]
    assert conv.head == (None if head is None else seq_of[head])
    assert_like_the_sdk(case, conv.view(), fold(path_to_root(case, head)), theirs, sdk["switches"], "HEAD")
    for uid in case["other_leaves"]:
        assert_like_the_sdk(case, conv.view(at=seq_of[uid]), fold(path_to_root(case, uid)), theirs["others"][uid],
                            sdk["switches"], f"at {seq_of[uid]}")


@pytest.mark.parametrize("case_id", TREES)
def test_branched_history_appended_turn_by_turn_follows_head(case_id, sdk, store):
    """The same history written as an agent on this library writes it: one ``append_many``
    per stretch between two navigations, ``navigate`` in between and a view read after each
    stretch, the events without their ``parent_id`` wherever HEAD gives it (the row before, or
    the event navigated to). An event after a state update names its parent (the SDK skips
    the state update; an event without ``parent_id`` would follow it, the SDK's own rule)."""
    case, theirs = BY_ID[case_id], sdk["cases"][case_id]
    assert "error" not in theirs, f"the SDK could not take this history: {theirs.get('error')}"
    conv = store.create_conversation(str(uuid.uuid4()))
    def written(i: int, e: dict) -> dict:
        follows_state_update = i > 0 and case["events"][i - 1]["kind"] == "ConversationStateUpdateEvent"
        keep = follows_state_update and e.get("parent_id") != case["events"][i - 1]["id"]
        return e if keep else {k: v for k, v in e.items() if k != "parent_id"}

    events = [event_from_dict(written(i, e)) for i, e in enumerate(case["events"])]
    seq_of: dict[str, int] = {}
    cuts = sorted({i for i, _ in case["navigations"]} | {0, len(events)})
    moves: dict[int, list] = {}
    for i, uid in case["navigations"]:
        moves.setdefault(i, []).append(uid)
    for lo, hi in zip(cuts, cuts[1:] + [None]):
        for uid in moves.get(lo, []):
            conv.navigate(None if uid is None else seq_of[uid])
        if hi is None or lo == hi:
            continue
        seqs = conv.append_many(events[lo:hi])
        seq_of.update((e.id, s) for e, s in zip(events[lo:hi], seqs))
        conv.view()  # the cached view follows the branch being written
    head = None if case["head_is_empty"] else case["leaf"]
    assert conv.head == (None if head is None else seq_of[head])
    for where, view, sdk_view in [("HEAD", conv.view(), theirs)] + [
            (f"at {seq_of[u]}", conv.view(at=seq_of[u]), theirs["others"][u]) for u in case["other_leaves"]]:
        ours = [e.id for e in view.events]
        assert view.unhandled_condensation_request == sdk_view["unhandled_condensation_request"], where
        if difference(case, view, sdk_view["view"]) == "latest-summary-only":
            assert [i for i in ours if not i.endswith("-summary")] == [i for i in sdk_view["view"] if not i.endswith("-summary")], (
                f"{where}\n" + explain(case, ours, sdk_view["view"]))
        else:
            assert ours == sdk_view["view"], f"{where}\n" + explain(case, ours, sdk_view["view"])


CONDENSE = [c["id"] for c in CASES if c.get("condense")]


@pytest.mark.parametrize("case_id", CONDENSE)
def test_condenser_decision_equals_the_sdk(case_id, sdk, store):
    """What LLMSummarizingCondenser forgets (the view events, the old summary included)."""
    case, theirs = BY_ID[case_id], sdk["cases"][case_id]["condense"]
    view, _ = our_views(case, store)
    condenser = LLMSummarizingCondenser(**case["condense"])  # offline summarizer; same cut rules
    try:
        out = condenser.condense(view)
    except NoCondensationAvailable:
        assert theirs["outcome"] == "raised"
        return
    if isinstance(out, View):
        assert theirs["outcome"] == "view"
        return
    assert isinstance(out, Condensation)
    assert theirs["outcome"] == "condensation"
    gone = [e.id for e in view.events if e.seq is not None and any(s <= e.seq <= t for s, t in out.forgotten_ranges or [])]
    if view.summary_event is not None:  # a new summary replaces the old one
        gone.append(view.summary_event.id)
    assert sorted(gone) == theirs["forgotten"]
    assert out.summary_offset == theirs["summary_offset"] - (
        1 if view.summary_event is not None and view.events.index(view.summary_event) < theirs["summary_offset"] else 0
    )


EXPORTS = [f"export/{seed}-{cls.type}" for seed, _, cls, _ in SETTINGS]


@pytest.mark.parametrize("case_id", EXPORTS)
def test_our_export_resumed_by_the_sdk_shows_our_view(case_id, sdk):
    """Our condensations, exported as an SDK folder and resumed by the SDK: same view (each new
    summary replaced the previous one there too) and same messages."""
    theirs = sdk["cases"][case_id]
    assert "error" not in theirs, f"the SDK could not resume the export: {theirs.get('error')}"
    conv = sdk["exported"][case_id]
    view = conv.view()
    (made,) = conv.store.db.execute("SELECT COUNT(*) FROM condensation WHERE conversation_id = ?", (conv.id,)).fetchone()
    assert made >= 2  # several summaries, each replacing the one before
    assert sum(1 for e in view.events if e.seq is None) == 1  # one summary, ours
    assert [e.id for e in view.events] == theirs["view"]
    assert view.unhandled_condensation_request == theirs["unhandled_condensation_request"]
    for name, switches in sdk["switches"].items():
        assert view.to_messages(**options(switches)) == theirs["messages"][name], name
