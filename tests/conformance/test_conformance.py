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
from openhands_memory.conversation import EventStore
from openhands_memory.view import View

from .conftest import CASES
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


@pytest.mark.parametrize("case_id", list(BY_ID))
def test_view_and_messages_equal_the_sdk(case_id, sdk, store):
    case, theirs = BY_ID[case_id], sdk["cases"][case_id]
    assert "error" not in theirs, f"the SDK could not take this history: {theirs.get('error')}"
    stored, memory = our_views(case, store)
    ours = [e.id for e in stored.events]
    assert ours == [e.id for e in memory.events]
    assert stored.unhandled_condensation_request == memory.unhandled_condensation_request
    assert stored.unhandled_condensation_request == theirs["unhandled_condensation_request"]

    why = difference(case, stored, theirs["view"])
    if why == "latest-summary-only":
        # The SDK keeps every summary no later condensation forgot; we show the newest only.
        assert [i for i in ours if not i.endswith("-summary")] == [i for i in theirs["view"] if not i.endswith("-summary")]
        assert len(summaries(theirs["view"])) > 1 and summaries(ours) == summaries(theirs["view"])[-1:]
        return
    assert ours == theirs["view"]

    for name in case["configs"]:
        switches = sdk["switches"][name]
        assert switches["native_tool_calling"]
        mine = stored.to_messages(**options(switches))
        assert mine == memory.to_messages(**options(switches))
        sdk_messages = theirs["messages"][name]
        if why == "results-after-their-batch":
            # The same assistant and tool messages; ours put each batch's results right after it.
            assert same_calls_and_results(mine, sdk_messages), name
            continue
        assert [m["role"] for m in mine] == [m["role"] for m in sdk_messages], name
        for k, (a, b) in enumerate(zip(mine, sdk_messages)):
            assert a == b, f"{name}: message {k} differs"


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
