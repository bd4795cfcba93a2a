"""The recall tools for any function-calling agent: their specs, and ``call_recall_tool`` run
on a real SQLite conversation whose failure a condensation hid."""

from __future__ import annotations

import json
import re

import pytest

from openhands_memory.conversation import EventStore
from openhands_memory.conversation.recall_tools import (
    READ_MAX_CHARS,
    RECALL_PROMPT,
    RECALL_TOOL_SPECS,
    SEARCH_MAX_CHARS,
    call_recall_tool,
    format_hits,
    run_recall_tool,
)

from . import factories as f
from .test_recall import ERROR, condensed, history

TAG = re.compile(r"^\[event (\d+)\] ", re.M)


@pytest.fixture
def store(tmp_path):
    with EventStore(tmp_path / "recall.db") as s:
        yield s


@pytest.fixture
def conv(store):
    conv = store.create_conversation("mine")
    conv.at = history(conv)  # type: ignore[attr-defined]
    condensed(conv)
    assert conv.at not in conv.view().seqs  # type: ignore[attr-defined]
    return conv


def test_the_specs_are_openai_function_specs():
    assert [s["function"]["name"] for s in RECALL_TOOL_SPECS] == ["recall_search", "recall_read"]
    for spec in RECALL_TOOL_SPECS:
        assert spec["type"] == "function" and set(spec["function"]) == {"name", "description", "parameters"}
        params = spec["function"]["parameters"]
        assert params["type"] == "object" and params["required"] and set(params["required"]) <= set(params["properties"])
        for prop in params["properties"].values():
            assert prop["description"] and prop["type"]
        json.dumps(spec)  # plain JSON, as a request carries it
    search, read = (s["function"]["parameters"]["properties"] for s in RECALL_TOOL_SPECS)
    assert search["scope"]["enum"] == ["forgotten", "visible", "all"] and search["query"]["type"] == "string"
    assert read["event_id"]["type"] == "integer"
    assert "recall_search" in RECALL_PROMPT and "recall_read" in RECALL_PROMPT


def test_search_finds_the_forgotten_error_tagged_by_its_id(conv):
    text = call_recall_tool(conv, "recall_search", json.dumps({"query": "frobnicate_widget"}))
    assert [int(n) for n in TAG.findall(text)] == [conv.at]
    line = text.splitlines()[1]
    assert line.startswith(f"[event {conv.at}] ObservationEvent terminal ")
    assert "· hidden by #" in line and "KeyError: 'frobnicate_widget'" in line
    assert "recall_read" in text.splitlines()[-1]
    # The same from a parsed object, and nothing in view matches.
    assert call_recall_tool(conv, "recall_search", {"query": "frobnicate_widget"}) == text
    visible = call_recall_tool(conv, "recall_search", {"query": "frobnicate_widget", "scope": "visible"})
    assert visible.startswith("No event matches") and 'scope "all"' in visible
    assert TAG.findall(call_recall_tool(conv, "recall_search", {"query": "frobnicate", "tool": "terminal"}))
    assert not TAG.findall(call_recall_tool(conv, "recall_search", {"query": "frobnicate", "tool": "browser"}))


def test_read_gives_the_text_the_pair_and_the_neighbours(conv):
    text = call_recall_tool(conv, "recall_read", {"event_id": conv.at})
    assert text.startswith(f"[event {conv.at}] ObservationEvent terminal ")
    assert ERROR in text and "hidden from your context" in text
    assert f"its tool call: event {conv.at - 1}" in text
    assert f"before it: event {conv.at - 2}, event {conv.at - 1} · after it: event {conv.at + 1}, event {conv.at + 2}" in text
    call = call_recall_tool(conv, "recall_read", json.dumps({"event_id": conv.at - 1, "window": 0}))
    assert f"its result: event {conv.at}" in call and "before it: none · after it: none" in call


