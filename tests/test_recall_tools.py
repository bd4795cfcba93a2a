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


# --- whatever a model sends: an Error text or a result, never an exception ------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from openhands_memory.conversation.recall_tools import MAX_ID, MAX_QUERY_WORDS  # noqa: E402

EDGES = [2**63, 2**64, -(2**63) - 1, MAX_ID, MAX_ID + 1, 10**300, 1e300, -1e300, float("nan"), float("inf"),
         float("-inf"), 0.5, -0.0, True, False, None, "", " ", "1e3", "\u00b2", "--5", "9" * 5000, [], {}, [1],
         {"a": 1}]
VALUES = st.one_of(
    st.sampled_from(EDGES), st.integers(), st.floats(), st.text(max_size=30),
    st.text(max_size=8).map(lambda t: f"{t}\x00{t}"),  # NUL
    st.tuples(st.text(max_size=8), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)).map("".join),
    st.integers(1, 2000).map(lambda n: " ".join(f"w{i}" for i in range(n))),  # up to 2,000 words
    st.integers(1000, 100_000).map(lambda n: "é" * n),
)
KEYS = st.one_of(st.sampled_from(["query", "scope", "limit", "tool", "event_id", "window", "conversation_id"]),
                 st.text(max_size=10))
ARGUMENTS = st.dictionaries(KEYS, VALUES, max_size=5)
TAKES = {"recall_search": {"query", "scope", "limit", "tool"}, "recall_read": {"event_id", "window"}}


def spelled(key: str) -> str:
    """A key as the reply names it: JSON, a lone surrogate escaped."""
    return json.dumps(key, ensure_ascii=False).encode("utf-8", "backslashreplace").decode("utf-8")


def check_reply(result, name: str, args: dict) -> None:
    assert isinstance(result.text, str) and result.text
    result.text.encode("utf-8")  # text a model's API can carry: no lone surrogate
    assert result.text.startswith("Error: ") == result.is_error, result.text[:300]
    if name in TAKES:
        ignored = set(args) - TAKES[name]
        assert ("\n(Ignored " in result.text) == bool(ignored), result.text[-300:]
        for key in ignored:
            assert spelled(key)[:40] in result.text, (key, result.text[-300:])
    if result.is_error:
        assert "Traceback" not in result.text
        first = result.text.splitlines()[0]
        assert len(first) < 600, first[:600]  # the model's own value is never echoed whole


@pytest.fixture
def any_conv(database_url):
    with EventStore(database_url) as store:
        conv = store.create_conversation("mine")
        conv.at = history(conv, 20)  # type: ignore[attr-defined]
        condensed(conv)
        yield conv


@pytest.mark.parametrize("name", ["recall_search", "recall_read"])
def test_any_arguments_come_back_as_text_on_both_backends(any_conv, name):
    """The OverflowError (event_id 2^63, 1e300), the SQLite or PostgreSQL error (NUL in the
    query, 1,000 words), the UnicodeEncodeError (a lone surrogate) of before: each a text."""

    @settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(args=ARGUMENTS, as_json=st.booleans())
    def run(args, as_json):
        sent = json.dumps(args) if as_json else args  # json spells NaN, inf and lone surrogates
        result = run_recall_tool(any_conv, name, sent)
        check_reply(result, name, json.loads(sent) if as_json else args)

    run()


@pytest.mark.parametrize("arguments, says", [
    ({"event_id": 2**63}, "Error: there is no event 9223372036854775808 in this conversation"),
    ({"event_id": 1e300}, "Error: there is no event 100000000000… (301 digits) in this conversation"),
    ({"event_id": MAX_ID + 1}, f"Error: there is no event {MAX_ID + 1} in this conversation"),
    ({"event_id": float("nan")}, "Error: event_id must be an integer, not NaN"),
    ({"event_id": "\u00b2"}, 'Error: event_id must be an integer, not "\u00b2"'),
    ({"event_id": "9" * 5000}, "Error: event_id must be an integer, not \"999"),
    ({"event_id": 1, "window": float("inf")}, "Error: window must be an integer, not Infinity"),
])
def test_read_arguments_past_what_storage_holds(any_conv, arguments, says):
    result = run_recall_tool(any_conv, "recall_read", arguments)
    assert result.is_error and result.text.startswith(says), result.text


