"""The recall commands (search, show) against what the library says.

A conversation whose early tool result holds a distinctive error is condensed with the
offline summarizer, so that the error is forgotten: `search` must find it by a word and by
a fragment of an identifier, say which condensation hid it, respect --scope visible/all and the
filters, and never show another conversation's rows; `show` must read it back with its tool
call and the ids around it. Human output stays within the terminal's width.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openhands_memory.cli import commands_recall
from openhands_memory.cli.commands_recall import MARK_CLOSE, MARK_OPEN, fit_snippet
from openhands_memory.condensers import LLMSummarizingCondenser
from openhands_memory.conversation import EventStore

from . import factories as f
from .cli_runner import invoke, run
from .test_cli import narrow
from .test_cli_tree import refused

CID = "recall-1"
OTHER = "other-1"
ERROR = ("Traceback (most recent call last):\n  File \"src/parser/config_loader.py\", line 42\n"
         "KeyError: 'frobnicate_widget' in src/parser/config_loader.py line 42")
CALL, RESULT = 8, 9  # the tool call whose result is the error, and the result
FRAGMENT = "obnicate_wid"  # 12 characters from inside an identifier: no word of the text


def build(db: Path | str) -> int:
    """0: system, 1: the task, 2..61: 30 tool calls and results (every 7th the task tracker;
    the result at 9 is the error), then a condensation that forgets the early ones; its id
    is returned. Another conversation holds the same error and a word of its own."""
    with EventStore(db) as store:
        other = store.create_conversation(OTHER)
        other.append_many([f.user("zanzibar first"), f.user(ERROR)])
        conv = store.create_conversation(CID)
        events = [f.system(), f.user("Fix the failing parser test")]
        for i in range(30):
            tool = "task_tracker" if i % 7 == 0 else "terminal"
            text = ERROR if 2 + 2 * i == CALL else f"out {i}"
            events += [f.action(f"r{i}", f"c{i}", tool=tool,
                                args={"command": f"pytest tests/test_parser.py -k case{i}"}),
                       f.observation(f"c{i}", text, tool=tool)]
        conv.append_many(events)
        conv.step(LLMSummarizingCondenser(max_size=20, keep_first=2))
        condensation = len(conv) - 1
        assert conv[condensation].kind == "Condensation"
        assert RESULT not in conv.view().seqs
        return condensation


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, int]:
    db = tmp_path_factory.mktemp("recall") / "recall.db"
    return db, build(db)


@pytest.fixture
def db(built) -> Path:
    return built[0]


@pytest.fixture
def condensation(built) -> int:
    return built[1]


def hits(db: Path, *args: object, conv: str = CID) -> list[dict]:
    report = json.loads(run("search", db, conv, *args, "--json").output)
    assert report["conversation"] == conv
    return report["hits"]


def library(db: Path, query: str, **kw) -> list:
    with EventStore(db, create=False, readonly=True) as store:
        return store.conversation(CID).search(query, **kw)


# --- help --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["search", "show"])
def test_help_of_each_recall_command_has_an_example(name):
    top = run("--help").output
    assert f"  {name} " in top.split("Recall:")[1].split("Try it:")[0]
    sub = run(name, "--help").output
    assert sub.startswith(f"Usage: openhands-memory {name} ")
    assert f"Example:\n    openhands-memory {name} agent.db fix-bug" in sub
    assert "--json" in sub
    narrow(sub)
    narrow(top)


# --- search ------------------------------------------------------------------------------------


def test_search_finds_the_forgotten_error_by_a_word(db, condensation):
    result = run("search", db, CID, "frobnicate_widget")
    narrow(result.stdout)
    lines = result.stdout.splitlines()
    assert lines[0] == f'{CID} · 1 hit for "frobnicate_widget" among forgotten events'
    assert lines[1].split()[:3] == [str(RESULT), "observation", "terminal"]
    assert lines[1].endswith(f"hidden by #{condensation}")
    assert lines[2].startswith("    ") and f"KeyError: '{MARK_OPEN}frobnicate_widget{MARK_CLOSE}'" in lines[2]
    assert len(lines) == 3
    found = hits(db, "frobnicate_widget")
    assert [h["seq"] for h in found] == [RESULT] == [h.seq for h in library(db, "frobnicate_widget")]
    assert found[0]["hidden_by"] == condensation


def test_search_finds_it_by_a_fragment_of_an_identifier(db, condensation):
    assert len(FRAGMENT) == 12
    out = run("search", db, CID, FRAGMENT).stdout
    narrow(out)
    assert f"hidden by #{condensation}" in out
    assert f"{MARK_OPEN}{FRAGMENT}{MARK_CLOSE}" in out
    found = hits(db, FRAGMENT)
    assert [h["seq"] for h in found] == [RESULT]
    assert "substring" in found[0]["found_by"]


def test_visible_does_not_find_it_and_all_does(db, condensation):
    assert hits(db, "frobnicate_widget", "--scope", "visible") == []
    out = run("search", db, CID, "frobnicate_widget", "--scope", "visible").stdout
    assert out == f'no hits for "frobnicate_widget" among the events in view of {CID}\n'
    every = hits(db, "frobnicate_widget", "--scope", "all")
    assert [h["seq"] for h in every] == [RESULT]
    # "parser" is in every call: in view too, where --visible finds the newest ones.
    visible = hits(db, "parser", "--scope", "visible", "--limit", 50)
    assert visible and all(h["hidden_by"] is None for h in visible)
    assert {h["seq"] for h in visible} == {h.seq for h in library(db, "parser", limit=50, scope="visible")}
    forgotten = hits(db, "parser", "--limit", 50)
    assert forgotten and all(h["hidden_by"] == condensation for h in forgotten)
    assert not {h["seq"] for h in visible} & {h["seq"] for h in forgotten}
    assert {h["seq"] for h in hits(db, "parser", "--scope", "all", "--limit", 50)} == (
        {h["seq"] for h in visible} | {h["seq"] for h in forgotten})


def test_kind_and_tool_filter(db):
    assert {h["kind"] for h in hits(db, "parser", "--scope", "all", "--kind", "action", "-n", 50)} == {"ActionEvent"}
    assert hits(db, "frobnicate_widget", "--kind", "action") == []
    assert [h["seq"] for h in hits(db, "frobnicate_widget", "--kind", "ObservationEvent")] == [RESULT]
    both = hits(db, "frobnicate_widget", "--scope", "all", "--kind", "action", "--kind", "observation")
    assert [h["seq"] for h in both] == [RESULT]
    tracker = hits(db, "parser", "--scope", "all", "--tool", "task_tracker", "-n", 50)
    assert tracker and {h["tool"] for h in tracker} == {"task_tracker"}
    assert {h["seq"] for h in tracker} == {2 + 2 * i for i in range(0, 30, 7)}
    assert hits(db, "frobnicate_widget", "--tool", "task_tracker") == []
    mixed = hits(db, "parser", "--scope", "all", "--tool", "task_tracker", "--tool", "terminal", "-n", 50)
    # The 30 calls and the error's result; the task (a message, with no tool) is left out.
    assert sorted(h["seq"] for h in mixed) == sorted([2 + 2 * i for i in range(30)] + [RESULT])
    assert 1 in {h["seq"] for h in hits(db, "parser", "--scope", "all", "-n", 50)}


def test_time_filters(db):
    assert hits(db, "frobnicate_widget", "--before", "2000-01-01") == []
    assert [h["seq"] for h in hits(db, "frobnicate_widget", "--after", "2000-01-01 00:00")] == [RESULT]
    assert hits(db, "frobnicate_widget", "--after", "2999-12-31T23:59") == []


def test_json_shape(db, condensation):
    report = json.loads(run("search", db, CID[:6], "KeyError", "--json").output)
    assert set(report) == {"conversation", "query", "scope", "hits"}
    assert (report["conversation"], report["query"], report["scope"]) == (CID, "KeyError", "forgotten")
    hit, = report["hits"]
    assert set(hit) == {"seq", "kind", "tool", "timestamp", "snippet", "match", "score", "hidden_by", "found_by"}
    assert (hit["seq"], hit["kind"], hit["tool"], hit["hidden_by"]) == (RESULT, "ObservationEvent", "terminal",
                                                                        condensation)
    start, end = hit["match"]
    assert hit["snippet"][start:end] == "KeyError"
    assert hit == json.loads(json.dumps(library(db, "KeyError")[0].to_dict()))
    assert json.loads(run("search", db, CID, "KeyError", "--scope", "all", "--json").output)["scope"] == "all"
    assert json.loads(run("search", db, CID, "KeyError", "--scope", "visible", "--json").output)["scope"] == "visible"


def test_another_conversations_rows_never_appear(db):
    assert hits(db, "zanzibar", "--scope", "all") == []
    assert [h["seq"] for h in hits(db, "frobnicate_widget", "--scope", "all", "-n", 50)] == [RESULT]
    # The other conversation finds its own.
    assert [h["seq"] for h in hits(db, "zanzibar", "--scope", "all", conv=OTHER)] == [0]
    assert [h["seq"] for h in hits(db, "frobnicate_widget", "--scope", "all", conv=OTHER)] == [1]


def test_no_hits_suggests_all_when_searching_forgotten_events(db):
    out = run("search", db, CID, "zanzibar").stdout
    narrow(out)
    assert " ".join(out.split()) == (
        f'no hits for "zanzibar" among forgotten events of {CID} (--scope all searches the events in view too)')
    out = run("search", db, CID, "zanzibar", "--scope", "all").stdout
    assert out == f'no hits for "zanzibar" on the whole branch of {CID}\n'


def test_the_limit_is_said_when_reached(db):
    out = run("search", db, CID, "parser", "--scope", "all", "-n", 3).stdout
    narrow(out)
    assert out.splitlines()[0].startswith(f'{CID} · 3 hits for "parser" on the whole branch (the best 3')
    body = out.splitlines()[-6:]
    assert [line.split()[0] for line in body[::2]] == ["60", "58", "56"]
    assert all(line.startswith("    ") and f"{MARK_OPEN}parser{MARK_CLOSE}" in line for line in body[1::2])
    assert len(hits(db, "parser", "--scope", "all", "-n", 3)) == 3


@pytest.mark.parametrize("columns", [40, 60, 80, 120])
def test_every_line_fits_the_terminal(db, columns):
    for args in (("frobnicate_widget",), (FRAGMENT,), ("parser", "--scope", "all"),
                 ("parser", "--scope", "all", "-n", 50),
                 ("zanzibar",)):
        narrow(run("search", db, CID, *args, env={"COLUMNS": str(columns)}).stdout, columns)
    for seq in (CALL, RESULT, 1, 61):
        narrow(run("show", db, CID, seq, env={"COLUMNS": str(columns)}).stdout, columns)


def test_on_a_terminal_the_match_is_highlighted_not_marked(db, monkeypatch):
    monkeypatch.setattr(commands_recall, "highlighting", lambda: True)
    out = run("search", db, CID, "frobnicate_widget", color=True).stdout
    assert "\x1b[7m" in out and "frobnicate_widget\x1b[0m" in out
    assert MARK_OPEN not in out


def test_search_refusals(db):
    assert "not a searched kind" in refused(db, "search", db, CID, "x", "--kind", "bogus", code=1)
    assert "not an ISO date" in refused(db, "search", db, CID, "x", "--before", "yesterday", code=1)
    assert "--limit': '0' is not a whole number from 1" in refused(db, "search", db, CID, "x", "--limit", 0)
    assert "the query is empty" in refused(db, "search", db, CID, "  ")
    assert "no conversation" in refused(db, "search", db, "nope", "KeyError")


# --- fitting a snippet ---------------------------------------------------------------------------


@pytest.mark.parametrize("room", [10, 20, 41, 76, 200])
@pytest.mark.parametrize("at", [0, 50, 150])
def test_fit_snippet_keeps_the_match_in_view(room, at):
    snippet = ("a" * at + "NEEDLE" + "b" * 200)[:160]
    start = snippet.find("NEEDLE")
    text, match = fit_snippet(snippet, (start, start + 6), room, 4)
    assert len(text) + 4 <= max(room, 4 + 3)
    assert match is not None
    shown = text[match[0]:match[1]]
    assert shown and "NEEDLE".startswith(shown)
    if room >= 20:
        assert shown == "NEEDLE"


def test_fit_snippet_without_a_match_cuts_the_end():
    text, match = fit_snippet("x" * 100 + "\x1b[31m", None, 50, 4)
    assert match is None and len(text) == 50 and text.startswith("x")
    assert fit_snippet("a\x1b[0mb", (0, 1), 50, 4) == ("a?[0mb", (0, 1))


# --- show ----------------------------------------------------------------------------------------


def test_show_prints_the_text_its_pair_and_neighbours(db):
    result = run("show", db, CID, RESULT)
    narrow(result.stdout)
    out = result.stdout
    assert out.startswith(f"#{RESULT} result of terminal")
    assert "KeyError: 'frobnicate_widget' in src/parser/config_loader.py line 42" in out
    last = out.splitlines()[-1]
    assert last.startswith(f"tool call: #{CALL} · forgotten · ")
    assert last.endswith(f"before: {RESULT - 2}, {RESULT - 1} · after: {RESULT + 1}, {RESULT + 2}")
    call = run("show", db, CID, CALL).stdout.splitlines()[-1]
    assert call.startswith(f"tool result: #{RESULT} · forgotten · ")
    now = run("show", db, CID, 61).stdout.splitlines()[-1]
    assert now.startswith("tool call: #60 · in view · ") and now.endswith("before: 59, 60 · after: 62")
    task = run("show", db, CID, 1, "--window", 0).stdout
    assert "Fix the failing parser test" in task
    assert task.splitlines()[-1].endswith("before: none · after: none") and "tool" not in task.splitlines()[-1]
    wide = run("show", db, CID, RESULT, "-w", 4).stdout
    narrow(wide)
    # Too long for one line: broken between its parts.
    assert wide.splitlines()[-2].startswith(f"tool call: #{CALL} · forgotten · ")
    assert wide.splitlines()[-1] == "  after: 10, 11, 12, 13"
    assert "· before: 5, 6, 7, 8" in wide.splitlines()[-2]


def test_show_json_is_the_librarys(db):
    report = json.loads(run("show", db, CID[:5], RESULT, "--window", 3, "--json").output)
    with EventStore(db, create=False, readonly=True) as store:
        expected = store.conversation(CID).read(RESULT, window=3).to_dict()
    assert report == json.loads(json.dumps(expected))
    assert report["pair"] == CALL and report["shown"] is False and report["before"] == [6, 7, 8]


def test_show_says_when_the_text_is_cut(db):
    out = run("show", db, CID, RESULT, "--max-chars", 60).stdout
    narrow(out)
    assert "characters left out" in out
    assert "cut to 60 characters (--max-chars for more)" in " ".join(out.split())
    assert json.loads(run("show", db, CID, RESULT, "--max-chars", 60, "--json").output)["truncated"] is True


def test_show_of_an_unknown_event_is_one_error_line(db):
    out = refused(db, "show", db, CID, 999)
    assert out == f"Error: conversation '{CID}' has no event 999\n"
    refused(db, "show", db, CID, RESULT, "--window", -1)
    refused(db, "show", db, "nope", 1)


def test_search_index_says_and_switches(tmp_path):
    db = tmp_path / "switch.db"
    build(db)
    assert "The search index is on." in run("search-index", db).output
    assert json.loads(run("search-index", db, "off", "--json").output) == {"search_index": "off", "changed": True}
    assert "already off" in run("search-index", db, "off").output
    refusal = invoke("search", db, CID, "KeyError")
    assert refusal.exit_code == 1 and "search-index" in refusal.output and len(refusal.output.splitlines()) == 1
    assert "now on" in run("search-index", db, "on").output
    assert hits(db, "frobnicate_widget")
    sub = run("search-index", "--help").output
    assert "Example:\n    openhands-memory search-index agent.db" in sub