def test_results_are_capped(store):
    conv = store.create_conversation("long")
    conv.append_many([f.system(), f.user("task")])
    for i in range(30):
        conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}", f"{'blorptastic ' * 40}{i}\n" * 40)])
    condensed(conv)
    text = call_recall_tool(conv, "recall_search", {"query": "blorptastic", "limit": 20, "scope": "all"})
    assert len(text) <= SEARCH_MAX_CHARS
    shown = len(TAG.findall(text))  # one line a hit, as many lines as fit, and a note of the rest
    assert 10 < shown < 20 and f"[{20 - shown} more hits left out to keep this under 4000 characters]" in text
    assert text.splitlines()[-1].startswith("Read one in full")
    many = call_recall_tool(conv, "recall_search", {"query": "blorptastic", "limit": 500, "scope": "all"})
    assert many == text  # the limit is capped at 20
    big = call_recall_tool(conv, "recall_read", {"event_id": 3})
    assert "characters left out" in big and "cut to 6000 characters" in big
    assert len(big) <= READ_MAX_CHARS + 400  # the text, and a few lines around it


def test_a_long_search_says_where_it_was_cut(store):
    conv = store.create_conversation("cut")
    history(conv, 30)
    hits = conv.search("checks", limit=20, scope="all")
    cut = format_hits(hits, "checks", "all", max_chars=700)
    assert len(cut) <= 700 and re.search(r"\[\d+ more hits left out to keep this under 700 characters\]", cut)
    assert cut.splitlines()[-1].startswith("Read one in full")


def test_recall_never_sees_another_conversation(store, conv):
    other = store.create_conversation("other")
    other.append_many([f.system(), f.user("other")])
    for i in range(100):
        other.append_many([f.action(f"o{i}", f"k{i}"), f.observation(f"k{i}", f"zorblax_gadget {i}")])
    text = call_recall_tool(conv, "recall_search", {"query": "zorblax_gadget", "scope": "all"})
    assert text.startswith("No event matches") and not TAG.findall(text)
    assert call_recall_tool(conv, "recall_read", {"event_id": 150}).startswith("Error: there is no event 150")
    assert "zorblax_gadget 74" in call_recall_tool(other, "recall_read", {"event_id": 151})


def test_the_recall_tools_own_events_are_not_hits(store):
    """An agent stores its call before running it: the search must not find itself."""
    conv = store.create_conversation("echo")
    history(conv, 10, error_at=-1)
    args = {"query": "zorblax_gadget", "scope": "all"}
    conv.append(f.action("r", "s1", tool="recall_search", args=args))
    assert call_recall_tool(conv, "recall_search", args).startswith("No event matches")
    assert TAG.findall(call_recall_tool(conv, "recall_search", {**args, "tool": "recall_search"}))


@pytest.mark.parametrize("name, arguments, says", [
    ("recall_search", {"query": "x y", "scope": "everything"}, "scope must be one of forgotten, visible, all"),
    ("recall_search", {"query": "   "}, "the query is empty"),
    ("recall_search", {}, "query is required"),
    ("recall_search", {"query": 3}, "query must be a string"),
    ("recall_search", {"query": "ok", "limit": 0}, "limit must be at least 1"),
    ("recall_search", {"query": "ok", "limit": "many"}, "limit must be an integer"),
    ("recall_search", "{not json", "the arguments are not JSON"),
    ("recall_search", "[1, 2]", "must be a JSON object"),
    ("recall_read", {"event_id": 100_000}, "there is no event 100000 in this conversation"),
    ("recall_read", {"event_id": -1}, "event_id must be at least 0"),
    ("recall_read", {}, "event_id is required"),
    ("recall_forget", {}, "unknown tool 'recall_forget'"),
])
def test_errors_come_back_as_text(conv, name, arguments, says):
    result = run_recall_tool(conv, name, arguments)
    assert result.is_error and result.text.startswith("Error: ") and says in result.text
    assert call_recall_tool(conv, name, arguments) == result.text


def test_numbers_given_as_strings_are_taken(conv):
    text = call_recall_tool(conv, "recall_read", {"event_id": str(conv.at), "window": "1"})
    assert text.startswith(f"[event {conv.at}]") and f"before it: event {conv.at - 1} ·" in text