@pytest.mark.parametrize("arguments, says", [
    ({"query": "x\ud800y"}, "Error: query holds a lone surrogate (U+D800 at character 1), which is not text"),
    ({"query": "ok", "tool": "\udcff"}, "Error: tool holds a lone surrogate (U+DCFF at character 0)"),
    ({"query": "é" * 100_000}, "Error: query is 100,000 characters long; give at most 1,000"),
    ({"query": " ".join(["w"] * 500)}, f"Error: the query has 500 words; give at most {MAX_QUERY_WORDS}"),
    ({"query": "ok", "limit": float("-inf")}, "Error: limit must be an integer, not -Infinity"),
    ({"query": "ok", "scope": "x" * 100}, "Error: scope is 100 characters long"),
])
def test_search_arguments_no_search_could_take(any_conv, arguments, says):
    result = run_recall_tool(any_conv, "recall_search", arguments)
    assert result.is_error and result.text.startswith(says), result.text


def test_a_nul_in_the_query_is_a_search_not_a_fault(any_conv):
    """A NUL in the query (SQLite's "unterminated string", PostgreSQL's DataError before) is
    searched, the words around it finding the event, or refused as the search's own error:
    never the database failing."""
    result = run_recall_tool(any_conv, "recall_search", {"query": "frobnicate\x00widget", "scope": "all"})
    if result.is_error:
        assert "failed" not in result.text.splitlines()[0], result.text
    else:
        assert [int(n) for n in TAG.findall(result.text)] == [any_conv.at]  # type: ignore[attr-defined]


def test_unknown_arguments_are_named_as_ignored(conv):
    text = call_recall_tool(conv, "recall_search", {"query": "frobnicate_widget", "conversation_id": "someone-else"})
    assert [int(n) for n in TAG.findall(text)] == [conv.at]  # this conversation's hit, as without it
    assert text.endswith('(Ignored "conversation_id": recall_search takes only query, scope, limit, tool; '
                         "it always serves this conversation.)")
    read = call_recall_tool(conv, "recall_read", json.dumps({"event_id": conv.at, "conversation": 7, "x\ud800": 1}))
    assert read.startswith(f"[event {conv.at}]")
    assert read.endswith('(Ignored "conversation", "x\\ud800": recall_read takes only event_id, window; '
                         "it always serves this conversation.)")
    wrong = call_recall_tool(conv, "recall_read", {"event_id": -1, "conversation_id": "x"})
    assert wrong.startswith("Error: event_id must be at least 0") and '(Ignored "conversation_id"' in wrong


def test_a_damaged_database_is_an_error_naming_it_never_no_results(tmp_path):
    """A fault of the store (its file overwritten under an open connection) comes back as an
    Error text that names the database's error: not swallowed, not "No event matches"."""
    path = tmp_path / "damaged.db"
    with EventStore(path) as store:
        conv = store.create_conversation("mine")
        at = history(conv, 30)
        condensed(conv)
    with EventStore(path, readonly=True) as store:
        conv = store.conversation("mine")  # nothing read of the events yet: no page is cached
        size = path.stat().st_size
        with open(path, "r+b") as f:  # every page past the schema's
            f.seek(8192)
            f.write(b"\xff" * (size - 8192))
        for name, arguments in (("recall_search", {"query": "frobnicate_widget"}), ("recall_read", {"event_id": at})):
            result = run_recall_tool(conv, name, arguments)
            assert result.is_error, result.text
            assert result.text == f"Error: {name} failed: the database: DatabaseError: database disk image is malformed"


def test_a_lost_postgresql_database_is_an_error_naming_it(postgres_database_factory):
    import psycopg

    url = postgres_database_factory()
    with EventStore(url) as store:
        conv = store.create_conversation("mine")
        at = history(conv, 30)
        condensed(conv)
    with EventStore(url, readonly=True) as store:
        conv = store.conversation("mine")
        assert TAG.findall(call_recall_tool(conv, "recall_search", {"query": "frobnicate_widget"}))
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        for tool, arguments in (("recall_search", {"query": "frobnicate_widget"}), ("recall_read", {"event_id": at})):
            result = run_recall_tool(conv, tool, arguments)
            assert result.is_error and result.text.startswith(f"Error: {tool} failed: "), result.text
            assert f'database "{name}" does not exist' in result.text, result.text
